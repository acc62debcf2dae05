"""Script injection in every free-text field a user (or their kernel's output) can set: submitted
through the real entry points, then every page that shows it is rendered and must show it as text.

Each field carries its own tag (``payload("model")``), so the checks prove two things per page:
no payload survives as markup, and the fields the page is meant to show are there, escaped.
Fields: team name (set by operators), token name, the manifest's model/provider/version/harness/
notes and kernel path, the kernel source, every transcript field the viewer shows, the engine's
reason, findings and log (a kernel controls what it prints), moderator and team reasons, the
upload's name and member names on the refusal page, and a query string reflected in a form.
"""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client
from rest_framework.test import APIClient

from evaluator.result import Finding
from portal.submissions import actions
from portal.submissions.models import EvaluationAttempt, Submission
from portal.teams.models import ApiToken
from portal.teams.services import token_create
from tests.portal import hostile as h
from tests.portal.factories import make_team, make_user
from tests.portal.test_state_machine import engine_result, run

pytestmark = pytest.mark.django_db

P = h.payload
KERNEL_PATH = f"k/{P('path')}.py"


def hostile_transcript() -> str:
    lines = [
        {"kind": "header", "provider": P("tprovider"), "model": P("tmodel"), "harness": P("tharness"),
         "guidance": "none", "budget": 350, "task": "silu-and-mul"},
        {"kind": "event", "turn": 0, "role": "user", "content": P("prompt")},
        {"kind": "event", "turn": 1, "role": "assistant", "content": P("content"),
         "tool_calls": [{"id": P("callid"), "name": P("tool"), "arguments": P("args")},
                        {"id": P("resultid"), "name": "check", "arguments": "{}"}]},
        {"kind": "event", "turn": 1, "role": "tool", "tool_call_id": P("resultid"), "content": P("result")},
        {"kind": "footer", "stop_reason": "done", "turns_used": 1, "message": P("footer")},
    ]
    return "".join(json.dumps(line) + "\n" for line in lines)


def hostile_bundle(guidance: str = "none") -> bytes:
    manifest = "".join(f"{k} = {json.dumps(v)}\n" for k, v in {
        "model": P("model"), "provider": P("provider"), "model_version": P("version"), "harness": P("harness"),
        "harness_version": P("hversion"), "guidance": guidance, "hardware": "h200",
        "notes": P("notes") + "\nsecond line"}.items())
    manifest += f"tasks = [{{ slug = \"silu-and-mul\", kernel = {json.dumps(KERNEL_PATH)} }}]\n"
    source = h.KERNEL + f"\n# {P('comment')}\n_NOTE = {P('string')!r}\n"
    files = {"submission.toml": manifest, KERNEL_PATH: source}
    if guidance == "none":
        files["silu-and-mul/transcript.jsonl"] = hostile_transcript()
    return h.zip_with(files)


def hostile_result():  # noqa: ANN201 - the engine's TaskResult
    """What a kernel can make the engine report: its exception text, its output, the scan's notes."""
    return engine_result().model_copy(update={
        "reason": P("reason"), "stderr_tail": P("stderr"),
        "findings": [Finding(kind="note", message=P("finding"), line=3, file=KERNEL_PATH)]})


def evaluate(sub_id: int, number: int) -> None:
    """The worker's side, through the same actions the worker calls."""
    claim = actions.do_start_evaluation(sub_id, number, worker="w1")
    attempt = EvaluationAttempt.objects.get(submission_id=sub_id, number=number)
    assert actions.do_record_task_result(attempt.pk, claim, hostile_result())
    assert actions.do_finish_evaluation(attempt.pk, claim, run(hostile_result())) == "evaluated"


def browser(user=None) -> Client:  # noqa: ANN001
    client = Client(HTTP_HOST="localhost")
    if user is not None:
        client.force_login(user)
    return client


@pytest.fixture
def world(catalogue, media):
    """Everything submitted through the pages and the API; published, with a second run waiting."""
    team, alice = make_team(P("team"), owner=make_user("alice"))
    mod = make_user("mod", moderator=True)
    harness = APIClient(HTTP_HOST="localhost")
    harness.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(team, name='ci', actor=alice).secret}")
    first = harness.post("/api/v1/submissions/", {"bundle": h.SimpleUploadedFile("b.zip", hostile_bundle())},
                         format="multipart")
    assert first.status_code == 201, first.content
    pk = first.json()["id"]
    team_page, mod_page = browser(alice), browser(mod)
    evaluate(pk, 1)
    assert mod_page.post(f"/moderation/{pk}/reject/", {"reason": P("reject")}).status_code == 302
    assert mod_page.post(f"/moderation/{pk}/rerun/", {"reason": P("modrerun")}).status_code == 302
    evaluate(pk, 2)
    assert mod_page.post(f"/moderation/{pk}/approve/", {"reason": P("approve")}).status_code == 302
    assert Submission.objects.get(pk=pk).status == "published"
    # A second submission: cancelled and re-run by the team with a reason, then evaluated (queue).
    second = harness.post("/api/v1/submissions/", {"bundle": h.SimpleUploadedFile("c.zip", hostile_bundle("L1"))},
                          format="multipart").json()["id"]
    assert team_page.post(f"/submissions/{second}/cancel/").status_code == 302
    assert team_page.post(f"/submissions/{second}/rerun/", {"reason": P("teamrerun")}).status_code == 302
    evaluate(second, 2)
    assert team_page.post(f"/teams/{team.slug}/tokens/", {"name": P("token"), "days": 30}).status_code == 200
    return {"team": team, "alice": alice, "mod": mod, "pk": pk, "second": second}


TEAM_FIELDS = ("team", "model", "provider", "version", "harness", "hversion")
TRANSCRIPT_FIELDS = ("tprovider", "tmodel", "tharness", "prompt", "content", "callid", "tool", "args", "resultid",
                     "result", "footer")


def pages(w: dict) -> list[tuple[str, str, tuple[str, ...]]]:
    """(viewer, url, the fields the page must show) for every page showing user-set text."""
    pk, second, slug = w["pk"], w["second"], w["team"].slug
    return [
        ("alice", f"/submissions/{pk}/", (*TEAM_FIELDS, "path", "reject", "approve", "modrerun", "reason", "finding",
                                         "stderr")),
        ("alice", f"/submissions/{pk}/live/", ("reason", "finding")),
        ("alice", f"/submissions/{second}/", ("teamrerun", "model")),
        ("alice", "/submissions/", ("team", "model", "harness")),
        ("alice", f"/submissions/{pk}/kernel/silu-and-mul/", ("path",)),
        ("alice", f"/submissions/{pk}/transcript/silu-and-mul/", TRANSCRIPT_FIELDS),
        ("alice", f"/teams/{slug}/", ("team", "model")),
        ("alice", f"/teams/{slug}/tokens/", ("team", "token")),
        ("mod", "/moderation/", ("team", "model")),
        ("mod", f"/moderation/{second}/", (*TEAM_FIELDS, "notes", "reason", "finding", "stderr")),
        ("mod", f"/moderation/{pk}/", ("reject", "approve", "modrerun", "notes")),
        ("anon", f"/submissions/{pk}/", (*TEAM_FIELDS, "path", "reason", "finding")),
        ("anon", f"/submissions/{pk}/kernel/silu-and-mul/", ("path",)),
        ("anon", "/runs/", ("team", "model", "harness")),
        ("anon", "/leaderboard/?hardware=h200", ()),
        ("anon", "/leaderboard/pairs/?hardware=h200", ()),
        ("anon", "/tasks/silu-and-mul/", ()),
        ("anon", "/", ()),
    ]


def test_every_page_escapes_every_field(world):
    clients = {"alice": browser(world["alice"]), "mod": browser(world["mod"]), "anon": browser()}
    for viewer, url, fields in pages(world):
        response = clients[viewer].get(url)
        assert response.status_code == 200, f"{viewer} {url}: {response.status_code}"
        h.assert_escaped(response.content.decode(), *fields, where=f"{viewer} {url}")
    public = clients["anon"].get(f"/submissions/{world['pk']}/").content.decode()
    assert h.escape(P("reject")) not in public and h.escape(P("stderr")) not in public  # team and moderators only

    # The notes, which only moderators see, line by line.
    review = clients["mod"].get(f"/moderation/{world['pk']}/").content.decode()
    assert f'<dd class="notes">{h.escape(P("notes"))}<br>second line</dd>' in review

    # The kernel page and the moderator's diff against the published kernel are Pygments' output:
    # the payload is split into spans, never a tag.
    kernel = clients["alice"].get(f"/submissions/{world['pk']}/kernel/silu-and-mul/").content.decode()
    assert "&lt;script&gt;" in kernel and "onerror" in kernel
    assert "Diff against the team" in clients["mod"].get(f"/moderation/{world['second']}/").content.decode()

    # The charts' data is JSON in <script type="application/json">: escaped for that context too.
    board = clients["anon"].get("/leaderboard/?hardware=h200").content.decode()
    assert h.escape(P("model")) in board and h.escape(P("team")) in board
    charts = re.findall(r'<script id="[^"]*" type="application/json">(.*?)</script>', board, re.S)
    assert charts and all("<" not in data for data in charts)
    reflected = clients["anon"].get("/leaderboard/", {"model": P("query"), "hardware": "h200"})
    h.assert_escaped(reflected.content.decode(), "query", where="reflected ?model=")

    # DRF's browsable API renders the same JSON as HTML; the JSON itself keeps the text as sent.
    html = clients["alice"].get(f"/api/v1/submissions/{world['pk']}/", HTTP_ACCEPT="text/html")
    assert html.status_code == 200 and html["Content-Type"].startswith("text/html")
    h.assert_escaped(html.content.decode(), where="browsable API")
    data = APIClient(HTTP_HOST="localhost").get(f"/api/v1/submissions/{world['pk']}/").json()
    assert data["model"] == P("model") and data["harness"] == P("harness")

    # The token's name in the revocation message (shown on the next page).
    token = ApiToken.objects.get(name=P("token"))
    revoked = clients["alice"].post(f"/teams/{world['team'].slug}/tokens/{token.pk}/revoke/", follow=True)
    assert "is revoked" in revoked.content.decode()
    h.assert_escaped(revoked.content.decode(), "token", where="revocation message")


def test_the_refusal_table_escapes_names_from_the_upload(catalogue, media):
    team, alice = make_team("Alpha")
    page = browser(alice)
    missing = h.manifest(f"[{{ slug = \"silu-and-mul\", kernel = {json.dumps(KERNEL_PATH)} }}]")
    blob = h.zip_with({"submission.toml": missing, f"{P('member')[:40]}x.py": "x = 1\n"})
    refused = page.post("/submit/", {"team": team.pk, "upload": h.SimpleUploadedFile("b.zip", blob),
                                     "hardware": "cpu-interpret", "guidance": "none", "budget": 350})
    assert refused.status_code == 400
    h.assert_escaped(refused.content.decode(), "path")
    name = "\"><img src=x onerror=alert('filename')>.zip"  # no "/": Django keeps an upload's base name
    not_archive = page.post("/submit/", {"team": team.pk, "upload": h.SimpleUploadedFile(name, b"plain text"),
                                         "hardware": "cpu-interpret", "guidance": "none", "budget": 350})
    html = not_archive.content.decode()
    assert not_archive.status_code == 400 and h.escape(name) in html
    h.assert_escaped(html)
    assert not Submission.objects.exists()
