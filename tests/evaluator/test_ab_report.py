"""The A/B table (evaluator/ab_report.py) over committed A/B results: the figures the pages quote."""

from __future__ import annotations

import json
import math

import pytest

from evaluator.ab_report import ab_rows, markdown
from evaluator.result import RunResult
from tasks.registry import REPO_ROOT

RUNS = REPO_ROOT / "docs/results/h100-runs"


def _run(name: str) -> RunResult:
    return RunResult.model_validate(json.loads((RUNS / name).read_text()))


def test_before_is_the_earlier_file_and_after_the_tree_s_expert() -> None:
    run = _run("s21-ab-mamba2.json")
    rows = ab_rows(run)
    assert [(r.task, r.workload) for r in rows] == [("mamba2-ssd-chunk-scan", w) for w in ("W1", "W2", "W3")]
    w3 = run.tasks[0].workloads[-1].timings
    assert math.isclose(rows[-1].before_us, w3["candidate"].median_ms * 1e3)
    assert math.isclose(rows[-1].speedup, w3["candidate"].median_ms / w3["expert"].median_ms)
    assert f"{rows[-1].speedup:.2f}" == "1.12" and all(r.correct for r in rows)
    text = markdown(rows)
    assert "| mamba2-ssd-chunk-scan | W3 | 3,362.4 | 3,002.1 | 1.12x |" in text
    swapped = ab_rows(run, before="expert", after="candidate")
    assert all(math.isclose(a.speedup * b.speedup, 1.0) for a, b in zip(rows, swapped, strict=True))


def test_a_provider_the_run_did_not_time_reads_as_a_dash_and_the_same_provider_twice_is_refused() -> None:
    rows = ab_rows(_run("s21-ab-fused-moe-mlp.json"), before="compile", after="expert")
    assert rows and all(r.before_us is None and r.speedup is None for r in rows)
    assert "| fused-moe-mlp | W4 | - |" in markdown(rows, "compile", "expert")
    with pytest.raises(ValueError):
        ab_rows(_run("s21-ab-fused-moe-mlp.json"), before="expert", after="expert")
