"""Upload validation: every PORTAL.md rule refuses with the file and the rule, and leaves nothing."""

from __future__ import annotations

import io
import stat
import zipfile

import pytest

from evaluator.bundle_problems import BundleInvalid
from portal.audit.models import AuditLog
from portal.submissions.actions import IdempotencyConflict, check_create_submission
from portal.submissions.constants import Status
from portal.submissions.models import Bundle, Submission
from portal.submissions.validation import single_kernel_bundle
from tests.portal.factories import (
    expert_bundle,
    expert_source,
    make_targz,
    make_team,
    make_zip,
    manifest_text,
    media_files,
)

pytestmark = pytest.mark.django_db

KERNEL = expert_source("silu-and-mul")


def refuse(team, user, blob: bytes, name: str = "bundle.zip", **kw) -> list[tuple[str, str]]:
    with pytest.raises(BundleInvalid) as info:
        check_create_submission(team=team, user=user, blob=blob, filename=name, **kw)
    return [(p.file, p.rule) for p in info.value.problems]


@pytest.fixture
def owner(catalogue, media):
    return make_team("Alpha")


def test_a_valid_bundle_is_stored_and_queued_through_the_first_states(owner, media):
    team, user = owner
    sub, created = check_create_submission(team=team, user=user, blob=expert_bundle(), filename="b.zip")
    assert created and sub.status == Status.QUEUED
    assert sub.hardware == "cpu-interpret" and sub.budget == 350 and sub.guidance == "none"
    assert [t.task.slug for t in sub.tasks.all()] == ["silu-and-mul"]
    assert sub.tasks.get().kernel_source == KERNEL
    trail = list(AuditLog.objects.filter(submission_id=sub.pk).values_list("from_status", "to_status"))
    assert trail == [("", "received"), ("received", "validated"), ("validated", "queued")]
    assert sub.current_attempt.number == 1 and sub.current_attempt.queue == "cpu.interpret"
    assert media_files(media) == [f"bundles/{sub.bundle.sha256[:2]}/{sub.bundle.sha256}.zip"]


def test_tar_gz_and_single_kernel_uploads_are_accepted(owner):
    team, user = owner
    tar = make_targz({"submission.toml": manifest_text(["silu-and-mul"]), "silu-and-mul/kernel.py": KERNEL})
    sub, _ = check_create_submission(team=team, user=user, blob=tar, filename="b.tar.gz")
    assert sub.bundle.kind == "tar.gz"
    single = single_kernel_bundle(KERNEL.encode(), slug="silu-and-mul", model="m", provider="p", harness="h",
                                  guidance="L1", budget=100)
    sub2, _ = check_create_submission(team=team, user=user, blob=single, filename="kernel.py", hardware="cpu-interpret")
    assert sub2.guidance == "L1" and sub2.budget == 100


def _zip_with_mode(name: str, mode: int, data: bytes = b"x") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("submission.toml", manifest_text(["silu-and-mul"]))
        zf.writestr("silu-and-mul/kernel.py", KERNEL)
        info = zipfile.ZipInfo(name)
        info.external_attr = mode << 16
        zf.writestr(info, data)
    return buf.getvalue()


BAD_SOURCE = {
    "syntax": ("def broken(:\n", "python-syntax"),
    "no-jit": ("import torch\n\ndef silu_and_mul(x):\n    return x\n", "triton-kernel"),
    "subprocess": (KERNEL + "\nimport subprocess\n", "anti-cheat:import"),
    "side-stream": (KERNEL + "\n_s = torch.cuda.Stream()\n", "anti-cheat:call"),
}


@pytest.mark.parametrize("case", sorted(BAD_SOURCE))
def test_kernel_rules(owner, media, case):
    team, user = owner
    source, rule = BAD_SOURCE[case]
    blob = make_zip({"submission.toml": manifest_text(["silu-and-mul"]), "silu-and-mul/kernel.py": source})
    assert ("silu-and-mul/kernel.py", rule) in refuse(team, user, blob)
    assert not Submission.objects.exists() and not Bundle.objects.exists() and media_files(media) == []


def test_archive_rules(owner, settings):
    team, user = owner
    assert refuse(team, user, _zip_with_mode("link", stat.S_IFLNK | 0o777, b"/etc/passwd")) == [("link", "symlink")]
    assert refuse(team, user, _zip_with_mode("fifo", stat.S_IFIFO | 0o644)) == [("fifo", "special-file")]
    assert ("../evil.py", "path-traversal") in refuse(team, user, make_zip({"../evil.py": "x"}))
    assert ("/abs.py", "absolute-path") in refuse(team, user, make_zip({"/abs.py": "x"}))
    assert refuse(team, user, b"not an archive at all") == [("bundle.zip", "archive")]
    bomb = make_zip({"submission.toml": manifest_text(["silu-and-mul"]), "zeros.bin": b"\0" * (8 * 2**20)})
    assert ("zeros.bin", "compression-ratio") in refuse(team, user, bomb)
    settings.D2K_BUNDLE_MAX_MEMBERS = 3
    many = make_zip({f"f{i}.txt": "x" for i in range(5)})
    assert refuse(team, user, many) == [("bundle.zip", "member-count")]
    settings.D2K_UPLOAD_MAX_BYTES = 100
    assert refuse(team, user, expert_bundle()) == [("bundle.zip", "upload-size")]


def test_tar_links_are_refused(owner):
    import tarfile

    team, user = owner
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, kind in (("sym", tarfile.SYMTYPE), ("hard", tarfile.LNKTYPE), ("dev", tarfile.CHRTYPE)):
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, "/etc/passwd"
            tf.addfile(info)
    assert refuse(team, user, buf.getvalue(), "b.tar.gz") == [
        ("sym", "symlink"), ("hard", "hard-link"), ("dev", "special-file")]


def test_uncompressed_size_limit(owner, settings):
    team, user = owner
    settings.D2K_BUNDLE_MAX_UNCOMPRESSED = 1000
    assert ("bundle.zip", "uncompressed-size") in refuse(team, user, expert_bundle())


def test_manifest_rules(owner):
    team, user = owner
    files = {"silu-and-mul/kernel.py": KERNEL}
    assert refuse(team, user, make_zip(files)) == [("submission.toml", "manifest-missing")]
    nested = make_zip({"run/submission.toml": manifest_text(["silu-and-mul"])})
    with pytest.raises(BundleInvalid, match="found run/submission.toml"):
        check_create_submission(team=team, user=user, blob=nested, filename="b.zip")
    assert refuse(team, user, make_zip({**files, "submission.toml": "model = \n"})) == [
        ("submission.toml", "manifest-syntax")]
    unknown_key = manifest_text(["silu-and-mul"], colour="blue")
    assert ("submission.toml", "manifest-unknown-key") in refuse(team, user, make_zip({**files, "submission.toml": unknown_key}))
    bad_guidance = manifest_text(["silu-and-mul"], guidance="L4")
    assert ("submission.toml", "manifest-schema") in refuse(team, user, make_zip({**files, "submission.toml": bad_guidance}))
    unknown_task = manifest_text(["silu-and-mul", "no-such-task"])
    assert ("submission.toml", "unknown-task") in refuse(team, user, make_zip({**files, "submission.toml": unknown_task}))
    dup = manifest_text(["silu-and-mul", "silu-and-mul"])
    assert ("submission.toml", "duplicate-task") in refuse(team, user, make_zip({**files, "submission.toml": dup}))
    missing = manifest_text(["silu-and-mul", "fused-add-rmsnorm"])
    assert ("fused-add-rmsnorm/kernel.py", "missing-file") in refuse(team, user, make_zip({**files, "submission.toml": missing}))
    hw = manifest_text(["silu-and-mul"], hardware="tpu-v9")
    assert ("submission.toml", "unknown-hardware") in refuse(team, user, make_zip({**files, "submission.toml": hw}))


def test_messages_name_the_file_and_the_rule(owner):
    team, user = owner
    blob = make_zip({"submission.toml": manifest_text(["silu-and-mul"]), "silu-and-mul/kernel.py": "x = (\n"})
    with pytest.raises(BundleInvalid) as info:
        check_create_submission(team=team, user=user, blob=blob, filename="b.zip")
    assert str(info.value).startswith("silu-and-mul/kernel.py: line 1:") and "(rule: python-syntax)" in str(info.value)


def _transcript(slug: str = "silu-and-mul", guidance: str = "none", turns: int = 2, budget: int = 350,
                mode: str = "kernel") -> str:
    import json

    lines = [{"kind": "header", "provider": "p", "model": "m", "guidance": guidance, "budget": budget, "task": slug,
              "mode": mode}]
    for turn in range(1, turns + 1):
        lines.append({"kind": "event", "turn": turn, "role": "assistant", "content": f"<b>turn {turn}</b>"})
    lines.append({"kind": "footer", "stop_reason": "done", "turns_used": turns})
    return "\n".join(json.dumps(line) for line in lines) + "\n"


def test_transcripts_are_validated_and_give_turns_used(owner, media):
    team, user = owner
    good = make_zip({"submission.toml": manifest_text(["silu-and-mul"]), "silu-and-mul/kernel.py": KERNEL,
                     "silu-and-mul/transcript.jsonl": _transcript(turns=3)})
    sub, _ = check_create_submission(team=team, user=user, blob=good, filename="b.zip")
    row = sub.tasks.get()
    assert row.turns_used == 3 and row.transcript_storage_name.startswith("transcripts/")
    for bad, why in ((_transcript(slug="fused-add-rmsnorm"), "header is for task"),
                     (_transcript(guidance="L1"), "guidance"),
                     (_transcript(turns=5, budget=4), "budget"),
                     (_transcript(mode="design"), "its header is a design run; the manifest says mode 'kernel'"),
                     (_transcript(budget=100), "its header says a turn budget of 100; the manifest says 350"),
                     (_transcript(turns=3).replace('"turn": 3', '"turn": 2').replace('"turns_used": 3', '"turns_used": 2'),
                      "a model response numbered turn 2; it is response 3"),
                     ("{not json\n", "not JSON")):
        blob = make_zip({"submission.toml": manifest_text(["silu-and-mul"]), "silu-and-mul/kernel.py": KERNEL,
                         "silu-and-mul/transcript.jsonl": bad})
        with pytest.raises(BundleInvalid, match=why) as info:
            check_create_submission(team=team, user=user, blob=blob, filename="b.zip")
        assert info.value.problems[0].file == "silu-and-mul/transcript.jsonl"


def test_explicit_task_tables_and_turns_over_budget(owner):
    team, user = owner
    manifest = manifest_text('tasks = [{ slug = "silu-and-mul", kernel = "k/mine.py", turns_used = 9 }]', budget=5)
    blob = make_zip({"submission.toml": manifest, "k/mine.py": KERNEL})
    assert refuse(team, user, blob) == [("submission.toml", "turns-used")]
    ok = manifest_text('tasks = [{ slug = "silu-and-mul", kernel = "k/mine.py", turns_used = 4 }]', budget=5)
    sub, _ = check_create_submission(team=team, user=user, blob=make_zip({"submission.toml": ok, "k/mine.py": KERNEL}),
                                     filename="b.zip")
    assert sub.tasks.get().turns_used == 4 and sub.tasks.get().kernel_path == "k/mine.py"


def test_idempotency_key_returns_the_first_submission(owner, media):
    team, user = owner
    blob = expert_bundle()
    first, created = check_create_submission(team=team, user=user, blob=blob, filename="b.zip", idempotency_key="k1")
    again, created_again = check_create_submission(team=team, user=user, blob=blob, filename="b.zip",
                                                   idempotency_key="k1")
    assert created and not created_again and again.pk == first.pk
    with pytest.raises(IdempotencyConflict):
        check_create_submission(team=team, user=user, blob=expert_bundle(guidance="L1"), filename="b.zip",
                                idempotency_key="k1")
    assert Submission.objects.count() == 1


def test_a_refusal_after_storing_removes_the_files(owner, media):
    """Quota refusal happens after the blobs were written: they must be deleted again."""
    from portal.submissions.quotas import QuotaExceeded
    from portal.teams.models import Team

    team, user = owner
    Team.objects.filter(pk=team.pk).update(daily_quota=0)
    team.refresh_from_db()
    with pytest.raises(QuotaExceeded):
        check_create_submission(team=team, user=user, blob=expert_bundle(), filename="b.zip")
    assert media_files(media) == [] and not Submission.objects.exists() and not AuditLog.objects.filter(
        action="submission.transition").exists()


@pytest.mark.parametrize("fmt", ["openai-chat", "openai-responses", "anthropic"])
def test_another_harness_log_is_converted_on_upload_and_stored_in_our_format(owner, media, fmt):
    """AGENTS.md: teams upload the logs they already have; the manifest names the format."""
    import json

    from agents.transcript import parse
    from portal.submissions.storage import blob_read
    from tests.agents.test_transcripts import ANTHROPIC, CHAT, RESPONSES

    team, user = owner
    log = {"openai-chat": CHAT, "openai-responses": RESPONSES, "anthropic": ANTHROPIC}[fmt]
    manifest = manifest_text(f'tasks = [{{ slug = "silu-and-mul", transcript = "log.json", '
                             f'transcript_format = "{fmt}" }}]')
    blob = make_zip({"submission.toml": manifest, "silu-and-mul/kernel.py": KERNEL, "log.json": json.dumps(log)})
    sub, _ = check_create_submission(team=team, user=user, blob=blob, filename="b.zip")
    row = sub.tasks.get()
    assert row.turns_used == 2
    stored = parse(blob_read(row.transcript_storage_name))
    assert (stored.header.model, stored.header.provider, stored.header.harness, stored.header.task) == (
        "test-model", "test-provider", "pytest", "silu-and-mul")
    assert stored.footer.stop_reason == "imported"


def test_a_log_that_is_not_in_its_named_format_is_refused_with_the_file(owner, media):
    team, user = owner
    manifest = manifest_text('tasks = [{ slug = "silu-and-mul", transcript = "log.json", '
                             'transcript_format = "anthropic" }]')
    for log, why in (('{"messages": [{"role": "assistant", "content": 5}]}', "as a log in the anthropic format"),
                     ("not json", "as a log in the anthropic format: the log is not JSON"),
                     ("".join(f"[{i * 7919 % 10007}," for i in range(5000)), "as a log in the anthropic format")):  # deep
        blob = make_zip({"submission.toml": manifest, "silu-and-mul/kernel.py": KERNEL, "log.json": log})
        with pytest.raises(BundleInvalid, match=why) as info:
            check_create_submission(team=team, user=user, blob=blob, filename="b.zip")
        assert info.value.problems[0].file == "log.json"
    assert Submission.objects.count() == 0


def test_single_kernel_fields_beside_a_bundle_are_refused_by_the_form_and_the_api(owner):
    """A bundle's manifest states its task, model and guidance: a field saying otherwise beside it
    would be dropped without a word, so the web form and the API both refuse it and store nothing.
    The form's pre-filled harness, guidance and budget go with every bundle and are not refusals."""
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.test import Client
    from rest_framework.test import APIClient

    from portal.submissions.constants import DEFAULT_BUDGET
    from portal.teams.services import token_create

    team, user = owner
    blob = expert_bundle()

    def upload() -> SimpleUploadedFile:
        return SimpleUploadedFile("bundle.zip", blob)

    web = Client(HTTP_HOST="localhost")
    web.force_login(user)
    prefilled = {"team": team.pk, "hardware": "h200", "harness": "manual", "guidance": "none",
                 "budget": DEFAULT_BUDGET}
    refused = web.post("/submit/", {"upload": upload(), **prefilled, "model": "gpt-x", "guidance": "L1+L2"})
    page = refused.content.decode()
    assert refused.status_code == 400
    assert page.count("is a bundle, whose manifest says it") == 2, page[-3000:]
    assert not team.submissions.exists()
    accepted = web.post("/submit/", {"upload": upload(), **prefilled})
    assert accepted.status_code == 302, accepted.content.decode()[-2000:]
    assert team.submissions.count() == 1

    api = APIClient(HTTP_HOST="localhost")
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(team, name='ci', actor=user).secret}")
    for extra, named in (({"task": "rmsnorm-backward"}, {"task"}), ({"guidance": "L1", "budget": 7}, {"guidance", "budget"}),
                         ({"harness": "h"}, {"harness"})):
        made = api.post("/api/v1/submissions/", {"bundle": upload(), **extra}, format="multipart")
        assert made.status_code == 400 and set(made.json()["error"]["details"]) == named, made.json()
    assert team.submissions.count() == 1
