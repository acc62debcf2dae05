"""The merge-attn-states kernel computes the op in every configuration the GPU autotuner may pick.

On the GPU the expert times its ``GPU_CONFIGS`` (token blocks of one head in two launch orders,
and blocks of consecutive rows of the token-major [T*H, D] view) per shape and keeps the fastest;
the interpreter's smoke runs take one fixed ORDER 0 tile. Here each candidate runs in Triton's
interpreter on token counts that are not multiples of any block, odd head counts and a head_dim
that is not a power of two, with empty, +inf-marked and doubly-empty rows (the task's generator),
in fp16 and fp32 (the interpreter computes bf16 wrongly), against the task's baseline under its
tolerances: o at the dtype's default, lse at 1e-3 / 1e-5, -inf reproduced exactly. The outputs start
as NaN, so a row no program writes fails.
"""

from __future__ import annotations

import pytest

from tests.tasks.expert_script import run_against_expert

pytestmark = pytest.mark.interpreter

CHECK = r'''
T, H, D, dtype = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
inp = base.make_inputs({"T": T, "H": H, "D": D, "dtype": dtype}, torch.Generator().manual_seed(T + H + D),
                       torch.device("cpu"))
ref_o, ref_lse = base.merge_attn_states(**inp)
tol = {"fp16": 5e-3, "fp32": 1e-4}[dtype]
assert len(mod.GPU_CONFIGS) <= 6
for cfg in mod.GPU_CONFIGS:
    o = torch.full((T, H, D), float("nan"), dtype=inp["o_a"].dtype)
    lse = torch.full((H, T), float("nan"))
    grid = mod.merge_grid(T, H)(cfg.kwargs)
    mod._merge_attn_states_kernel[grid](o, lse, inp["o_a"], inp["lse_a"], inp["o_b"], inp["lse_b"], T, H, D,
                                        inp["o_a"].stride(0), inp["o_a"].stride(1),
                                        BLOCK_D=triton.next_power_of_2(D), num_warps=cfg.num_warps, **cfg.kwargs)
    torch.testing.assert_close(o, ref_o, atol=tol, rtol=tol, msg=lambda m: f"{cfg}: o: {m}")
    torch.testing.assert_close(lse, ref_lse, atol=1e-3, rtol=1e-5, msg=lambda m: f"{cfg}: lse: {m}")
print("ok")
'''


@pytest.mark.parametrize("t, h, d, dtype", [(37, 3, 96, "fp32"), (45, 5, 64, "fp16")])
def test_every_candidate_computes_the_op(t: int, h: int, d: int, dtype: str) -> None:
    run_against_expert("merge-attn-states", CHECK, t, h, d, dtype)
