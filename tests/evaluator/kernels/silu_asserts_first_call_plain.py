"""A correct T16 kernel that fails unless the judge makes the first call of each workload outside
the ATen-op recorder and every later correctness call inside it.

Why: a kernel compiles and times its own choices on its first call of a shape, and the recorder
(a Python dispatch mode) adds host time to the ATen ops such timing dispatches, so the judge
leaves that one call unrecorded (``evaluator.judge.Judge.run_trial``); the later trials must
still be recorded. The kernel reads the dispatch-mode stack to tell which call it is in and
raises when the harness gets either wrong, so ``check`` fails if that rule regresses.
"""

import torch
import triton
import triton.language as tl

_STACK = getattr(torch._C, "_len_" + "torch_dispatch_stack")
_SEEN: set[tuple[int, ...]] = set()


@triton.jit
def _kernel(x_ptr, out_ptr, d, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < d
    g = tl.load(x_ptr + row * 2 * d + cols, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(x_ptr + row * 2 * d + d + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * d + cols, (g / (1.0 + tl.exp(-g)) * u).to(out_ptr.dtype.element_ty), mask=mask)


def silu_and_mul(x):
    recorded = _STACK() > 0
    shape = tuple(x.shape)
    if shape not in _SEEN and recorded:
        raise RuntimeError(f"first call of shape {shape} ran inside the op recorder")
    if shape in _SEEN and not recorded:
        raise RuntimeError(f"a later correctness call of shape {shape} ran outside the op recorder")
    _SEEN.add(shape)
    T, d = x.shape[0], x.shape[1] // 2
    out = torch.empty((T, d), dtype=x.dtype, device=x.device)
    _kernel[(T,)](x, out, d, BLOCK=triton.next_power_of_2(d))
    return out
