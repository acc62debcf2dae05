"""mamba2-ssd-chunk-scan's output kernel factors the decay of the blocks left of the diagonal.

For a key block wholly before the row block, exp(cum_i - cum_j) is computed as
exp(cum_i - c0) · exp(c0 - cum_j) with c0 the row block's first cumulative decay: one
exponential per key, and the row factor applied once to the block's sum. Only the diagonal block
takes an exponential per element. The smoke workloads have at most two 64-token blocks a chunk;
here the expert runs in Triton's interpreter on 128- and 256-token chunks (up to three blocks
left of the diagonal), with partial chunks, grouped heads and initial states, against the task's
fp64 token-by-token reference, and on a decay so steep that the factors underflow inside a
block (Δ·A near -80 a token), where the output must stay finite and match.
"""

from __future__ import annotations

import pytest

from tests.tasks.expert_script import run_against_expert

pytestmark = pytest.mark.interpreter

CHECK = r'''
import json
params = json.loads(sys.argv[1])
steep = params.pop("steep")
inp = base.make_inputs(params, torch.Generator().manual_seed(params["L"]), torch.device("cpu"))
if steep:  # softplus(dt + bias) near 5 and A = -16: each token's decay is about exp(-80)
    inp["dt_bias"] = torch.full_like(inp["dt_bias"], 5.0)
    inp["A"] = torch.full_like(inp["A"], -16.0)
args = dict(inp, chunk_size=params["chunk_size"], varlen=params["varlen"])
out, final = mod.mamba2_ssd_chunk_scan(**args)
ref_out, ref_final = base.reference(**args)
assert bool(torch.isfinite(out).all()) and bool(torch.isfinite(final).all()), "non-finite output"
tol = {"fp16": 2e-3, "fp32": 1e-4}[params["dtype"]]
err = float((out.double() - ref_out).abs().max() / ref_out.abs().max())
errs = float((final.double() - ref_final).abs().max() / ref_final.abs().max().clamp_min(1e-30))
assert err < tol, ("out", err)
assert errs < tol, ("final states", errs)
print("ok")
'''

BASE = {"batch": 1, "H": 4, "P": 16, "G": 2, "N": 16, "S": 3, "varlen": 1}


@pytest.mark.parametrize("params", [
    {**BASE, "L": 600, "chunk_size": 256, "dtype": "fp32", "steep": False},
    {**BASE, "L": 420, "chunk_size": 128, "dtype": "fp16", "steep": False},
    {**BASE, "L": 520, "chunk_size": 256, "dtype": "fp32", "steep": True},
], ids=["Q256-fp32", "Q128-fp16", "Q256-steep"])
def test_factored_decay_matches_the_reference(params: dict) -> None:
    import json

    run_against_expert("mamba2-ssd-chunk-scan", CHECK, json.dumps(params))
