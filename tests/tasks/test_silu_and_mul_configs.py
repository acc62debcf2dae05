"""Every silu-and-mul configuration the GPU autotuner may pick computes the op.

On the GPU the expert times a few candidates per row length d (the fixed launch, the same tile
with column blocks fastest, other tiles) on a shape's first call; the interpreter's smoke runs
take the fixed launch alone. Here each candidate of several row lengths runs in Triton's
interpreter, through its own grid (2D with row blocks fastest, or flat with column blocks
fastest), on row counts and lengths that are not multiples of its tile (masked) and on one that
is (unmasked, ``EVEN``), against the task's baseline. It also checks that these are the
configurations the GPU tuner times.
"""

from __future__ import annotations

import pytest

from tests.tasks.expert_script import run_against_expert

pytestmark = pytest.mark.interpreter

CHECK = r'''
T, d = int(sys.argv[1]), int(sys.argv[2])
x = torch.randn(T, 2 * d, generator=torch.Generator().manual_seed(d), dtype=torch.float32) * 2
ref = base.silu_and_mul(x)
cands = mod._candidates(d)
assert cands and list(map(str, mod._tuned(d).configs)) == list(map(str, cands))  # what the GPU tuner times
rows, block_d, warps = mod._launch_config(d)
first = cands[0]
assert first.kwargs == {"ROWS": rows, "BLOCK_D": block_d, "COLS_FIRST": 0} and first.num_warps == warps
assert len(cands) <= 8
assert any(c.kwargs.get("HINT") == 0 for c in cands)  # torch.compile's unhinted reads are timed too
orders = set()
for cfg in cands:
    out = torch.full((T, d), float("nan"))
    grid = mod._grid(T, d)(cfg.kwargs)
    mod._silu_and_mul_fwd_kernel[grid](x, out, T, d, x.stride(0), out.stride(0), num_warps=cfg.num_warps,
                                       **cfg.kwargs)
    # EVEN follows the shape: an exactly covered tensor runs the unmasked build.
    even = T % cfg.kwargs["ROWS"] == 0 and d % cfg.kwargs["BLOCK_D"] == 0
    assert mod._silu_and_mul_fwd_kernel.values["EVEN"](dict(T=T, d=d, **cfg.kwargs)) == even
    err = (out - ref).abs().max().item()
    assert err < 1e-5, (str(cfg), err)
    orders.add(cfg.kwargs["COLS_FIRST"])
assert orders == {0, 1}, orders
print("ok")
'''


@pytest.mark.parametrize("T, d", [(7, 48), (9, 160), (13, 384), (11, 768), (5, 1000), (3, 6144), (4, 2048)])
def test_every_gpu_candidate_computes_the_op(T: int, d: int) -> None:
    run_against_expert("silu-and-mul", CHECK, T, d)
