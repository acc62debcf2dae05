"""``import_reference_results``: the committed H200 run becomes reference timings, once, or nothing."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from leaderboard.models import ReferenceRun, ReferenceTiming
from tasks.registry import REPO_ROOT
from tests.portal.helpers import sync

pytestmark = pytest.mark.django_db
RESULT = REPO_ROOT / "docs" / "results" / "h200-bench.json"


def _tree(task_tree) -> Path:
    task_tree("fused-add-rmsnorm")
    return task_tree("silu-and-mul")


def test_import_creates_eager_compile_and_expert_rows_once(task_tree) -> None:
    sync(_tree(task_tree))
    out = StringIO()
    call_command("import_reference_results", str(RESULT), stdout=out)
    run = ReferenceRun.objects.get()
    assert run.hardware == "h200" and run.fingerprint["gpu_name"].startswith("NVIDIA H200")
    assert ReferenceTiming.objects.count() == 6 * 3
    w1 = ReferenceTiming.objects.filter(workload__task__slug="fused-add-rmsnorm", workload__name="W1")
    times = {t.provider: t for t in w1}
    data = json.loads(RESULT.read_text())
    raw = next(w for t in data["tasks"] if t["slug"] == "fused-add-rmsnorm" for w in t["workloads"] if w["name"] == "W1")
    assert times["expert"].median_ms == raw["timings"]["candidate"]["median_ms"]
    assert times["eager"].speedup == 1.0 and times["expert"].speedup == raw["speedup"]["candidate"]
    call_command("import_reference_results", str(RESULT), stdout=out)
    assert "already imported" in out.getvalue() and ReferenceRun.objects.count() == 1


def test_bad_files_write_nothing(task_tree, tmp_path: Path) -> None:
    sync(_tree(task_tree))
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{")
    check_run = tmp_path / "check.json"
    data = json.loads(RESULT.read_text())
    data.update(command="check", timing_taken=False)
    check_run.write_text(json.dumps(data))
    err = StringIO()
    with pytest.raises(CommandError, match="2 file"):
        call_command("import_reference_results", str(bad_json), str(check_run), stderr=err)
    assert "not JSON" in err.getvalue() and "without timing" in err.getvalue()
    assert ReferenceRun.objects.count() == 0 and ReferenceTiming.objects.count() == 0


def test_task_page_shows_the_imported_reference_times(task_tree, client, django_assert_num_queries) -> None:
    sync(_tree(task_tree))
    call_command("import_reference_results", str(RESULT), stdout=StringIO())
    with django_assert_num_queries(4):  # task, workloads, reference runs, their timings
        html = client.get("/tasks/fused-add-rmsnorm/").content.decode()
    assert 'id="reference-h200"' in html and "NVIDIA H200" in html and "h200-bench.json" in html
    data = json.loads(RESULT.read_text())
    raw = next(w for t in data["tasks"] if t["slug"] == "fused-add-rmsnorm" for w in t["workloads"] if w["name"] == "W1")
    assert f"{raw['timings']['candidate']['median_ms'] * 1e3:,.1f}" in html
    assert f"{raw['timings']['compile']['median_ms'] * 1e3:,.1f}" in html
