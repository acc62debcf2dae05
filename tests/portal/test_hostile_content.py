"""Hostile content inside well-formed archives: malformed and oversized manifests and transcripts,
unknown task slugs, non-UTF-8 and binary files where text is expected.

Each case is posted through the API (the error body names file, rule and problem; nothing is
written, see :meth:`tests.portal.hostile.Uploader.refuse`); one case of each family also goes
through the Submit form, which runs the same validation and shows the same problems in its table.
Several of these ended in a 500 before (NUL characters reached PostgreSQL, deep nesting blew the
parsers' recursion): a refusal must be a clear 400.
"""

from __future__ import annotations

import json
import os
import random
import zipfile

import pytest
from django.test import Client
from rest_framework.test import APIClient

from agents.transcript import MAX_LINE_BYTES, MAX_TRANSCRIPT_BYTES
from evaluator.manifest import MANIFEST_MAX_BYTES
from portal.submissions.models import Submission
from tests.portal import hostile as h

pytestmark = pytest.mark.django_db

TOML = "submission.toml"
KERNEL = "silu-and-mul/kernel.py"
TRANSCRIPT = "silu-and-mul/transcript.jsonl"


@pytest.fixture
def api(catalogue, media, settings, tmp_path) -> h.Uploader:
    return h.team_uploader("api", media, settings, tmp_path)


@pytest.fixture
def form(catalogue, media, settings, tmp_path) -> h.Uploader:
    return h.team_uploader("form", media, settings, tmp_path)


def _noise(n: int) -> str:
    """Text that does not compress 100:1 (so the size rule, not the ratio rule, is what trips)."""
    return os.urandom(n // 2 + 1).hex()[:n]


# --- 4a. manifests ---------------------------------------------------------------------------------

HEAD = 'model = "m"\nprovider = "p"\nharness = "h"\nguidance = "none"\nhardware = "cpu-interpret"\n'
MANIFESTS = {
    # name: (submission.toml, rule, what the message says)
    "unclosed-string": ('model = "m\n', "manifest-syntax", "is not valid TOML"),
    "duplicate-key": (HEAD + 'model = "again"\ntasks = ["silu-and-mul"]\n', "manifest-syntax", "is not valid TOML"),
    "json-not-toml": (json.dumps({"model": "m", "tasks": ["silu-and-mul"]}), "manifest-syntax", "is not valid TOML"),
    "deep-nesting": (HEAD + "x = " + "[" * 5000 + "]" * 5000 + "\n", "manifest-syntax", "nested too deeply"),
    "not-utf8": (HEAD.encode() + b'notes = "\xff\xfe"\ntasks = ["silu-and-mul"]\n', "encoding", "is not UTF-8"),
    "empty": ("", "manifest-missing-key", "model: "),
    "model-is-a-number": (HEAD.replace('"m"', "5") + 'tasks = ["silu-and-mul"]\n', "manifest-schema", "model: "),
    "budget-is-text": (HEAD + 'budget = "many"\ntasks = ["silu-and-mul"]\n', "manifest-schema", "budget: "),
    "tasks-is-text": (HEAD + 'tasks = "silu-and-mul"\n', "manifest-schema", "tasks: "),
    "task-is-a-number": (HEAD + "tasks = [1]\n", "manifest-schema", "tasks.0"),
    "slug-is-a-number": (HEAD + "tasks = [{slug = 5}]\n", "manifest-schema", "tasks.0.slug"),
    "negative-turns": (HEAD + 'tasks = [{slug = "silu-and-mul", turns_used = -1}]\n', "manifest-schema",
                       "tasks.0.turns_used"),
    "future-version": (HEAD + 'schema_version = 2\ntasks = ["silu-and-mul"]\n', "manifest-schema", "schema_version"),
    "notes-too-long": (HEAD + f'notes = "{"x" * 4001}"\ntasks = ["silu-and-mul"]\n', "manifest-schema", "notes: "),
    "nul-in-model": (HEAD.replace('"m"', '"a\\u0000b"') + 'tasks = ["silu-and-mul"]\n', "manifest-schema",
                     "model: Value error, NUL characters are not allowed"),
    "nul-in-notes": (HEAD + 'notes = "\\u0000"\ntasks = ["silu-and-mul"]\n', "manifest-schema", "NUL characters"),
    "oversized": (HEAD + 'tasks = ["silu-and-mul"]\n' + "".join(f"# {_noise(98)}\n" for _ in range(2700)),
                  "manifest-size", f"the limit is {MANIFEST_MAX_BYTES:,}"),
}


@pytest.mark.parametrize("case", list(MANIFESTS))
def test_malformed_manifests(api, case):
    text, rule, message = MANIFESTS[case]
    refusal = api.refuse(h.zip_with(h.base_files(**{TOML: text})))
    assert refusal.status == 400 and (TOML, rule) in refusal.problems, refusal
    assert message in refusal.text, refusal.text


# --- 4b. transcripts -------------------------------------------------------------------------------

def transcript(*, turns: int = 2, **header: object) -> list[dict]:
    lines: list[dict] = [{"kind": "header", "provider": "p", "model": "m", "guidance": "none", "budget": 350,
                          "task": "silu-and-mul", **header}]
    lines += [{"kind": "event", "turn": t, "role": "assistant", "content": f"turn {t}"} for t in range(1, turns + 1)]
    return [*lines, {"kind": "footer", "stop_reason": "done", "turns_used": turns}]


def jsonl(lines: list[dict]) -> str:
    return "".join(json.dumps(line) + "\n" for line in lines)


def _long_line() -> str:
    lines = transcript()
    lines[1]["content"] = _noise(MAX_LINE_BYTES)
    return jsonl(lines)


def _swap(index: int, **changes: object) -> str:
    lines = transcript()
    lines[index] = {**lines[index], **changes}
    return jsonl(lines)


TRANSCRIPTS = {
    # name: (content, what the message says)
    "plain-text": ("I wrote a kernel.\n", "line 1: not JSON"),
    "pretty-printed-json": (json.dumps(transcript(), indent=2), "line 1: not JSON"),
    "json-array": (json.dumps(transcript()) + "\n", "line 1:"),
    "no-header": (jsonl(transcript()[1:]), "line 1: the first line must be the header"),
    "unknown-role": (_swap(1, role="root"), "line 2: role:"),
    "turn-is-text": (_swap(1, turn="one"), "line 2: turn:"),
    "unknown-key": (_swap(0, exec="rm -rf /"), "line 1: exec: Extra inputs are not permitted"),
    "after-footer": (jsonl(transcript()) + jsonl(transcript()[:1]), "line 5: nothing may follow the footer"),
    "raw-nul": (jsonl(transcript()).replace("turn 1", "turn\x001"), "line 2: not JSON"),
    "not-utf8": (b"\xff\xfe" + jsonl(transcript()).encode("utf-16-le"), "not UTF-8 (byte 0)"),
    "deep-nesting": ("[" * 5000 + "]" * 5000 + "\n", "line 1: not JSON: nested too deeply"),
    "line-too-long": (_long_line(), f"longer than {MAX_LINE_BYTES:,} characters"),
}


@pytest.mark.parametrize("case", list(TRANSCRIPTS))
def test_malformed_transcripts(api, case):
    content, message = TRANSCRIPTS[case]
    refusal = api.refuse(h.zip_with(h.base_files(**{TRANSCRIPT: content})))
    assert refusal.status == 400 and refusal.problems == [(TRANSCRIPT, "transcript")], refusal
    assert message in refusal.text, refusal.text


def test_a_huge_transcript_is_refused(api):
    """Over the format's 64 MiB, in lines under the line limit, compressing ~25:1 (not a bomb)."""
    rng = random.Random(7)
    words = ["kernel", "triton", "block", "warp"]
    event = jsonl([{"kind": "event", "turn": 1, "role": "tool",
                    "content": " ".join(rng.choice(words) for _ in range(200_000))}])  # ~700 KB a line
    head, *_, foot = transcript(turns=1)
    content = (jsonl([head]) + event * (MAX_TRANSCRIPT_BYTES // len(event) + 2) + jsonl([foot])).encode()
    assert len(content) > MAX_TRANSCRIPT_BYTES
    buf = h.io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for name, data in {**h.base_files(), TRANSCRIPT: content}.items():
            zf.writestr(name, data)
    refusal = api.refuse(buf.getvalue())
    assert refusal.problems == [(TRANSCRIPT, "transcript")] and f"the limit is {MAX_TRANSCRIPT_BYTES:,}" in refusal.text


# --- 5. unknown task slugs -----------------------------------------------------------------------

SLUGS = {
    # name: (tasks = ..., rule, message)
    "unknown": ('["silu-and-mul", "no-such-task"]', "unknown-task", "no task 'no-such-task' in the catalogue"),
    "unknown-in-a-table": ('[{slug = "no-such-task"}]', "unknown-task", "no task 'no-such-task'"),
    "traversal": ('["../../etc"]', "manifest-schema", "tasks.0: String should match pattern"),
    "upper-case": ('["SILU-AND-MUL"]', "manifest-schema", "tasks.0: String should match pattern"),
    "too-long": (f'["{"a" * 65}"]', "manifest-schema", "tasks.0: String should have at most 64 characters"),
    "markup": ('["<script>"]', "manifest-schema", "tasks.0: String should match pattern"),
}


@pytest.mark.parametrize("case", list(SLUGS))
def test_unknown_task_slugs_in_the_manifest(api, case):
    tasks, rule, message = SLUGS[case]
    refusal = api.refuse(h.zip_with(h.base_files(**{TOML: h.manifest(tasks)})))
    assert refusal.status == 400 and (TOML, rule) in refusal.problems and message in refusal.text, refusal


def test_unknown_task_slugs_in_the_api_and_the_pages(api, catalogue):
    anon = APIClient(HTTP_HOST="localhost")
    response = anon.get("/api/v1/tasks/no-such-task/")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert Client(HTTP_HOST="localhost").get("/tasks/no-such-task/").status_code == 404
    assert api.client.get("/api/v1/submissions/?task=no-such-task").json()["results"] == []
    sub = api.post(h.zip_with(h.base_files())).json()["id"]
    for page in ("kernel", "transcript"):
        assert api.client.get(f"/submissions/{sub}/{page}/no-such-task/").status_code == 404


# --- 6. binary and non-UTF-8 where text is expected -------------------------------------------------

KERNELS = {
    # name: (kernel.py bytes, rule, message)
    "invalid-utf8": (h.KERNEL.encode().replace(b"fused", b"fus\xe9d", 1), "encoding", "is not UTF-8 (byte "),
    "utf16": (h.KERNEL.encode("utf-16"), "encoding", "is not UTF-8 (byte 0)"),
    "png": (b"\x89PNG\r\n\x1a\n" + os.urandom(2048), "encoding", "is not UTF-8"),
    "nul-bytes": (h.KERNEL.encode() + b"\0\0", "python-syntax", "source code string cannot contain null bytes"),
    "deep-nesting": ((h.KERNEL + "x = " + "+".join(["1"] * 50_000) + "\n").encode(), "python-syntax",
                     "nested too deeply"),
    "too-large": ((h.KERNEL + "".join(f"# {_noise(98)}\n" for _ in range(11_000))).encode(), "kernel-size",
                  "the limit is 1,048,576"),
}


@pytest.mark.parametrize("case", list(KERNELS))
def test_binary_and_non_utf8_kernels(api, case):
    data, rule, message = KERNELS[case]
    refusal = api.refuse(h.zip_with(h.base_files(**{KERNEL: data})))
    assert refusal.status == 400 and refusal.problems == [(KERNEL, rule)] and message in refusal.text, refusal


ARCHIVES = {
    # name: (upload, its problems, what the message says)
    "random-bytes": (os.urandom(4096), [("b.zip", "archive")], "is neither a .zip nor a .tar.gz archive"),
    "truncated-zip": (h.zip_with(h.base_files())[:200], [("b.zip", "archive")], "is not a readable zip file"),
    "gzip-not-tar": (h.gzip.compress(b"just text, not a tar stream" * 40), [("b.zip", "archive")],
                     "is not a readable .tar.gz file"),
    "empty": (b"", [], "The submitted file is empty."),  # a field error before it is an archive
}


@pytest.mark.parametrize("case", list(ARCHIVES))
def test_uploads_that_are_not_archives(api, case):
    blob, problems, message = ARCHIVES[case]
    refusal = api.refuse(blob, "b.zip")
    assert refusal.status == 400 and refusal.problems == problems and message in refusal.text, refusal


@pytest.mark.parametrize("design", [b"\xff\xfe# design", b"# design\n\0\0 binary"], ids=["not-utf8", "nul"])
def test_binary_design_documents(api, settings, design):
    settings.D2K_JUDGE_MODEL = "judge-for-tests"  # design-only uploads are accepted only with a judge
    files = {TOML: h.manifest(mode="design"), "silu-and-mul/design.md": design}
    refusal = api.refuse(h.zip_with(files))
    assert refusal.status == 400 and refusal.problems == [("silu-and-mul/design.md", "encoding")], refusal


# --- the same refusals through the Submit form -----------------------------------------------------

FORM_CASES = {
    # name: (archive, the problem the form's table must show)
    "manifest": (lambda: h.zip_with(h.base_files(**{TOML: MANIFESTS["nul-in-model"][0]})), (TOML, "manifest-schema")),
    "transcript": (lambda: h.zip_with(h.base_files(**{TRANSCRIPT: TRANSCRIPTS["deep-nesting"][0]})),
                   (TRANSCRIPT, "transcript")),
    "unknown-task": (lambda: h.zip_with(h.base_files(**{TOML: h.manifest('["no-such-task"]')})),
                     (TOML, "unknown-task")),
    "kernel": (lambda: h.zip_with(h.base_files(**{KERNEL: KERNELS["invalid-utf8"][0]})), (KERNEL, "encoding")),
}


@pytest.mark.parametrize("case", list(FORM_CASES))
def test_the_form_shows_the_same_refusals(form, case):
    build, problem = FORM_CASES[case]
    refusal = form.refuse(build())
    assert refusal.status == 400 and problem in refusal.problems, refusal


SINGLE = {"task": "silu-and-mul", "model": "m", "provider": "p", "harness": "manual"}
SINGLE_KERNELS = {
    # name: (kernel.py bytes, form fields, the problem or form error shown)
    "binary": (b"\x89PNG\r\n\x1a\n\xff", {}, ("silu-and-mul/kernel.py", "encoding")),
    "nul-bytes": (h.KERNEL.encode() + b"\0", {}, ("silu-and-mul/kernel.py", "python-syntax")),
    "unknown-task": (h.KERNEL.encode(), {"task": "no-such-task"}, (TOML, "unknown-task")),
    "slug-traversal": (h.KERNEL.encode(), {"task": "../x"}, "Enter a valid “slug”"),
    "nul-in-model": (h.KERNEL.encode(), {"model": "a\0b"}, "Null characters are not allowed."),
}


@pytest.mark.parametrize("case", list(SINGLE_KERNELS))
def test_single_kernel_uploads_on_the_form(form, case):
    data, fields, shown = SINGLE_KERNELS[case]
    refusal = form.refuse(data, "kernel.py", **{**SINGLE, **fields})
    assert refusal.status == 400
    assert shown in refusal.problems if isinstance(shown, tuple) else shown in refusal.text, refusal


def test_text_outside_ascii_is_not_hostile(form):
    """The control for the cases above: a model name with an emoji is text, and is accepted (it was
    refused as 'not valid TOML' when the form's manifest was written with JSON's ASCII escapes)."""
    response = form.post(h.KERNEL.encode(), "kernel.py", **{**SINGLE, "model": "kernel-bot 🤖", "harness": "ハーネス"})
    assert response.status_code == 302, response.content.decode()[:2000]
    sub = Submission.objects.get()
    assert sub.model.name == "kernel-bot 🤖" and sub.harness.name == "ハーネス"


@pytest.mark.parametrize("reason", ["a\0b", "x" * 4001], ids=["nul", "too-long"])
def test_hostile_reasons_for_cancel_and_rerun(api, reason):
    """The API's optional reason is validated like any field (a NUL was a database error, a 500)."""
    sub = api.post(h.zip_with(h.base_files())).json()["id"]
    for action in ("cancel", "rerun"):
        before = h.state(*api.watch)
        response = api.client.post(f"/api/v1/submissions/{sub}/{action}/", {"reason": reason}, format="json")
        assert response.status_code == 400, response.content[:300]
        assert response.json()["error"]["code"] == "invalid" and "reason" in response.json()["error"]["details"]
        assert h.state(*api.watch) == before
        if action == "cancel":  # the control: the same call with a plain reason goes through
            assert api.client.post(f"/api/v1/submissions/{sub}/cancel/", {"reason": "ok"}, format="json").json()[
                "status"] == "cancelled"
