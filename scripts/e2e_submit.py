"""The client half of ``scripts/device_e2e.sh``: drive a running site through HTTP as its users do.

Standard library only (it runs on the GPU machine, whose python3 has none of the site's packages
on its own path). Against the site at ``--url``:

1. waits for ``/healthz`` and ``/readyz``;
2. the team member signs in (``/accounts/login/``) and creates an API token with
   ``POST /api/v1/tokens/`` on that session, as docs/api.md describes;
3. builds the expert bundle of one task (``submission.toml`` from ``docs/examples/bundle/``, the
   kernel from ``references/<slug>/expert.py``, the example transcript) and uploads it with the
   token (``POST /api/v1/submissions/``) for ``--profile``;
4. polls ``GET /api/v1/submissions/<id>/`` until the evaluation ends, logging every change of
   status and progress; on a timed profile it requires real timings in the results;
5. the moderator signs in and approves it (``GET /api/v1/moderation/queue/``,
   ``POST /api/v1/submissions/<id>/decisions/``);
6. reads the published submission and its results anonymously and the public leaderboard
   (``GET /api/v1/leaderboard/?hardware=<profile>``).

Writes ``e2e-log.txt`` (appended), ``e2e-submission.json`` (the public submission, its results and, as the
team sees them, the engine's output tails), ``e2e-leaderboard.json`` and
``e2e-bundle.zip`` to ``--out``. Exit status 0 when every step passed, 1 otherwise (the log's
last line says which step failed and why).
"""

from __future__ import annotations

import argparse
import hashlib
import http.cookiejar
import io
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ACTIVE = {"received", "validated", "queued", "running"}
#: The shell script's start (epoch seconds), so that both halves of the log share one clock.
T0 = float(os.environ.get("E2E_START") or time.time())


class StepFailed(Exception):
    """A step of the flow did not do what it must; the message says which and why."""


class Log:
    def __init__(self, path: Path):
        self.fh = path.open("a", encoding="utf-8")

    def __call__(self, message: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} +{time.time() - T0:.1f}s  {message}"
        print(line, flush=True)
        self.fh.write(line + "\n")
        self.fh.flush()


class Http:
    """One client: a cookie jar (a browser session) or a bearer token; every request is logged."""

    def __init__(self, base: str, log: Log, who: str, token: str = "", timeout_s: float = 60.0):
        self.base = base.rstrip("/")
        self.log = log
        self.who = who
        self.token = token
        self.timeout_s = timeout_s
        self.jar = http.cookiejar.CookieJar()

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args: Any, **kwargs: Any) -> None:  # a 302 is an answer, not a hop
                return None

        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar), NoRedirect())

    def cookie(self, name: str) -> str:
        return next((c.value for c in self.jar if c.name == name), "")

    def request(self, method: str, path: str, *, data: bytes | None = None, headers: dict[str, str] | None = None,
                expect: tuple[int, ...] = (200,), quiet: bool = False) -> tuple[int, dict[str, str], bytes]:
        headers = dict(headers or {})
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if method not in ("GET", "HEAD") and self.cookie("csrftoken") and not self.token:
            headers.setdefault("X-CSRFToken", self.cookie("csrftoken"))
            headers.setdefault("Referer", self.base + "/")
        req = urllib.request.Request(self.base + path, data=data, headers=headers, method=method)
        t = time.monotonic()
        try:
            with self.opener.open(req, timeout=self.timeout_s) as resp:
                status, body, resp_headers = resp.status, resp.read(), dict(resp.headers)
        except urllib.error.HTTPError as exc:
            status, body, resp_headers = exc.code, exc.read(), dict(exc.headers or {})
        except (urllib.error.URLError, OSError) as exc:
            if not quiet:
                self.log(f"[{self.who}] {method} {path} -> no answer: {exc}")
            raise StepFailed(f"{method} {path}: no answer ({exc})") from None
        ms = (time.monotonic() - t) * 1e3
        if not quiet or status not in expect:
            self.log(f"[{self.who}] {method} {path} -> {status} ({len(body):,} bytes, {ms:.0f} ms)")
        if status not in expect:
            self.log(f"    body: {body[:2000].decode('utf-8', 'replace')}")
            raise StepFailed(f"{method} {path}: expected {'/'.join(map(str, expect))}, got {status}")
        return status, resp_headers, body

    def json(self, method: str, path: str, payload: dict | None = None, *, expect: tuple[int, ...] = (200,),
             quiet: bool = False) -> Any:
        data = json.dumps(payload).encode() if payload is not None else None
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        _, _, body = self.request(method, path, data=data, headers=headers, expect=expect, quiet=quiet)
        return json.loads(body) if body else None

    def sign_in(self, username: str, password: str) -> None:
        """The login form, as a browser fills it: a GET for the CSRF cookie, then the POST."""
        self.request("GET", "/accounts/login/")
        form = urllib.parse.urlencode({"username": username, "password": password,
                                       "csrfmiddlewaretoken": self.cookie("csrftoken")}).encode()
        _, headers, _ = self.request("POST", "/accounts/login/", data=form, expect=(302,),
                                     headers={"Content-Type": "application/x-www-form-urlencoded"})
        if not self.cookie("sessionid"):
            raise StepFailed(f"signing in as {username}: no session cookie")
        self.log(f"[{self.who}] signed in as {username} (redirected to {headers.get('Location', '?')})")


def multipart(fields: dict[str, str], files: dict[str, tuple[str, bytes, str]]) -> tuple[bytes, str]:
    boundary = f"----d2k-e2e-{uuid.uuid4().hex}"
    out = io.BytesIO()
    for name, value in fields.items():
        out.write(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode())
    for name, (filename, blob, ctype) in files.items():
        out.write(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
                  f"Content-Type: {ctype}\r\n\r\n".encode())
        out.write(blob + b"\r\n")
    out.write(f"--{boundary}--\r\n".encode())
    return out.getvalue(), f"multipart/form-data; boundary={boundary}"


def build_bundle(slug: str, profile: str) -> bytes:
    """The expert kernel of ``slug`` as a team would bundle it (docs/bundle-format.md)."""
    example = ROOT / "docs" / "examples" / "bundle"
    manifest = (example / "submission.toml").read_text(encoding="utf-8")
    lines = []
    for line in manifest.splitlines():
        if line.startswith("hardware"):
            line = f'hardware = "{profile}"'
        elif line.startswith("tasks"):
            line = f'tasks = ["{slug}"]'
        elif line.startswith("harness_version"):
            line += '\nnotes = "scripts/device_e2e.sh: the expert kernel, end to end"'
        lines.append(line)
    transcript = (example / "transcript.jsonl").read_text(encoding="utf-8")
    transcript = transcript.replace('"task": "silu-and-mul"', f'"task": "{slug}"')
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("submission.toml", "\n".join(lines) + "\n")
        zf.writestr(f"{slug}/kernel.py", (ROOT / "references" / slug / "expert.py").read_bytes())
        zf.writestr(f"{slug}/transcript.jsonl", transcript)
    return buf.getvalue()


def progress_text(sub: dict) -> str:
    attempt = sub.get("attempt") or {}
    prog = (sub.get("progress") or {}).get("progress") or attempt.get("progress") or {}
    parts = [f"status={sub.get('status')}"]
    if attempt:
        parts.append(f"attempt {attempt.get('number')} {attempt.get('status')} on {attempt.get('queue')}"
                     + (f" by {attempt['worker']}" if attempt.get("worker") else ""))
    if prog and sub.get("status") == "running":
        keys = ("task", "phase", "workload", "workload_done", "workload_total")
        parts.append(" ".join(f"{k}={prog[k]}" for k in keys if prog.get(k) not in (None, "")))
    return " | ".join(parts)


def fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def summarize(results: list[dict], log: Log) -> None:
    for task in results:
        score = task.get("score") or {}
        log(f"  task {task['slug']}: status={task['status']} verdict={task.get('verdict')!r} "
            f"wall={fmt(task.get('wall_s'), '.1f')} s speedup={fmt(score.get('speedup'), '.3f')} "
            f"sol={fmt(score.get('sol_fraction'), '.3f')} findings={task.get('findings') or []}")
        for w in task.get("workloads") or []:
            log(f"    {w['name']:<4} smoke={w['smoke']!s:<5} correct={w['correct']!s:<5} "
                f"baseline={fmt(w.get('baseline_ms'), '.4f')} ms candidate={fmt(w.get('candidate_ms'), '.4f')} ms "
                f"speedup={fmt(w.get('speedup'), '.3f')}x sol={fmt(w.get('sol_fraction'), '.3f')} "
                f"rel_stderr={fmt(w.get('rel_stderr'), '.4f')}")


def run(args: argparse.Namespace, log: Log) -> None:
    out = Path(args.out)
    anon = Http(args.url, log, "anonymous")

    log(f"step 1: wait for the site at {args.url}")
    deadline = time.monotonic() + args.start_timeout
    while True:
        try:
            anon.request("GET", "/healthz", quiet=True)
            break
        except StepFailed:
            if time.monotonic() > deadline:
                anon.log(f"[anonymous] GET /healthz -> no answer for {args.start_timeout:.0f} s")
                raise StepFailed(f"the site did not answer /healthz within {args.start_timeout:.0f} s") from None
            time.sleep(1.0)
    ready = anon.json("GET", "/readyz")
    log(f"  readyz: {json.dumps(ready['checks'])}")
    anon.json("GET", "/healthz")
    anon.json("GET", f"/api/v1/tasks/{args.task}/")

    log(f"step 2: {args.user} signs in and creates an API token (POST /api/v1/tokens/ on the session)")
    member = Http(args.url, log, args.user)
    member.sign_in(args.user, args.password)
    issued = member.json("POST", "/api/v1/tokens/", {"name": "e2e", "days": 1}, expect=(201,))
    log(f"  token {issued['prefix']}... for team {issued['team']}, expires {issued['expires_at']}")
    team = Http(args.url, log, f"token:{issued['team']}", token=issued["token"])

    log(f"step 3: submit the expert bundle of {args.task} for profile {args.profile}")
    blob = build_bundle(args.task, args.profile)
    (out / "e2e-bundle.zip").write_bytes(blob)
    sha = hashlib.sha256(blob).hexdigest()
    log(f"  bundle: {len(blob):,} bytes, sha256 {sha[:16]}..., members "
        f"{zipfile.ZipFile(io.BytesIO(blob)).namelist()}")
    body, ctype = multipart({"hardware": args.profile}, {"bundle": ("bundle.zip", blob, "application/zip")})
    _, _, raw = team.request("POST", "/api/v1/submissions/", data=body, expect=(201,),
                             headers={"Content-Type": ctype, "Idempotency-Key": sha, "Accept": "application/json"})
    sub = json.loads(raw)
    pk = sub["id"]
    log(f"  submission #{pk}: {progress_text(sub)}")
    if sub["hardware"] != args.profile:
        raise StepFailed(f"submission #{pk} targets {sub['hardware']}, not {args.profile}")

    log(f"step 4: follow #{pk} until its evaluation ends (at most {args.eval_timeout:.0f} s)")
    last, started = "", time.monotonic()
    while True:
        sub = team.json("GET", f"/api/v1/submissions/{pk}/", quiet=True)
        line = progress_text(sub)
        if line != last:
            log(f"  #{pk} {line}")
            last = line
        if sub["status"] not in ACTIVE:
            break
        if time.monotonic() - started > args.eval_timeout:
            raise StepFailed(f"#{pk} still {sub['status']} after {args.eval_timeout:.0f} s")
        time.sleep(args.poll)
    log(f"  #{pk} ended {sub['status']} after {time.monotonic() - started:.1f} s "
        f"(started {sub['attempt'].get('started_at')}, finished {sub['attempt'].get('finished_at')})")
    results = team.json("GET", f"/api/v1/submissions/{pk}/results/")
    summarize(results, log)
    if sub["status"] != "evaluated":
        for tail in team.json("GET", f"/api/v1/submissions/{pk}/logs/"):
            log(f"  engine output of {tail['slug']} ({tail['status']}, {tail['error_code']}):\n"
                f"--- stdout\n{tail['stdout_tail']}\n--- stderr\n{tail['stderr_tail']}")
        raise StepFailed(f"#{pk} ended {sub['status']} (attempt: {json.dumps(sub['attempt'])}), not evaluated")
    if not all(t["status"] == "correct" or (t.get("score") or {}).get("correct") for t in results):
        raise StepFailed(f"#{pk}: not every task is correct")
    if args.timed:
        timed = [w for t in results for w in t["workloads"] if not w["smoke"]]
        if not timed or any(w.get("candidate_ms") is None or w.get("baseline_ms") is None for w in timed):
            raise StepFailed(f"#{pk}: the {args.profile} profile must give timings on every real workload")

    log(f"step 5: {args.moderator} signs in and approves #{pk}")
    mod = Http(args.url, log, args.moderator)
    mod.sign_in(args.moderator, args.password)
    queue = mod.json("GET", "/api/v1/moderation/queue/?page_size=200")["results"]
    log(f"  moderation queue: {[q['id'] for q in queue]}")
    if pk not in [q["id"] for q in queue]:
        raise StepFailed(f"#{pk} is not in the moderation queue")
    decided = mod.json("POST", f"/api/v1/submissions/{pk}/decisions/",
                       {"decision": "approve", "reason": "end-to-end run: the expert kernel"})
    log(f"  #{pk} {progress_text(decided)}, published_at {decided.get('published_at')}")
    if decided["status"] != "published":
        raise StepFailed(f"#{pk} is {decided['status']} after the approval")

    log(f"step 6: the public view of #{pk} and the leaderboard")
    public = anon.json("GET", f"/api/v1/submissions/{pk}/")
    public_results = anon.json("GET", f"/api/v1/submissions/{pk}/results/")
    if not public.get("public") or public["status"] != "published":
        raise StepFailed(f"#{pk} is not public after its approval: {public.get('status')}")
    logs = team.json("GET", f"/api/v1/submissions/{pk}/logs/")  # the engine's output tails: the team's view
    (out / "e2e-submission.json").write_text(json.dumps({"submission": public, "results": public_results,
                                                         "logs": logs}, indent=2) + "\n", encoding="utf-8")
    log(f"  wrote e2e-submission.json (status {public['status']}, {len(public_results)} task result(s), "
        f"the engine's output tails)")
    board_path = f"/api/v1/leaderboard/?hardware={urllib.parse.quote(args.profile)}"
    if not args.timed:  # an untimed (interpreter) profile has no board: a 404 that says why
        gone = anon.json("GET", board_path, expect=(404,))
        log(f"  no leaderboard for {args.profile}: {gone.get('error', {}).get('message', gone)}")
        for page in ("/status/", f"/submissions/{pk}/"):
            anon.request("GET", page)
        return
    board = anon.json("GET", board_path)
    nxt = board.get("next")
    while nxt:  # the API pages the board (100 rows by default); the step reads all of it
        page = anon.json("GET", nxt[nxt.index("/api/"):])
        board["rows"] += page["rows"]
        nxt = page.get("next")
    (out / "e2e-leaderboard.json").write_text(json.dumps(board, indent=2) + "\n", encoding="utf-8")
    ours = [r for r in board.get("rows", []) if r.get("submission") == pk]
    log(f"  wrote e2e-leaderboard.json: hardware {board.get('hardware')}, {len(board.get('rows', []))} rows "
        f"({sum(1 for r in board.get('rows', []) if r.get('reference'))} reference)")
    for r in board.get("rows", []):
        log(f"    {'*' if r.get('submission') == pk else ' '} {r['model']:<16} team={r['team'] or '-':<8} "
            f"score={fmt(r.get('performance_score'), '.4f')} correct={r.get('correct')}/{r.get('suite_size')} "
            f"geomean={fmt(r.get('geomean_speedup_correct'), '.3f')} sol={fmt(r.get('mean_sol_fraction'), '.3f')}")
    for page in (f"/leaderboard/?hardware={urllib.parse.quote(args.profile)}", "/status/", f"/submissions/{pk}/"):
        anon.request("GET", page)  # the public pages render too (HTML)
    if not ours:
        raise StepFailed(f"#{pk} is not on the {args.profile} leaderboard")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--profile", required=True, help="hardware profile: h200 or cpu-interpret")
    ap.add_argument("--timed", action="store_true", help="require timings and a leaderboard row")
    ap.add_argument("--task", default="silu-and-mul")
    ap.add_argument("--user", default="alice")
    ap.add_argument("--moderator", default="mod")
    ap.add_argument("--password", required=True)
    ap.add_argument("--start-timeout", type=float, default=60.0)
    ap.add_argument("--eval-timeout", type=float, default=240.0)
    ap.add_argument("--poll", type=float, default=2.0)
    args = ap.parse_args(argv)
    log = Log(Path(args.out) / "e2e-log.txt")
    try:
        run(args, log)
    except StepFailed as exc:
        log(f"FAILED: {exc}")
        return 1
    except Exception as exc:  # noqa: BLE001 - any surprise is a failed run, said plainly
        log(f"FAILED: {type(exc).__name__}: {exc}")
        return 1
    log("PASSED: submitted, evaluated, approved, published, on the API")
    return 0


if __name__ == "__main__":
    sys.exit(main())
