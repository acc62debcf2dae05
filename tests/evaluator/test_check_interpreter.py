"""Every expert kernel passes ``check --smoke`` in Triton's interpreter; wrong kernels are caught.

These run the real engine: the CLI in a subprocess, one child process per task, the kernels in
Triton's CPU interpreter on the smoke workloads.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator.result import RunResult
from evaluator.runner import RunOptions, run
from tasks.registry import REPO_ROOT, get_task, load_tasks

KERNELS = Path(__file__).parent / "kernels"
pytestmark = pytest.mark.interpreter


def _check(kernel: Path, slug: str) -> RunResult:
    task = get_task(slug)
    return run([task], lambda _t: kernel, RunOptions(command="check", smoke=True, interpret=True, timeout_s=300))


@pytest.mark.parametrize("slug", [t.slug for t in load_tasks().tasks])
def test_expert_passes_check_smoke_through_the_cli(slug, tmp_path):
    out = tmp_path / "result.json"
    proc = subprocess.run(
        [sys.executable, "-m", "evaluator", "check", f"references/{slug}/expert.py", "--task", slug, "--smoke",
         "--interpret", "--json", str(out), "--quiet"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    result = RunResult.model_validate(json.loads(out.read_text()))
    assert result.mode == "interpreter" and not result.timing_taken
    assert "no timing was taken" in result.note
    (task,) = result.tasks
    assert task.status == "correct" and task.verdict == "clean", task.reason
    assert [w.name for w in task.workloads] == [w.name for w in get_task(slug).workloads(smoke=True)]
    for w in task.workloads:
        assert len(w.trials) >= 3 and all(t.passed for t in w.trials)
        assert len({t.seed for t in w.trials}) == len(w.trials)
    assert "no timing was taken" in proc.stderr


WRONG = [
    ("fused-add-rmsnorm", "rmsnorm_off_by_one_mask.py", "tolerance", "y"),
    ("fused-add-rmsnorm", "rmsnorm_wrong_eps.py", "tolerance", "y"),
    ("fused-add-rmsnorm", "rmsnorm_fp16_accumulation.py", "tolerance", "y"),
    ("silu-and-mul", "silu_off_by_one_mask.py", None, "out"),
    ("silu-and-mul", "silu_swapped_halves.py", "tolerance", "out"),
    ("silu-and-mul", "silu_fp16_arithmetic.py", "tolerance", "out"),
]


@pytest.mark.parametrize("slug, kernel, rule, output", WRONG, ids=[w[1].removesuffix(".py") for w in WRONG])
def test_wrong_kernel_is_caught(slug, kernel, rule, output):
    result = _check(KERNELS / kernel, slug)
    (task,) = result.tasks
    assert task.status == "incorrect" and task.verdict == "bug"
    assert task.error_code == "eval:user:wrong-answer"
    failed = [t for w in task.workloads for t in w.trials if not t.passed]
    assert failed, "a wrong kernel must fail at least one trial"
    first = failed[0]
    assert first.output == output
    if rule:
        assert first.rule == rule
    else:  # an unwritten element reads back as stale memory: NaN or a wrong value
        assert first.rule in ("nan", "tolerance")
    assert first.worst is not None and task.reason.startswith("workload ")
    assert not result.all_correct


def test_first_call_of_each_workload_runs_outside_the_op_recorder():
    """A workload's first call (where a kernel times its own choices) is plain, every later
    correctness call recorded: the kernel raises on either mistake, and the recorded trials'
    ops still reach the result."""
    result = _check(KERNELS / "silu_asserts_first_call_plain.py", "silu-and-mul")
    (task,) = result.tasks
    assert task.status == "correct", task.reason
    assert len(task.workloads) > 1 and all(len(w.trials) >= 3 for w in task.workloads)
    assert "aten::empty" in task.aten_ops


def _canary(tmp_path: Path, slug: str, body: str) -> Path:
    task = get_task(slug)
    args = ", ".join(task.spec.input_names())
    path = tmp_path / f"canary_{slug}.py"
    path.write_text(
        "import torch\nimport triton\n\n@triton.jit\ndef _unused(x):\n    pass\n\n"
        f"def {task.spec.entry_point}({args}):\n{body}\n"
    )
    return path


CANARIES = {
    "zeros": "    outs = BASELINE(**ARGS)\n    outs = outs if isinstance(outs, tuple) else (outs,)\n"
             "    z = tuple(torch.zeros_like(o) for o in outs)\n    return z if len(z) > 1 else z[0]",
    "returns-an-input": "    outs = BASELINE(**ARGS)\n    n = len(outs) if isinstance(outs, tuple) else 1\n"
                        "    first = next(v for v in ARGS.values() if isinstance(v, torch.Tensor))\n"
                        "    return tuple([first] * n) if n > 1 else first",
    # Eager on inputs one precision lower (fp32 -> fp16, fp16 -> fp8 e4m3), its outputs in the
    # dtypes the task returns: it must fail by its values (tolerance), not by a dtype.
    "lower-precision-baseline": "    ref = BASELINE(**{k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in ARGS.items()})\n"
                                "    ref = ref if isinstance(ref, tuple) else (ref,)\n"
                                "    lower = {torch.float32: torch.float16, torch.float16: torch.float8_e4m3fn}\n"
                                "    low = {k: (v.to(lower[v.dtype]).to(v.dtype) if isinstance(v, torch.Tensor)"
                                " and v.dtype in lower else v) for k, v in ARGS.items()}\n"
                                "    outs = BASELINE(**low)\n    outs = outs if isinstance(outs, tuple) else (outs,)\n"
                                "    back = tuple(o.to(r.dtype) for o, r in zip(outs, ref))\n"
                                "    for k in UPDATED:\n        ARGS[k].copy_(low[k])\n"
                                "    return back if len(back) > 1 else back[0]",
}
#: Tasks whose inputs have no floating-point tensor of fp16 or fp32 to lower: the lower-precision
#: canary means nothing there.
NO_LOWER_PRECISION = {"moe-align-block-size"}  # expert ids and counts: integers only


#: The task the returns-an-input canary runs on where no output may alias an input: there the
#: worker's structure check refuses any output that shares an input's memory, whatever the task,
#: so one task stands for all of them (each such run is an engine start-up of about 14 s in CI).
ALIAS_REPRESENTATIVE = "silu-and-mul"


def _canary_cases() -> list[tuple[str, str]]:
    """(slug, canary) pairs: zeros and lower precision on every task (each task's comparison rule
    must catch them), returns-an-input on every task with an output that may alias an input (its
    values must catch it there) and on the representative."""
    cases = []
    for task in load_tasks().tasks:
        aliasing = any(o.may_alias for o in task.spec.outputs)
        for canary in sorted(CANARIES):
            if canary != "returns-an-input" or aliasing or task.slug == ALIAS_REPRESENTATIVE:
                cases.append((task.slug, canary))
    return cases


CANARY_CASES = _canary_cases()


@pytest.mark.parametrize("slug, canary", CANARY_CASES, ids=[f"{s}-{c}" for s, c in CANARY_CASES])
def test_canaries_fail(slug, canary, tmp_path):
    """EVALUATION.md, anti-cheat 10: zeros, an input, and eager in lower precision must all fail."""
    task = get_task(slug)
    baseline = f"    import importlib.util as _u\n    _s = _u.spec_from_file_location('b', {str(task.baseline_path)!r})\n" \
               "    _m = _u.module_from_spec(_s)\n    _s.loader.exec_module(_m)\n"
    args = "{" + ", ".join(f"{n!r}: {n}" for n in task.spec.input_names()) + "}"
    updated = [a.name for a in task.spec.inputs if a.updated]
    body = (CANARIES[canary].replace("BASELINE", f"_m.{task.spec.entry_point}").replace("ARGS", "_args")
            .replace("UPDATED", repr(updated)))
    path = _canary(tmp_path, slug, baseline + f"    _args = {args}\n" + body)
    (res,) = _check(path, slug).tasks
    if canary == "lower-precision-baseline" and slug in NO_LOWER_PRECISION:
        return
    assert res.status == "incorrect", f"{canary} passed {slug}: {res.reason}"
    if canary == "lower-precision-baseline":  # by its values, not by its dtype or shape
        rules = {t.rule for w in res.workloads for t in w.trials if not t.passed}
        assert rules and not rules & {"dtype", "shape", "type"}, (slug, rules, res.reason)
