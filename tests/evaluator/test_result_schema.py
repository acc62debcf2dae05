"""The published JSON Schema of the result is the one the models define."""

from __future__ import annotations

import json

from evaluator.result import RESULT_SCHEMA_VERSION, RunResult
from tasks.registry import REPO_ROOT


def test_docs_schema_is_current():
    published = json.loads((REPO_ROOT / "docs" / "result-schema.json").read_text())
    assert published == RunResult.model_json_schema(), "run `python -m evaluator schema --output docs/result-schema.json`"


def test_schema_version_is_pinned_in_results():
    assert RunResult.model_json_schema()["properties"]["schema_version"]["const"] == RESULT_SCHEMA_VERSION


def test_measured_h200_result_still_validates():
    """The committed H200 run must stay readable by the current schema (the portal imports it)."""
    data = json.loads((REPO_ROOT / "docs" / "results" / "h200-bench.json").read_text())
    result = RunResult.model_validate(data)
    assert result.mode == "gpu" and result.timing_taken and result.all_correct
