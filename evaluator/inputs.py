"""Input generation for one workload: seeded, on the judging device, per the task's spec.

The generic generator fills each tensor as its ``init`` says; a task with ``generator =
"custom"`` provides ``make_inputs(params, generator, device)`` in its baseline.py for inputs
with structure (block tables, ties, -inf rows). Seeds come from the per-run secret schedule, so
a kernel cannot predict its inputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from tasks import formula
from tasks.registry import Task

TORCH_DTYPES: dict[str, torch.dtype] = {
    "bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp64": torch.float64,
    "fp8e4m3": torch.float8_e4m3fn, "fp8e5m2": torch.float8_e5m2, "int8": torch.int8,
    "uint8": torch.uint8, "int16": torch.int16, "int32": torch.int32, "int64": torch.int64,
    "bool": torch.bool,
}

Inputs = dict[str, Any]


def make_inputs(task: Task, params: Mapping[str, Any], seed: int, device: torch.device,
                baseline_module: Any = None) -> Inputs:
    """Fresh inputs for one trial: tensors by name, then scalars."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    if task.spec.generator == "custom":
        inputs = dict(baseline_module.make_inputs(dict(params), gen, device))
    else:
        inputs = {}
        for arg in task.spec.inputs:
            shape = task.shape_of(arg.shape, params)
            dtype = TORCH_DTYPES[task.dtype_of(arg.dtype, params)]
            inputs[arg.name] = _fill(shape, dtype, _resolve_init(arg.init, params), gen, device)
    for s in task.spec.scalars:
        inputs[s.name] = params[s.param]
    return inputs


def _resolve_init(init: Any, params: Mapping[str, Any]) -> Any:
    """The init with any formula fields evaluated against the workload's parameters."""
    numeric = {k: v for k, v in params.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    values = {f: float(formula.evaluate(getattr(init, f), numeric)) for f in ("mean", "std", "low", "high")}
    return init.model_copy(update=values)


def _fill(shape: tuple[int, ...], dtype: torch.dtype, init: Any, gen: torch.Generator,
          device: torch.device) -> torch.Tensor:
    if init.dist in ("zeros", "ones"):
        return (torch.zeros if init.dist == "zeros" else torch.ones)(shape, dtype=dtype, device=device)
    if init.dist == "arange":
        n = 1
        for d in shape:
            n *= d
        return torch.arange(n, device=device).reshape(shape).to(dtype)
    if init.dist == "randint":
        return torch.randint(int(init.low), int(init.high), shape, generator=gen, device=device).to(dtype)
    work = torch.float32 if dtype.itemsize <= 4 else dtype
    t = torch.empty(shape, dtype=work, device=device)
    if init.dist == "normal":
        t.normal_(init.mean, init.std, generator=gen)
    else:
        t.uniform_(init.low, init.high, generator=gen)
    return t.to(dtype)


def clone_inputs(inputs: Inputs) -> Inputs:
    """Independent copies, so each side (reference, baseline, candidate) gets its own."""
    return {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}


def upcast(inputs: Inputs, dtype: torch.dtype) -> Inputs:
    """Floating-point tensors converted to ``dtype`` for a higher-precision reference."""
    return {
        k: (v.to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v)
        for k, v in inputs.items()
    }


def tensor_bytes(inputs: Inputs) -> int:
    return sum(v.numel() * v.element_size() for v in inputs.values() if isinstance(v, torch.Tensor))
