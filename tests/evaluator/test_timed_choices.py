"""What a kernel chose by timing reaches the result and the results page.

Session 14's H100 run could not say whether w4a16's transposed route or causal-conv1d's rolling
kernel had won their timed choices: the worker reported each autotuner's last pick only, and a
kernel's own route choice not at all. The worker now reports every autotuner's pick per tuning key
and a module's ``TIMED_CHOICES`` entries, and the results page lists the latter.
"""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest
import triton
import triton.language as tl

from evaluator import suite_report
from evaluator.ab_report import choice_rows, choices_markdown
from evaluator.protocol import CHOICE_PREFIX
from evaluator.result import RunResult
from evaluator.runner import RunOptions, run
from evaluator.worker import AUTOTUNE_KEYS, VALUE_CAP, timed_picks
from tasks.registry import REPO_ROOT, get_task


@triton.jit
def _copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def _tuner() -> triton.runtime.autotuner.Autotuner:
    configs = [triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})]
    return triton.autotune(configs=configs, key=["n"])(_copy_kernel)


def test_the_worker_reports_every_tuning_key_and_the_timed_choices() -> None:
    module = types.ModuleType("candidate")
    module.tuned = _tuner()
    module.tuned.cache[(64, "torch.float32")] = module.tuned.configs[1]
    module.tuned.cache[(4096, "torch.float32")] = module.tuned.configs[0]
    module._per_layout = {(1, 0): _tuner()}  # a tuner kept in a dict, as the fp8 quant expert does
    module._per_layout[(1, 0)].cache[(8,)] = module._per_layout[(1, 0)].configs[0]
    module.TIMED_CHOICES = {"route M=16": "swapped (split-k 128 us, swapped 101 us)", "long": "x" * 5000}
    found = timed_picks([module])
    assert "BLOCK: 32" in found["tuned [64, torch.float32]"]
    assert "BLOCK: 16" in found["tuned [4096, torch.float32]"]
    assert "BLOCK: 16" in found["_per_layout [8]"]
    assert found[f"{CHOICE_PREFIX}route M=16"] == "swapped (split-k 128 us, swapped 101 us)"
    assert len(found[f"{CHOICE_PREFIX}long"]) == VALUE_CAP
    # Capped in count, and anything but a plain dict is ignored.
    module.TIMED_CHOICES = {f"k{i}": "v" for i in range(1000)}
    module.tuned.cache.clear()
    assert sum(k.startswith(CHOICE_PREFIX) for k in timed_picks([module])) == AUTOTUNE_KEYS
    module.TIMED_CHOICES = [("route", "swapped")]
    assert not any(k.startswith(CHOICE_PREFIX) for k in timed_picks([module]))


def test_the_results_page_lists_the_timed_choices_and_not_the_tuners() -> None:
    run_ = RunResult.model_validate(json.loads(
        (REPO_ROOT / "docs/results/h100-runs/bench-w4a16-awq-gemm.json").read_text()))
    # The committed run's own choices are listed (session 29's w4a16 run reports its routes) ...
    assert "| w4a16-awq-gemm | route M=16 N=8192 K=28672 | register-dequant (split-k" in suite_report.summary(run_, {"w4a16-awq-gemm": "fp16"})
    # ... a run whose kernels reported only autotuner picks gets no section ...
    run_.tasks[0].autotune = {k: v for k, v in run_.tasks[0].autotune.items() if not k.startswith(CHOICE_PREFIX)}
    assert run_.tasks[0].autotune
    assert "Choices the kernels made by timing" not in suite_report.summary(run_, {"w4a16-awq-gemm": "fp16"})
    run_.tasks[0].autotune = {
        f"{CHOICE_PREFIX}route M=16 N=14336 K=4096": "swapped (split-k 128 us, swapped 101 us)",
        "_dense_gemm_tuned [1024, 14336, 4096]": "BM: 128, BN: 256",
    }
    assert suite_report.timed_choices(run_) == [
        ("w4a16-awq-gemm", "route M=16 N=14336 K=4096", "swapped (split-k 128 us, swapped 101 us)")]
    page = suite_report.summary(run_, {"w4a16-awq-gemm": "fp16"})
    assert "### Choices the kernels made by timing" in page
    assert "| w4a16-awq-gemm | route M=16 N=14336 K=4096 | swapped (split-k 128 us, swapped 101 us) |" in page
    assert "_dense_gemm_tuned" not in page
    # A kernel's text cannot break the table: pipes and line breaks are flattened.
    run_.tasks[0].autotune = {f"{CHOICE_PREFIX}a|b": "x\n| y |"}
    assert "| w4a16-awq-gemm | a/b | x / y / |" in suite_report.summary(run_, {"w4a16-awq-gemm": "fp16"})


#: The silu-and-mul expert (on the CPU, its one fixed launch), wrapped to record a choice.
CANDIDATE = (REPO_ROOT / "references/silu-and-mul/expert.py").read_text() + '''

TIMED_CHOICES = {}
_expert_silu_and_mul = silu_and_mul


def silu_and_mul(x):
    TIMED_CHOICES[f"route T={x.shape[0]} d={x.shape[1] // 2}"] = "the fixed launch (the only route)"
    return _expert_silu_and_mul(x)
'''


@pytest.mark.interpreter
def test_a_candidates_timed_choices_come_back_with_its_result(tmp_path: Path) -> None:
    """Through the real engine: the choice is made in the worker process and crosses to the judge
    with the check call's answer."""
    kernel = tmp_path / "kernel.py"
    kernel.write_text(CANDIDATE)
    result = run([get_task("silu-and-mul")], lambda _t: kernel,
                 RunOptions(command="check", smoke=True, interpret=True, timeout_s=300))
    task = result.tasks[0]
    assert task.status == "correct", task.reason
    chosen = suite_report.timed_choices(result)
    assert ("silu-and-mul", "route T=9 d=160", "the fixed launch (the only route)") in chosen


@pytest.mark.interpreter
def test_the_experts_own_choices_come_back_beside_the_candidates(task_tree) -> None:
    """An A/B run benches an expert's earlier file as the candidate beside the current expert: the
    result keeps both sides' picks (``autotune``, ``expert_autotune``), and the A/B table lists
    them side by side, so it says which launch each version ran."""
    root = task_tree("silu-and-mul")
    expert = root / "references/silu-and-mul/expert.py"
    expert.write_text(CANDIDATE.replace("the fixed launch (the only route)", "the expert's launch"))
    kernel = root / "kernel.py"
    kernel.write_text(CANDIDATE)
    task = get_task("silu-and-mul", root)
    result = run([task], lambda _t: kernel,
                 RunOptions(command="bench", smoke=True, interpret=True, cpu_timing=True, compare=["expert"],
                            workloads=["S1"], timeout_s=300,
                            timing={"min_count": 3, "max_count": 4, "budget_s": 0.5, "warmup": 1, "max_checks": 1}))
    done = result.tasks[0]
    assert done.status == "correct", done.reason
    what = f"{CHOICE_PREFIX}route T=9 d=160"
    assert done.autotune.get(what) == "the fixed launch (the only route)", done.autotune
    assert done.expert_autotune.get(what) == "the expert's launch", done.expert_autotune
    rows = choice_rows(result)
    assert [(r.before, r.after) for r in rows if r.what == what] == [
        ("the fixed launch (the only route)", "the expert's launch")]
    assert "| silu-and-mul | choice route T=9 d=160 | the fixed launch (the only route) | the expert's launch |" in \
        choices_markdown(rows)


def test_the_ab_choice_table_marks_a_missing_side_and_refuses_a_side_with_no_picks() -> None:
    run_ = RunResult.model_validate(json.loads(
        (REPO_ROOT / "docs/results/h100-runs/s21-ab-mamba2-decay.json").read_text()))
    rows = choice_rows(run_)  # kept before the expert's picks were: its side is empty
    assert rows and all(r.before and not r.after for r in rows)
    text = choices_markdown(rows)
    assert "| mamba2-ssd-chunk-scan | choice launch times T=32768 H=128 P=64 N=128 S=16 | dt 25 us" in text
    assert text.splitlines()[-1].endswith("| - |")
    run_.tasks[0].autotune = {}
    assert choices_markdown(choice_rows(run_)) == ""
    with pytest.raises(ValueError):
        choice_rows(run_, before="compile")
