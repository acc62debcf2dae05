"""Guidance versions: the site keeps every guidance text it published, and a submission's pages
say which version its agent was given (the digest its transcript or manifest states)."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from rest_framework.test import APIClient

from evaluator.bundle_problems import BundleInvalid
from leaderboard.models import GuidanceVersion, Task
from portal.submissions.actions import check_create_submission
from portal.teams.services import token_create
from tests.portal.factories import expert_source, make_team, make_user, make_zip, manifest_text
from tests.portal.helpers import sync

pytestmark = pytest.mark.django_db
SLUG = "silu-and-mul"


def _transcript(guidance: str, digest: str) -> str:
    lines = [{"kind": "header", "provider": "p", "model": "m", "guidance": guidance, "budget": 350, "task": SLUG,
              "guidance_sha256": digest},
             {"kind": "event", "turn": 1, "role": "assistant", "content": "done"},
             {"kind": "footer", "stop_reason": "done", "turns_used": 1}]
    return "\n".join(json.dumps(x) for x in lines)


def _bundle(guidance: str, *, header: str | None = None, manifest: str | None = None) -> bytes:
    entry = {"slug": SLUG, **({"guidance_sha256": manifest} if manifest is not None else {})}
    files = {"submission.toml": manifest_text(f"tasks = [{{ {', '.join(f'{k} = {json.dumps(v)}' for k, v in entry.items())} }}]",
                                              guidance=guidance),
             f"{SLUG}/kernel.py": expert_source(SLUG)}
    if header is not None:
        files[f"{SLUG}/transcript.jsonl"] = _transcript(guidance, header)
    return make_zip(files)


def _page(user, path: str) -> str:  # noqa: ANN001
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    response = client.get(path)
    assert response.status_code == 200, path
    return response.content.decode()


def _edit_l3(root, text: str) -> None:  # noqa: ANN001
    path = root / "guidance" / SLUG / "L3.md"
    path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")
    sync(root)


def test_a_sync_keeps_every_version_and_adds_one_only_where_the_text_changed(catalogue) -> None:
    task = Task.objects.get(slug=SLUG)
    before = {(v.condition, v.sha256) for v in task.guidance_versions.all()}
    assert {c for c, _ in before} == {"L1", "L1+L2", "L1+L2+L3"}
    assert all(task.guidance_sha256(c) == d for c, d in before)
    sync(catalogue)  # unchanged tree: nothing new
    assert {(v.condition, v.sha256) for v in task.guidance_versions.all()} == before
    _edit_l3(catalogue, "\n- Launch the programs that share tiles side by side.\n")
    task.refresh_from_db()
    after = {(v.condition, v.sha256) for v in task.guidance_versions.all()}
    assert before < after and len(after - before) == 1
    (condition, digest), = after - before
    assert condition == "L1+L2+L3" and digest == task.guidance_sha256("L1+L2+L3")
    old = GuidanceVersion.objects.get(task=task, condition="L1+L2+L3", sha256__in=[d for _, d in before])
    assert "side by side" not in old.text and "side by side" in task.guidance_l3


def test_a_run_says_whether_its_agent_read_the_current_an_earlier_or_an_unknown_version(catalogue, media) -> None:
    team, user = make_team("Alpha")
    task = Task.objects.get(slug=SLUG)
    first = task.guidance_sha256("L1+L2+L3")
    on_first, _ = check_create_submission(team=team, user=user, blob=_bundle("L1+L2+L3", header=first), filename="a.zip")
    assert on_first.tasks.get().guidance_sha256 == first
    page = _page(user, f"/submissions/{on_first.pk}/")
    assert f"{first[:12]}, current" in page and f"/tasks/{SLUG}/guidance/{first}/" in page

    _edit_l3(catalogue, "\n- A new idea, published after the run.\n")
    page = _page(user, f"/submissions/{on_first.pk}/")
    assert f"{first[:12]}, an earlier version" in page
    review = _page(make_user("mod", moderator=True), f"/moderation/{on_first.pk}/")
    assert f"Guidance given: <a href=\"/tasks/{SLUG}/guidance/{first}/\">{first[:12]}, an earlier version</a>" in review
    version = _page(user, f"/tasks/{SLUG}/guidance/{first}/")
    assert "an earlier version" in version and "A new idea" not in version and first in version
    assert "A new idea" in _page(user, f"/tasks/{SLUG}/guidance/{Task.objects.get(slug=SLUG).guidance_sha256('L1+L2+L3')}/")
    listing = _page(user, f"/tasks/{SLUG}/")
    assert listing.count(f"/tasks/{SLUG}/guidance/") == 4  # L1, L1+L2, and both L1+L2+L3 versions

    stranger = "ab" * 32  # a text this site never published, stated in the manifest without a transcript
    unknown, _ = check_create_submission(team=team, user=user, blob=_bundle("L1", manifest=stranger), filename="b.zip")
    assert f"{stranger[:12]}, not a version this site published" in _page(user, f"/submissions/{unknown.pk}/")
    silent, _ = check_create_submission(team=team, user=user, blob=_bundle("L1"), filename="c.zip")
    assert "version not stated" in _page(user, f"/submissions/{silent.pk}/")
    unguided, _ = check_create_submission(team=team, user=user, blob=_bundle("none", header=""), filename="d.zip")
    assert "none (unguided)" in _page(user, f"/submissions/{unguided.pk}/")
    assert Client(HTTP_HOST="localhost").get(f"/tasks/{SLUG}/guidance/{stranger}/").status_code == 404

    api = APIClient(HTTP_HOST="localhost")
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(team, name='ci', actor=user).secret}")
    states = {s: api.get(f"/api/v1/submissions/{s.pk}/").json()["tasks"][0]["guidance_version"]
              for s in (on_first, unknown, silent, unguided)}
    assert list(states.values()) == ["earlier", "unpublished", "not stated", "unguided"]
    assert api.get(f"/api/v1/submissions/{on_first.pk}/").json()["tasks"][0]["guidance_sha256"] == first
    listed = api.get(f"/api/v1/tasks/{SLUG}/").json()["guidance_versions"]
    assert sorted((v["condition"], v["current"]) for v in listed) == [
        ("L1", True), ("L1+L2", True), ("L1+L2+L3", False), ("L1+L2+L3", True)]


@pytest.mark.parametrize(("guidance", "header", "manifest", "message"), [
    ("L1", "a" * 64, "b" * 64, "but its transcript's header says aaaaaaaaaaaa"),
    ("none", None, "c" * 64, "an unguided run"),
    ("L1", None, "not-a-digest", "guidance_sha256"),
])
def test_a_digest_that_cannot_be_right_is_refused_with_a_reason(catalogue, media, guidance, header, manifest, message):
    team, user = make_team("Alpha")
    with pytest.raises(BundleInvalid) as info:
        check_create_submission(team=team, user=user, blob=_bundle(guidance, header=header, manifest=manifest),
                                filename="x.zip")
    assert any(message in p.message for p in info.value.problems), info.value.problems
    assert not team.submissions.exists()


def test_a_single_kernel_file_states_its_guidance_version_by_api_and_by_the_form(catalogue, media) -> None:
    """The single-kernel upload (API and web form) carries the digest into its bundle's manifest,
    where the manifest's rules judge it as they judge a bundle's."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    team, user = make_team("Alpha")
    current = Task.objects.get(slug=SLUG).guidance_sha256("L1")
    fields = {"task": SLUG, "model": "m", "provider": "p", "harness": "h", "guidance": "L1"}

    def kernel() -> SimpleUploadedFile:
        return SimpleUploadedFile("kernel.py", expert_source(SLUG).encode())

    api = APIClient(HTTP_HOST="localhost")
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(team, name='ci', actor=user).secret}")
    made = api.post("/api/v1/submissions/", {"bundle": kernel(), **fields, "guidance_sha256": current},
                    format="multipart")
    assert made.status_code == 201, made.json()
    assert made.json()["tasks"][0]["guidance_sha256"] == current
    assert made.json()["tasks"][0]["guidance_version"] == "current"

    bad = api.post("/api/v1/submissions/", {"bundle": kernel(), **fields, "guidance_sha256": "not-a-digest"},
                   format="multipart")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_bundle", bad.json()
    assert any("guidance_sha256" in d["message"] for d in bad.json()["error"]["details"])
    unguided = api.post("/api/v1/submissions/", {"bundle": kernel(), **fields, "guidance": "none",
                                                 "guidance_sha256": current}, format="multipart")
    assert unguided.status_code == 400
    assert {d["rule"] for d in unguided.json()["error"]["details"]} == {"guidance-digest"}
    beside = api.post("/api/v1/submissions/", {"bundle": SimpleUploadedFile("b.zip", _bundle("L1")),
                                               "guidance_sha256": current}, format="multipart")
    assert beside.status_code == 400 and set(beside.json()["error"]["details"]) == {"guidance_sha256"}
    assert team.submissions.count() == 1

    web = Client(HTTP_HOST="localhost")
    web.force_login(user)
    assert "Guidance version (SHA-256)" in web.get("/submit/").content.decode()
    posted = web.post("/submit/", {"team": team.pk, "upload": kernel(), "hardware": "h200", **fields, "budget": 10,
                                   "guidance_sha256": current})
    assert posted.status_code == 302, posted.content.decode()[-2000:]
    latest = team.submissions.order_by("-pk").first()
    assert latest.tasks.get().guidance_sha256 == current and team.submissions.count() == 2
    assert f"{current[:12]}, current" in _page(user, f"/submissions/{latest.pk}/")
