"""T10's bf16 tolerance is the catalogue's atol = 1e-2 * rms(ref) (the smallest workload's rms),
not the bf16 default: bf16 rounding of the right answer passes with a wide margin, and an
output whose only fault is 6e-3 of garbage on one element (a dropped slot read) fails."""

from __future__ import annotations

import torch

from evaluator.compare import error_ratio
from evaluator.modules import load_module
from tasks.registry import get_task


def test_rounding_passes_and_a_small_absolute_fault_fails() -> None:
    task = get_task("moe-unpermute-combine")
    base = load_module(task.baseline_path, "t10_baseline")
    rule = task.spec.outputs[0].compare
    w1 = next(w for w in task.spec.workloads if w.name == "W1").params
    params = {**w1, "T": 512, "E": 16}
    inputs = base.make_inputs(params, torch.Generator().manual_seed(3), torch.device("cpu"))
    ref = base.moe_unpermute_combine(**{k: (v.float() if v.is_floating_point() else v) for k, v in inputs.items()},
                                     alpha=float(params["alpha"]))
    assert 0.3 < float(ref.float().pow(2).mean().sqrt()) < 0.5  # W1's rms, the one the atol is set from
    assert error_ratio(ref.bfloat16(), ref, "bf16", rule).ratio < 0.5
    faulty = ref.clone()
    i = int(ref.abs().argmin())
    faulty.view(-1)[i] += 6e-3
    assert error_ratio(faulty.bfloat16(), ref, "bf16", rule).ratio > 1.0
