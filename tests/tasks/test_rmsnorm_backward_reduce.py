"""The rmsnorm-backward expert's dW column reduction with more partial rows than one tile.

On the GPU stage 1 leaves G = 4 x SMs partial rows (528 on the H200) and stage 2 sums them in
unrolled 128-row tiles; the interpreter runs the expert with G <= 16, a single tile. This calls
the reduction kernel itself with G spanning several tiles and a ragged last one, in Triton's
interpreter, against a float64 sum.
"""

from __future__ import annotations

import pytest

from tests.tasks.expert_script import run_against_expert

pytestmark = pytest.mark.interpreter

CHECK = r'''
G, H = int(sys.argv[1]), int(sys.argv[2])
part = torch.randn(G, H, generator=torch.Generator().manual_seed(G), dtype=torch.float32)
dw = torch.full((H,), float("nan"))
mod._rmsnorm_bwd_dw_reduce_kernel[(triton.cdiv(H, 32),)](part, dw, H, G=G, BLOCK_G=128, BLOCK_N=32)
err = (dw.double() - part.double().sum(0)).abs().max().item()
assert err < 1e-3, f"max error {err}"
print("ok")
'''


@pytest.mark.parametrize(("G", "H"), [(528, 100), (300, 64), (128, 40)])
def test_column_reduction_sums_every_partial_row(G: int, H: int) -> None:
    run_against_expert("rmsnorm-backward", CHECK, G, H)
