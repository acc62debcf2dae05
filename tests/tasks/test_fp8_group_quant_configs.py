"""The fp8 group-quant kernel computes the op in every configuration the GPU autotuner may pick.

On the GPU the expert times a few (ROWS, GROUPS, ORDER, warps) candidates per shape and scale
layout (``gpu_configs``) and keeps the fastest; the interpreter's smoke runs take only the first
(the fixed block in ORDER 0). Here each candidate runs in Triton's interpreter, with the software
e4m3 rounding the interpreter needs, on shapes whose rows and groups are not multiples of any
block (T = 37; G = 11, 5 or 3, below one block of groups too), in both scale layouts, with and
without UE8M0, in fp16 and fp32 (the interpreter computes bf16 wrongly). Scales must equal the
task's reference bit for bit and codes value for value (bit for bit but the sign of zero: the
interpreter's cast turns a -0 into +0; the task's rule counts them equal). The outputs start as
NaN, so a slot no program writes fails.
"""

from __future__ import annotations

import pytest

from tests.tasks.expert_script import run_against_expert

pytestmark = pytest.mark.interpreter

CHECK = r'''
cm, ue8m0, G, dtype = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
T, GS = 37, 128
K = G * GS
params = {"T": T, "K": K, "dtype": dtype}
x = base.make_inputs(params, torch.Generator().manual_seed(cm * 100 + ue8m0 * 10 + G), torch.device("cpu"))["x"]
ref_q, ref_s = base.reference(x, GS, 1e-10, cm, ue8m0)
configs = mod.gpu_configs(G, bool(cm))
rows, groups, warps = mod._launch_config(G, bool(cm))
assert configs[0].kwargs == {"ROWS": rows, "GROUPS": groups, "ORDER": 0} and configs[0].num_warps == warps
assert len(configs) <= 6
t_pad = (T + 3) // 4 * 4
for cfg in configs:
    q = torch.full((T, K), float("nan")).to(torch.float8_e4m3fn)
    s = torch.full((G, t_pad) if cm else (T, G), float("nan"))
    s_strides = (1, t_pad) if cm else (G, 1)
    grid = mod.quant_grid(T, G)(cfg.kwargs)
    mod._group_quant_kernel[grid](x, q, s, T, G, x.stride(0), q.stride(0), *s_strides, 1e-10, GS=GS,
                                  UE8M0=bool(ue8m0), SOFT_ROUND=True, num_warps=cfg.num_warps, **cfg.kwargs)
    got_s, want_s = (s[:, :T], ref_s[:, :T]) if cm else (s, ref_s)
    assert torch.equal(got_s, want_s), (str(cfg), (got_s - want_s).abs().nan_to_num(float("inf")).max().item())
    bad = (base._signed_code(q) != base._signed_code(ref_q)).sum().item()
    assert bad == 0, (str(cfg), bad)
print("ok")
'''


@pytest.mark.parametrize("cm, ue8m0, groups, dtype", [
    (0, 0, 11, "fp32"), (0, 1, 3, "fp16"), (1, 0, 11, "fp16"), (1, 1, 5, "fp32"),
])
def test_every_candidate_computes_the_op(cm: int, ue8m0: int, groups: int, dtype: str) -> None:
    run_against_expert("fp8-per-token-group-quant", CHECK, cm, ue8m0, groups, dtype)
