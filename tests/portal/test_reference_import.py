"""``import_reference_results``: the committed H200 and H100 runs become reference timings, once, or nothing."""

from __future__ import annotations

import json
import re
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
    # task, workloads, the profiles, the board's reference suite (its runs and the task list,
    # cached with the board), the chosen runs' timings, best kernels, guidance versions
    with django_assert_num_queries(8):
        client.get("/tasks/fused-add-rmsnorm/")
    with django_assert_num_queries(6):  # the suite now comes from the board's cache
        html = client.get("/tasks/fused-add-rmsnorm/").content.decode()
    assert 'id="reference-h200"' in html and "NVIDIA H200" in html and "h200-bench.json" in html
    data = json.loads(RESULT.read_text())
    raw = next(w for t in data["tasks"] if t["slug"] == "fused-add-rmsnorm" for w in t["workloads"] if w["name"] == "W1")
    assert f"{raw['timings']['candidate']['median_ms'] * 1e3:,.1f}" in html
    assert f"{raw['timings']['compile']['median_ms'] * 1e3:,.1f}" in html


def test_imported_sol_follows_todays_roofline(task_tree) -> None:
    """T23's run was measured under a FLOP count that was not a lower bound (expert at 242% of
    SOL); the site stores SOL as the engine computes it now, from the same measured times."""
    sync(task_tree("muon-newton-schulz"))
    path = REPO_ROOT / "docs" / "results" / "h200-runs" / "bench-muon-newton-schulz.json"
    raw = json.loads(path.read_text())
    assert max(w["sol_fraction"]["candidate"] for w in raw["tasks"][0]["workloads"]) > 2.0
    call_command("import_reference_results", str(path), stdout=StringIO())
    expert = ReferenceTiming.objects.filter(provider="expert", workload__task__slug="muon-newton-schulz")
    assert expert.count() == 4 and all(0 < t.sol_fraction < 1 for t in expert)
    stored = ReferenceRun.objects.get().result_json["tasks"][0]["workloads"]
    assert all(w["sol_fraction"]["candidate"] < 1 for w in stored)


def test_default_imports_every_committed_h200_run() -> None:
    from leaderboard.management.commands.import_reference_results import DEFAULT_GLOBS

    found = {p.name for pattern in DEFAULT_GLOBS for p in REPO_ROOT.glob(pattern)}
    assert {"h200-bench.json", "bench-attn-prefill-causal-gqa.json", "bench-muon-newton-schulz.json"} <= found
    assert not any(name.startswith("engine-fail") for name in found)
    h100 = [p for pattern in DEFAULT_GLOBS for p in REPO_ROOT.glob(pattern) if p.parent.name == "h100-runs"]
    assert len(h100) == 26  # the whole suite, one latest file per task; superseded sNN- files stay out
    assert not any(re.match(r"s\d+-", p.name) for p in h100)


def test_an_h100_run_is_its_own_profile_and_the_site_opens_on_its_own(task_tree, client, settings) -> None:
    """Importing the H100's runs adds a profile; the board still opens on D2K_BOARD_HARDWARE (h200)
    rather than the alphabetically first, and a task page lists that profile first. run-local
    evaluates on cpu-interpret (D2K_DEFAULT_HARDWARE), which must not change either."""
    from django.core.cache import cache

    from leaderboard import board_queries

    settings.D2K_DEFAULT_HARDWARE = "cpu-interpret"
    sync(_tree(task_tree))
    h100 = REPO_ROOT / "docs/results/h100-runs/bench-silu-and-mul.json"
    call_command("import_reference_results", str(h100), str(RESULT), stdout=StringIO())
    cache.clear()
    assert sorted(ReferenceRun.objects.values_list("hardware", flat=True)) == ["h100", "h200"]
    assert board_queries.hardware_profiles() == ["h100", "h200"]
    assert client.get("/leaderboard/?format=json").json()["hardware"] == "h200"
    h100_board = client.get("/leaderboard/?hardware=h100&format=json").json()
    assert h100_board["hardware"] == "h100"
    page = client.get("/tasks/silu-and-mul/").content.decode()
    assert 0 < page.index('id="reference-h200"') < page.index('id="reference-h100"')
    assert "NVIDIA H100 80GB HBM3" in page
    settings.D2K_BOARD_HARDWARE = "h999"  # a card with no rows: the first profile that has some
    cache.clear()
    assert client.get("/leaderboard/?format=json").json()["hardware"] == "h100"


def test_a_task_page_shows_what_the_expert_chose_by_timing(task_tree, client, tmp_path: Path) -> None:
    """A run whose expert reported ``TIMED_CHOICES`` (the worker names them ``choice <key>``) shows
    them under that card's table; the autotuners' per-shape picks stay in the JSON."""
    from django.core.cache import cache

    sync(_tree(task_tree))
    data = json.loads(RESULT.read_text())
    silu = next(t for t in data["tasks"] if t["slug"] == "silu-and-mul")
    silu["autotune"] = {"choice route T=16384 d=14336": "flat order (rows 492 us, flat 470 us)",
                        "_silu_and_mul_tuned [14336, torch.bfloat16]": "ROWS: 1, BLOCK_D: 2048"}
    path = tmp_path / "bench-choices.json"
    path.write_text(json.dumps(data))
    call_command("import_reference_results", str(path), stdout=StringIO())
    cache.clear()
    page = client.get("/tasks/silu-and-mul/").content.decode()
    assert "What the expert chose by timing on this card" in page
    assert "<code>route T=16384 d=14336</code>: flat order (rows 492 us, flat 470 us)" in page
    assert "_silu_and_mul_tuned" not in page
    other = client.get("/tasks/fused-add-rmsnorm/").content.decode()  # no choices reported: no list
    assert "What the expert chose by timing" not in other


def test_the_leaderboard_reads_every_run_of_a_profile_as_one_suite(task_tree, tmp_path: Path) -> None:
    """The references are benched over several device calls, one imported run each. The board's
    reference rows take each task from the latest run that has it; scoring only the newest run
    made the "expert kernels" row a one-task suite (found on the default import: 1 of 26)."""
    from django.core.cache import cache

    from leaderboard import board_queries

    sync(_tree(task_tree))
    later = json.loads(RESULT.read_text())
    later["started_at"] = "2026-12-03T10:00:00+00:00"
    later["tasks"] = [t for t in later["tasks"] if t["slug"] == "silu-and-mul"]
    for w in later["tasks"][0]["workloads"]:  # twice as slow (faster could pass the SOL cap): the later run's times count
        for key in ("median_ms", "q1_ms", "q3_ms", "mean_ms", "min_ms"):
            w["timings"]["candidate"][key] *= 2
    path = tmp_path / "bench-silu-and-mul.json"
    path.write_text(json.dumps(later))
    call_command("import_reference_results", str(RESULT), str(path), stdout=StringIO())
    cache.clear()
    assert ReferenceRun.objects.count() == 2
    rows = {r.name: r for r in board_queries.reference_rows("h200")}
    expert = rows["expert kernels"]
    assert expert.score.correct_count == 2 and expert.score.attempted == 2
    assert expert.run == ReferenceRun.objects.order_by("-started_at").first()
    from evaluator.result import RunResult
    from evaluator.score_result import score_run

    speedups = board_queries.expert_speedups("h200")
    first = score_run(RunResult.model_validate_json(RESULT.read_text()), "candidate")
    assert speedups["silu-and-mul"] == pytest.approx(first["silu-and-mul"].speedup / 2, rel=1e-6)
    assert speedups["fused-add-rmsnorm"] == pytest.approx(first["fused-add-rmsnorm"].speedup, rel=1e-6)
    # Moderation's outlier flag reads the same imported runs as the board's expert row (it read
    # docs/results/<profile>-bench.json alone, which misses the later run's time).
    from portal.moderation import evidence

    assert evidence.expert_speedups is board_queries.expert_speedups


def test_a_merge_refuses_two_cards() -> None:
    from evaluator.result import RunResult
    from evaluator.result_merge import MixedCards, merge_runs

    h200 = RunResult.model_validate_json(RESULT.read_text())
    other = h200.model_copy(update={"hardware": h200.hardware.model_copy(update={"name": "h100"})})
    with pytest.raises(MixedCards, match="h100, h200"):
        merge_runs([h200, other])
    assert [t.slug for t in merge_runs([h200], ["silu-and-mul"]).tasks] == ["silu-and-mul", "fused-add-rmsnorm"]


def test_the_torch_compile_row_counts_its_own_outcome(task_tree, tmp_path: Path) -> None:
    """SCORING.md's torch.compile reference row is torch.compile's result: a workload the expert got
    wrong does not fail it, and a task whose run never asked for torch.compile is left out of the
    row (named in it) instead of scoring as torch.compile failing."""
    from django.core.cache import cache

    from leaderboard import board_queries

    sync(_tree(task_tree))
    data = json.loads(RESULT.read_text())
    silu = next(t for t in data["tasks"] if t["slug"] == "silu-and-mul")
    silu["status"], silu["workloads"][0]["correct"] = "incorrect", False
    norm = next(t for t in data["tasks"] if t["slug"] == "fused-add-rmsnorm")
    path = tmp_path / "bench-expert-wrong.json"
    path.write_text(json.dumps(data))
    call_command("import_reference_results", str(path), stdout=StringIO())
    cache.clear()
    rows = {r.name: r for r in board_queries.reference_rows("h200")}
    assert rows["torch.compile"].score.correct_count == 2
    assert rows["expert kernels"].score.correct_count == 1

    for w in norm["workloads"]:
        w["timings"].pop("compile", None)
        w.pop("untimed", None)
    data["started_at"] = "2026-12-04T10:00:00+00:00"
    path.write_text(json.dumps(data))
    call_command("import_reference_results", str(path), stdout=StringIO())
    cache.clear()
    names = [r.name for r in board_queries.reference_rows("h200")]
    assert "torch.compile (1 of 2 tasks timed)" in names
    # The task's own board follows the same rule: no torch.compile row where it was not timed.
    assert [r.name for r in board_queries.task_reference_rows("h200", "fused-add-rmsnorm")] == [
        "PyTorch eager", "expert kernels"]
    assert [r.name for r in board_queries.task_reference_rows("h200", "silu-and-mul")] == [
        "PyTorch eager", "torch.compile", "expert kernels"]


def test_task_page_reads_the_run_the_board_reads(task_tree, client, tmp_path: Path) -> None:
    """A later run holding the task without timings (failed, or cut by a deadline) is the run the
    board scores the task from (evaluator.result_merge.sources); the task page says so, with the
    engine's reason, and does not show the older run's times as if they were current."""
    from django.core.cache import cache

    sync(_tree(task_tree))
    call_command("import_reference_results", str(RESULT), stdout=StringIO())
    data = json.loads(RESULT.read_text())
    old_w1 = next(w for t in data["tasks"] if t["slug"] == "silu-and-mul" for w in t["workloads"] if w["name"] == "W1")
    later = dict(data, started_at="2030-01-01T00:00:00+00:00", tasks=[
        dict(t, status="timeout", reason="the bench did not finish within its limit of 300 s", workloads=[])
        for t in data["tasks"] if t["slug"] == "silu-and-mul"])
    path = tmp_path / "later.json"
    path.write_text(json.dumps(later))
    call_command("import_reference_results", str(path), stdout=StringIO())
    cache.clear()
    html = client.get("/tasks/silu-and-mul/").content.decode()
    assert "without timings" in html and "timeout: the bench did not finish within its limit of 300 s" in html
    assert f"{old_w1['timings']['candidate']['median_ms'] * 1e3:,.1f}" not in html
    board = client.get("/api/v1/leaderboard/?hardware=h200").json()["rows"]
    expert = next(r for r in board if r["model"] == "expert kernels")
    assert expert["correct"] == 1 and expert["suite_size"] == 2  # the board reads the same run
    other = client.get("/tasks/fused-add-rmsnorm/").content.decode()  # the later run does not hold it
    assert "without timings" not in other and 'id="reference-h200"' in other
