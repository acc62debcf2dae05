"""``manage.py sync_tasks`` and ``leaderboard.services.task_sync``: idempotent, complete, refusing bad trees."""

from __future__ import annotations

import shutil
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from leaderboard import services
from leaderboard.constants import VerificationStatus
from leaderboard.models import Task, Workload
from tasks.registry import LoadReport, Problem, load_tasks
from tests.portal.helpers import snapshot, sync

pytestmark = pytest.mark.django_db


def test_real_tree_syncs_every_task_and_second_run_changes_nothing():
    report = load_tasks()
    assert report.problems == []
    first = sync()
    assert "changes written" in first
    rows = snapshot()
    assert sorted(t["slug"] for t in rows[0]) == sorted(t.slug for t in report.tasks)
    expected_workloads = sum(len(t.spec.workloads) + len(t.spec.smoke) for t in report.tasks)
    assert len(rows[1]) == expected_workloads

    second = sync()
    assert "nothing changed" in second
    assert snapshot() == rows


def test_rows_carry_the_spec_guidance_and_roofline(task_tree):
    root = task_tree()
    sync(root)
    loaded = load_tasks(root).tasks[0]
    row = Task.objects.get(slug=loaded.slug)
    assert (row.task_id, row.title, row.entry_point) == (loaded.spec.id, loaded.spec.title, loaded.spec.entry_point)
    assert row.guidance == loaded.guidance
    assert row.spec_json["roofline"]["flops"] == loaded.spec.roofline.flops
    assert len(row.content_sha256) == 64
    w1 = row.workloads.get(name="W1", smoke=False)
    flops, nbytes = loaded.roofline(loaded.workload("W1").params)
    assert (w1.flops, w1.bytes) == (flops, nbytes)
    x = next(s for s in w1.shapes if s["name"] == "x")
    assert x == {"name": "x", "role": "input", "shape": [16384, 4096], "dtype": "bf16"}
    assert row.workloads.filter(smoke=True).count() == len(loaded.spec.smoke)


def test_changed_workload_updates_only_that_row(task_tree):
    root = task_tree()
    sync(root)
    before = {w.name: (w.id, w.flops) for w in Workload.objects.filter(smoke=False)}
    sha_before = Task.objects.get().content_sha256
    toml = root / "tasks" / "fused-add-rmsnorm" / "task.toml"
    toml.write_text(toml.read_text().replace("params = { T = 16384, H = 4096,", "params = { T = 1024, H = 4096,"))

    out = sync(root)
    assert "workloads updated (1): fused-add-rmsnorm/W1" in out
    after = {w.name: (w.id, w.flops) for w in Workload.objects.filter(smoke=False)}
    assert after["W1"][0] == before["W1"][0]
    assert after["W1"][1] == before["W1"][1] / 16
    assert after["W2"] == before["W2"] and after["W3"] == before["W3"]
    assert Task.objects.get().content_sha256 != sha_before


def test_removed_workload_is_deleted(task_tree):
    root = task_tree()
    sync(root)
    toml = root / "tasks" / "fused-add-rmsnorm" / "task.toml"
    text = toml.read_text()
    start = text.index('[[workloads]]\nname = "W3"')
    toml.write_text(text[:start] + text[text.index("[[smoke]]", start):])

    out = sync(root)
    assert "workloads deleted (1): fused-add-rmsnorm/W3" in out
    assert not Workload.objects.filter(name="W3").exists()
    assert Workload.objects.filter(smoke=False).count() == 2


def test_task_removed_from_tree_is_retired_then_restored(task_tree):
    task_tree()
    root = task_tree(as_slug="second-norm", task_id="T98")
    sync(root)
    assert Task.objects.filter(retired=False).count() == 2
    saved = root.parent / "saved"
    for part in ("tasks", "references", "guidance"):
        shutil.move(root / part / "second-norm", saved / part / "second-norm")

    out = sync(root)
    assert "retired (1): second-norm" in out
    gone = Task.objects.get(slug="second-norm")
    assert gone.retired and gone.retired_at is not None
    assert gone.workloads.count() > 0, "a retired task keeps its workloads for old results"
    assert "nothing changed" in sync(root)

    for part in ("tasks", "references", "guidance"):
        shutil.move(saved / part / "second-norm", root / part / "second-norm")
    out = sync(root)
    assert "restored (1): second-norm" in out
    back = Task.objects.get(slug="second-norm")
    assert not back.retired and back.retired_at is None


def test_bad_tree_reports_every_problem_with_file_and_field_and_changes_nothing(task_tree):
    root = task_tree()
    sync(root)
    rows = snapshot()
    root = task_tree(as_slug="broken-norm", task_id="T97")
    toml = root / "tasks" / "broken-norm" / "task.toml"
    toml.write_text(toml.read_text().replace('title = "Fused residual add + RMSNorm"', 'title = "x"'))
    task_tree(as_slug="unguided-norm", task_id="T96")
    (root / "guidance" / "unguided-norm" / "L2.md").unlink()
    # The good task changed too: it must not be written either, since the sync is all or nothing.
    good = root / "tasks" / "fused-add-rmsnorm" / "task.toml"
    good.write_text(good.read_text().replace("params = { T = 16384, H = 4096,", "params = { T = 1024, H = 4096,"))

    err = StringIO()
    with pytest.raises(CommandError, match="problem"):
        call_command("sync_tasks", "--root", str(root), stdout=StringIO(), stderr=err)
    lines = err.getvalue().splitlines()
    assert "tasks/broken-norm/task.toml: title: String should have at least 3 characters" in lines
    assert any(line.startswith("guidance/unguided-norm/L2.md: (file): ") for line in lines)
    assert snapshot() == rows


def test_service_refuses_a_report_with_problems():
    report = LoadReport(tasks=[], problems=[Problem("tasks/x/task.toml", "id", "bad")])
    with pytest.raises(services.TaskTreeInvalid):
        services.task_sync(report)
    assert not Task.objects.exists()


def test_verify_marks_queued_and_sends_after_commit(task_tree, monkeypatch, django_capture_on_commit_callbacks):
    root = task_tree()
    task_tree(as_slug="second-norm", task_id="T98")
    sent: list[str] = []
    from leaderboard import tasks as lb_tasks

    monkeypatch.setattr(lb_tasks.verify_reference_task, "delay", lambda slug: sent.append(slug))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        out = sync(root, "--verify")
    assert "verification queued (2)" in out
    assert sent == [], "nothing is sent before the transaction commits"
    assert set(Task.objects.values_list("verification_status", flat=True)) == {VerificationStatus.QUEUED}
    for callback in callbacks:
        callback()
    assert sorted(sent) == ["fused-add-rmsnorm", "second-norm"]
