"""Every moe-unpermute-combine configuration the GPU autotuner may pick computes the op.

On the GPU the expert times a few candidates per (H, k) (the fixed launch, the same slice with a
token's column slices adjacent, wider slices) on a shape's first call; the interpreter's smoke
runs take the fixed launch alone. Here each candidate runs in Triton's interpreter, through its
own grid (2D with tokens fastest, or flat with a token's slices adjacent), on hidden sizes that
are not multiples of its slice, with dropped slots and an alpha, against the task's baseline. It
also checks that these are the configurations the GPU tuner times.
"""

from __future__ import annotations

import pytest

from tests.tasks.expert_script import run_against_expert

pytestmark = pytest.mark.interpreter

CHECK = r'''
T, k, H = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
params = {"T": T, "k": k, "H": H, "E": k + 2, "bs": 4, "alpha": 2.5, "drop": 0.2, "dtype": "fp32"}
inp = base.make_inputs(params, torch.Generator().manual_seed(T * k + H), torch.device("cpu"))
y, idx, w = inp["y"], inp["inv_idx"], inp["topk_weights"]
ref = base.moe_unpermute_combine(y, idx, w, 2.5)
cands = mod._candidates(H, k)
assert cands and list(map(str, mod._tuned(H, k).configs)) == list(map(str, cands))  # what the GPU tuner times
block_h, warps = mod._config(H)
first = cands[0]
assert first.kwargs == {"BLOCK_H": block_h, "COLS_FIRST": 0} and first.num_warps == warps
assert len(cands) <= 6
for cfg in cands:
    out = torch.full((T, H), float("nan"))
    grid = mod._grid(T, H)(cfg.kwargs)
    mod._moe_combine_kernel[grid](y, idx, w, out, H, 2.5, y.stride(0), out.stride(0), K=k,
                                  K_PAD=triton.next_power_of_2(k), num_warps=cfg.num_warps, **cfg.kwargs)
    err = (out - ref).abs().max().item()
    assert err < 1e-4, (str(cfg), err)
assert len(cands) >= int(sys.argv[4]), [str(c) for c in cands]
print("ok")
'''


@pytest.mark.parametrize("T, k, H, n_cands", [(5, 2, 1100, 4), (4, 3, 3000, 4), (3, 8, 2500, 3), (6, 4, 200, 1)])
def test_every_gpu_candidate_computes_the_op(T: int, k: int, H: int, n_cands: int) -> None:
    run_against_expert("moe-unpermute-combine", CHECK, T, k, H, n_cands)
