"""gated-delta-rule-chunked's phase-1 kernels give the same outputs.

On the GPU the first call of a shape times them and keeps the fastest: ``blocks`` (one program per
chunk and q/k head, W and U as sums of 16-row products) and ``64-row`` (one program per chunk and
value head, T put together as one 64 x 64 tile through a scratch buffer, W and U as single 64-row
products; also launched capped at 128 registers a thread), ``split`` (T alone in one launch, W
and U from the stored T in a second) and the three-launch route (the products per chunk and q/k
head, then T in programs of one or two warps, then W and U). The interpreter's expert runs take
``64-row``. Here all of them run in Triton's interpreter on the smoke shapes and on shapes with
several chunks a sequence, partial last chunks, grouped value heads and one value head per q/k
head, in fp16 and fp32: their outputs and final states must agree to rounding, and each must
match the task's fp64 reference within the task's tolerance rule.
"""

from __future__ import annotations

import pytest

from tests.tasks.expert_script import run_against_expert

pytestmark = pytest.mark.interpreter

CHECK = r'''
import json
params = json.loads(sys.argv[1])
params.setdefault("scale", params["K"] ** -0.5)
inp = base.make_inputs(params, torch.Generator().manual_seed(5), torch.device("cpu"))
args = dict(inp, scale=params["scale"], n_final=params["NF"])
args.pop("varlen", None)
outs = {}
for wy in ("blocks", "64-row", "64-row-128-regs", "split", "3-launch-1-warp", "3-launch-2-warps"):
    outs[wy] = mod._forward(args["q"], args["k"], args["v"], args["g"], args["beta"], args["initial_state"],
                            args["cu_seqlens"], params["scale"], params["NF"], wy)
ref_o, ref_final = base.reference(**inp, scale=params["scale"], varlen=params["varlen"], n_final=params["NF"])
tol = {"fp16": 1e-3, "fp32": 1e-2}[params["dtype"]]
for wy, (o, final) in outs.items():
    err = float((o.double() - ref_o.double()).abs().max() / ref_o.double().abs().max().clamp_min(1e-12))
    assert err < tol, (wy, "output", err)
    if params["NF"]:
        errs = float((final.double() - ref_final.double()).abs().max() / ref_final.double().abs().max())
        assert errs < tol, (wy, "final state", errs)
o1, f1 = outs["blocks"]
for wy in ("64-row", "64-row-128-regs", "split", "3-launch-1-warp", "3-launch-2-warps"):
    o2, f2 = outs[wy]
    assert torch.allclose(o1.float(), o2.float(), rtol=1e-2, atol=2e-3), (wy, float((o1.float() - o2.float()).abs().max()))
    assert torch.allclose(f1, f2, rtol=1e-3, atol=1e-4), (wy, float((f1 - f2).abs().max()))
# The split and three-launch routes compute the 64-row kernel's products on the same operands (T,
# and for the three-launch route K̂·K̂ᵀ, through memory in fp32 instead of the program's scratch
# tile): the same bits.
for wy in ("split", "3-launch-1-warp", "3-launch-2-warps"):
    assert torch.equal(outs[wy][0], outs["64-row"][0]) and torch.equal(outs[wy][1], outs["64-row"][1]), wy
print("ok")
'''

SHAPES = {
    "S1": {"B": 1, "T": 150, "H": 1, "HV": 2, "K": 32, "V": 32, "N": 3, "NI": 3, "NF": 3, "varlen": 1, "dtype": "fp16"},
    "S2": {"B": 2, "T": 70, "H": 1, "HV": 2, "K": 16, "V": 32, "N": 2, "NI": 0, "NF": 0, "varlen": 0, "dtype": "fp32"},
    "long": {"B": 1, "T": 300, "H": 2, "HV": 4, "K": 32, "V": 16, "N": 2, "NI": 2, "NF": 2, "varlen": 1,
             "dtype": "fp16"},
    "four value heads a head, K != V": {"B": 1, "T": 200, "H": 1, "HV": 4, "K": 64, "V": 32, "N": 2, "NI": 2, "NF": 2,
                                         "varlen": 1, "dtype": "fp16"},
    "one value head a head": {"B": 2, "T": 96, "H": 2, "HV": 2, "K": 32, "V": 32, "N": 2, "NI": 0, "NF": 2,
                              "varlen": 0, "dtype": "fp32"},
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_both_phase_one_kernels_agree_and_match_the_reference(shape: str) -> None:
    import json

    run_against_expert("gated-delta-rule-chunked", CHECK, json.dumps(SHAPES[shape]))
