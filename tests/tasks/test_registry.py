"""The task loader: the real tree validates, and a broken tree reports every problem at once."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tasks import formula
from tasks.registry import REPO_ROOT, TaskLoadError, get_task, load_tasks

TEMPLATE = "fused-add-rmsnorm"


def test_whole_tree_validates():
    report = load_tasks()
    assert report.problems == [], "\n".join(str(p) for p in report.problems)
    slugs = [t.slug for t in report.tasks]
    assert {"fused-add-rmsnorm", "silu-and-mul"} <= set(slugs)
    assert len(slugs) == len(set(slugs))


@pytest.mark.parametrize("slug, expected_mb", [
    ("fused-add-rmsnorm", [536.9, 536.9, 939.5]),
    ("silu-and-mul", [1409.3, 1409.3, 604.0]),
])
def test_roofline_bytes_match_the_catalogue(slug, expected_mb):
    task = get_task(slug)
    got = [round(task.roofline(w.params)[1] / 1e6, 1) for w in task.workloads()]
    assert got == expected_mb


def _copy_tree(tmp_path: Path, slugs=(TEMPLATE,)) -> Path:
    for slug in slugs:
        for part in ("tasks", "references", "guidance"):
            shutil.copytree(REPO_ROOT / part / slug, tmp_path / part / slug)
    return tmp_path


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def test_every_problem_is_reported_at_once_with_file_and_field(tmp_path):
    root = _copy_tree(tmp_path)
    toml = root / "tasks" / TEMPLATE / "task.toml"
    _edit(toml, 'category = "norm-activation"', 'category = "norms"\nbogus_key = 1')
    _edit(toml, 'name = "weight"\nshape = ["H"]', 'name = "weight"\nshape = ["H", 1.5]')
    _edit(toml, 'flops = "5*T*H"', 'flops = "5*T*H + __import__(1)"')
    report = load_tasks(root)
    fields = {(p.file, p.field) for p in report.problems}
    rel = f"tasks/{TEMPLATE}/task.toml"
    assert (rel, "category") in fields
    assert (rel, "bogus_key") in fields
    assert any(f == rel and fld.startswith("inputs.2.shape") for f, fld in fields)
    assert any(f == rel and fld.startswith("roofline.flops") for f, fld in fields)
    assert report.tasks == []


def test_cross_file_problems(tmp_path):
    root = _copy_tree(tmp_path)
    toml = root / "tasks" / TEMPLATE / "task.toml"
    (root / "guidance" / TEMPLATE / "L2.md").unlink()
    (root / "guidance" / TEMPLATE / "L3.md").write_text("# L3\n\n```python\nprint('code')\n```\n" + "x" * 300)
    (root / "references" / TEMPLATE / "expert.py").write_text("def fused_add_rmsnorm(:\n")
    _edit(toml, 'bytes = "nbytes_x', 'bytes = "nbytes_q + nbytes_x')
    _edit(toml, 'params = { T = 7, H = 96, eps = 1e-5, x_std = 1.0, res_std = 4.0, dtype = "fp16" }',
          'params = { T = 7, H = 96, eps = 1e-5, x_std = 1.0, res_std = 4.0, dtype = "bf16" }')
    messages = [str(p) for p in load_tasks(root).problems]
    joined = "\n".join(messages)
    assert f"guidance/{TEMPLATE}/L2.md: guidance file is missing" in joined
    assert "no code blocks" in joined
    assert f"references/{TEMPLATE}/expert.py: line 1: does not parse" in joined
    assert "unknown name 'nbytes_q'" in joined
    assert "bf16, which Triton's interpreter computes wrongly" in joined
    assert len(messages) >= 5


def test_slug_must_match_folder(tmp_path):
    root = _copy_tree(tmp_path)
    _edit(root / "tasks" / TEMPLATE / "task.toml", 'slug = "fused-add-rmsnorm"', 'slug = "fused-add-rms"')
    assert any("does not match its folder" in str(p) for p in load_tasks(root).problems)


def test_missing_baseline_functions(tmp_path):
    root = _copy_tree(tmp_path)
    (root / "tasks" / TEMPLATE / "baseline.py").write_text("import torch\n\ndef something_else():\n    pass\n")
    problems = [str(p) for p in load_tasks(root).problems]
    assert any("must define a top-level function fused_add_rmsnorm()" in p for p in problems)
    assert any("must define a top-level function reference()" in p for p in problems)


def test_invalid_toml_and_strict_mode(tmp_path):
    root = _copy_tree(tmp_path)
    (root / "tasks" / TEMPLATE / "task.toml").write_text("this is = = not toml")
    with pytest.raises(TaskLoadError) as info:
        load_tasks(root, strict=True)
    assert "is not valid TOML" in str(info.value)


def test_duplicate_task_ids(tmp_path):
    root = _copy_tree(tmp_path, (TEMPLATE, "silu-and-mul"))
    _edit(root / "tasks" / "silu-and-mul" / "task.toml", 'id = "T16"', 'id = "T15"')
    assert any("T15 is also used by" in str(p) for p in load_tasks(root).problems)


@pytest.mark.parametrize("text, env, expected", [
    ("5*T*H", {"T": 2, "H": 3}, 30),
    ("2*d", {"d": 7}, 14),
    ("max(a, b) // 2", {"a": 9, "b": 4}, 4),
    ("ceil(n / 3)", {"n": 10}, 4),
    (12, {}, 12),
])
def test_formula_evaluates(text, env, expected):
    assert formula.evaluate(text, env) == expected


@pytest.mark.parametrize("text", [
    "__import__('os')", "T.real", "[1, 2]", "lambda: 1", "'a' * 3", "open('x')", "T if T else 1", "1 +",
])
def test_formula_refuses_anything_but_arithmetic(text):
    with pytest.raises(formula.FormulaError):
        formula.evaluate(text, {"T": 1})


def test_formula_unknown_name_and_division_by_zero():
    with pytest.raises(formula.FormulaError, match="unknown name 'Q'"):
        formula.evaluate("Q + 1", {})
    with pytest.raises(formula.FormulaError, match="division by zero"):
        formula.evaluate("1 / T", {"T": 0})


def test_canonicalize_flag_needs_the_hook(tmp_path):
    root = _copy_tree(tmp_path)
    _edit(root / "tasks" / TEMPLATE / "task.toml", 'generator = "generic"', 'generator = "generic"\ncanonicalize = true')
    problems = [str(p) for p in load_tasks(root).problems]
    assert any("must define a top-level function canonicalize()" in p for p in problems)


def test_the_catalogue_is_complete_26_tasks_85_workloads():
    """TASKS.md: 26 tasks, 85 catalogue workloads; smoke workloads are extra and never bf16."""
    report = load_tasks()
    assert report.problems == []
    assert len(report.tasks) == 26
    assert sum(len(t.spec.workloads) for t in report.tasks) == 85
    assert sorted(t.spec.id for t in report.tasks) == [f"T{i:02d}" for i in range(1, 27)]
