"""The CLI prints the scores the board computes (SCORING.md: one scoring module for the CLI, the
workers and the board), not only per-workload ratios."""

from __future__ import annotations

import io
import math
from pathlib import Path

from rich.console import Console

from evaluator.report import print_result, score_lines
from evaluator.result import RunResult
from evaluator.score_result import score_run
from evaluator.scoring import submission_score

H200 = Path(__file__).resolve().parents[2] / "docs" / "results" / "h200-bench.json"


def test_the_cli_shows_task_speedups_and_the_performance_score() -> None:
    run = RunResult.model_validate_json(H200.read_text())
    scores = score_run(run)
    total = submission_score(scores, list(scores))
    out = io.StringIO()
    print_result(run, Console(file=out, width=200))
    text = out.getvalue()
    assert f"silu-and-mul: S = {scores['silu-and-mul'].speedup:.2f}x" in text
    assert f"Performance Score over these 2 task(s): {total.performance_score:.3f}" in text
    assert math.isclose(total.performance_score, math.sqrt(scores["silu-and-mul"].speedup
                                                           * scores["fused-add-rmsnorm"].speedup))


def test_a_failed_task_counts_at_the_penalty_and_an_untimed_run_shows_no_score() -> None:
    run = RunResult.model_validate_json(H200.read_text())
    run.tasks[0] = run.tasks[0].model_copy(update={"status": "incorrect", "error_code": "eval:user:wrong-answer"})
    lines = score_lines(run)
    assert f"{run.tasks[0].slug}: failed, counts 0.1x" in lines[0] and "wrong-answer" in lines[0]
    assert lines[-1].endswith("(1 correct)")
    assert score_lines(run.model_copy(update={"timing_taken": False})) == []
