"""Both causal-conv1d kernels, with every configuration the GPU autotuner may pick, compute the op.

On the GPU the expert times its tile kernel against its rolling-window kernel on a shape's first
call and keeps the faster, each autotuned over its candidates; the interpreter's smoke runs take
one fixed configuration of each. Here each rolling candidate (CHUNK rows a program, BLOCK_D
channels) runs in Triton's interpreter on fixed-length and packed variable-length input with
random initial states, a sequence shorter than W-1 and chunks that end mid-sequence, against the
task's reference, output and updated state both. W = 3 checks the taps a narrower filter lacks.
"""

from __future__ import annotations

import pytest

from tests.tasks.expert_script import run_against_expert

pytestmark = pytest.mark.interpreter

CHECK = r'''
varlen, W = int(sys.argv[1]), int(sys.argv[2])
T, N, D = (203 if varlen else 200), 4, 136
params = {"T": T, "N": N, "D": D, "W": W, "varlen": varlen, "dtype": "fp32"}
inp = base.make_inputs(params, torch.Generator().manual_seed(varlen * 10 + W), torch.device("cpu"))
if varlen:  # one sequence shorter than W - 1, the others ending mid-chunk
    inp["cu_seqlens"] = torch.tensor([0, 1, 70, 133, 203], dtype=torch.int32)
    inp["conv_state"].normal_()
fresh = {k: (v.clone() if torch.is_tensor(v) else v) for k, v in inp.items()}
ref_out, ref_state = base.causal_conv1d(**fresh, varlen=varlen)
fixed = 0 if varlen else T // N
for cfg in mod._ROLLING_CONFIGS:
    state = inp["conv_state"].clone()
    out = torch.empty_like(inp["x"])
    grid = mod._grid(T, N, D, fixed, "CHUNK")(cfg.kwargs)
    mod._causal_conv1d_rolling_kernel[grid](
        inp["x"], inp["weight"], inp["bias"], inp["cu_seqlens"], state, out, D, inp["x"].stride(0), out.stride(0),
        state.stride(0), state.stride(1), state.stride(2), N=N, W=W, FIXED_LEN=fixed, **cfg.kwargs)
    err = (out - ref_out).abs().max().item()
    assert err < 1e-5, (cfg.kwargs, err)
    assert torch.equal(state, ref_state), cfg.kwargs
print("ok")
'''


@pytest.mark.parametrize("varlen, w", [(0, 4), (1, 4), (1, 3)])
def test_every_rolling_candidate_computes_the_op(varlen: int, w: int) -> None:
    run_against_expert("causal-conv1d", CHECK, varlen, w)
