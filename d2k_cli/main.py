"""``d2k submit bundle.zip --wait``: upload a bundle, then follow its evaluation with a progress line.

Configuration: ``--url`` / ``D2K_URL`` (the portal, default http://127.0.0.1:8000) and ``--token`` /
``D2K_TOKEN`` (a team API token from the team's token page). The Idempotency-Key defaults to the
bundle's sha256, so running the same command again after a dropped connection never submits twice.

Exit status: 0 when the submission ends ``evaluated`` or ``published`` (or is queued, without
``--wait``), 1 when it ends ``failed``, ``rejected``, ``error`` or ``cancelled``, 2 for a refused
upload, a usage or connection error, 3 when a quota was hit (the message says when to retry).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path
from urllib import error

from rich.console import Console

from d2k_cli.client import ApiError, Client

GOOD = {"evaluated", "published"}
ACTIVE = {"received", "validated", "queued", "running"}


def progress_line(sub: dict) -> str:
    """``#12 running · task 1/2 silu-and-mul · workload 2/3 · attempt 1``."""
    status = sub.get("status", "?")
    parts = [f"#{sub.get('id')} {status}"]
    prog = (sub.get("progress") or {}).get("progress") or {}
    if status == "running" and prog:
        parts.append(f"task {int(prog.get('task_index', 0)) + 1}/{prog.get('task_count', '?')} {prog.get('task', '')}".rstrip())
        if prog.get("workload_total"):
            parts.append(f"workload {prog.get('workload_done', 0)}/{prog['workload_total']}")
    attempt = sub.get("attempt") or {}
    if attempt.get("number"):
        parts.append(f"attempt {attempt['number']}")
    return " · ".join(parts)


def follow(client: Client, pk: int, console: Console, interval_s: float) -> dict:
    last = ""
    with console.status(f"#{pk}") as spinner:
        while True:
            sub = client.submission(pk)
            line = progress_line(sub)
            if line != last:
                console.log(line)
                last = line
            spinner.update(line)
            if sub["status"] not in ACTIVE:
                return sub
            time.sleep(interval_s)


def show_results(client: Client, pk: int, console: Console) -> None:
    for task in client.results(pk):
        score = task.get("score") or {}
        speed = f" · {score['speedup']:.2f}×" if score.get("speedup") else ""
        console.print(f"  {task['slug']}: {task['status']}{speed}"
                      + (f" ({task['error_code']}: {task['reason'][:200]})" if task.get("error_code") else ""))
        for w in task.get("workloads", []):
            mark = "ok" if w["correct"] else "WRONG"
            speedup = f" {w['speedup']:.2f}×" if w.get("speedup") else ""
            console.print(f"    {w['name']}{' (smoke)' if w['smoke'] else ''}: {mark}{speedup}")


def cmd_submit(args: argparse.Namespace, client: Client, console: Console) -> int:
    bundle: Path = args.bundle
    if not bundle.is_file():
        console.print(f"error: {bundle}: no such file")
        return 2
    key = args.idempotency_key or hashlib.sha256(bundle.read_bytes()).hexdigest()
    try:
        status, sub = client.submit(bundle, hardware=args.hardware, idempotency_key=key)
    except ApiError as exc:
        if exc.status == 429:
            console.print(f"quota: {exc.message}; retry after {exc.retry_after} s")
            return 3
        console.print(f"refused: {exc}")
        for p in exc.details if isinstance(exc.details, list) else []:
            console.print(f"  {p.get('file')}: {p.get('message')} (rule: {p.get('rule')})")
        return 2
    console.print(f"{'submitted' if status == 201 else 'already submitted'}: #{sub['id']} ({sub['status']}) "
                  f"{args.url.rstrip('/')}/submissions/{sub['id']}/")
    if not args.wait:
        return 0
    final = follow(client, sub["id"], console, args.interval)
    show_results(client, sub["id"], console)
    reason = (final.get("attempt") or {}).get("reason")
    if final["status"] not in GOOD and reason:
        console.print(f"reason: {reason}")
    return 0 if final["status"] in GOOD else 1


def cmd_status(args: argparse.Namespace, client: Client, console: Console) -> int:
    sub = follow(client, args.id, console, args.interval) if args.wait else client.submission(args.id)
    console.print(progress_line(sub))
    show_results(client, args.id, console)
    return 0 if sub["status"] in GOOD | ACTIVE else 1


def cmd_cancel(args: argparse.Namespace, client: Client, console: Console) -> int:
    console.print(progress_line(client.cancel(args.id)))
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="d2k", description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default=os.environ.get("D2K_URL", "http://127.0.0.1:8000"))
    ap.add_argument("--token", default=os.environ.get("D2K_TOKEN", ""))
    ap.add_argument("--interval", type=float, default=2.0, help="seconds between polls")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("submit", help="upload a bundle (.zip or .tar.gz)")
    p.add_argument("bundle", type=Path)
    p.add_argument("--hardware", help="hardware profile (overrides the manifest's)")
    p.add_argument("--wait", action="store_true", help="follow the evaluation to the end")
    p.add_argument("--idempotency-key", default="", help="default: the bundle's sha256")
    p.set_defaults(func=cmd_submit)
    p = sub.add_parser("status", help="a submission's status and results")
    p.add_argument("id", type=int)
    p.add_argument("--wait", action="store_true")
    p.set_defaults(func=cmd_status)
    p = sub.add_parser("cancel", help="cancel a queued or running submission")
    p.add_argument("id", type=int)
    p.set_defaults(func=cmd_cancel)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    console = Console(stderr=False, highlight=False, log_path=False)
    if not args.token:
        console.print("error: no token: pass --token or set D2K_TOKEN (create one on your team's token page)")
        return 2
    client = Client(args.url, args.token)
    try:
        return args.func(args, client, console)
    except ApiError as exc:
        console.print(f"error: {exc}")
        return 2
    except (error.URLError, OSError) as exc:
        console.print(f"error: cannot reach {args.url}: {exc}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
