"""The w4a16-awq-gemm expert's persistent TMA GEMM (the two-pass route's second kernel for
M > 128, ``_dense_gemm_persistent_kernel``) computes the product with every tile its GPU autotuner
may pick.

The interpreter's smoke runs take the pointer GEMM; here the persistent kernel runs in Triton's
interpreter with each candidate's (BM, BN, BK), on M and N that are not multiples of the tile
(the TMA loads read zeros past the edge and the TMA store clips), with fewer programs than tiles
so each program walks several, and as the whole two-pass route against the task's fp32 reference.
"""

from __future__ import annotations

import pytest

from tests.tasks.expert_script import run_against_expert

pytestmark = pytest.mark.interpreter

CHECK = r'''
from triton.tools.tensor_descriptor import TensorDescriptor
programs = int(sys.argv[1])
M, N, K = 300, 264, 256  # K a multiple of every candidate's K step, as the route guarantees (G % 128 == 0)
g = torch.Generator().manual_seed(programs)
x = torch.randn(M, K, generator=g).half()
w = torch.randn(K, N, generator=g).half()
ref = x.float() @ w.float()
for kw in [c.kwargs for c in mod._PERSISTENT_CONFIGS] + [{"BM": 128, "BN": 256, "BK": 64, "GROUP_M": 8,
                                                         "EPI_SPLIT": True}]:
    out = torch.full((M, N), float("nan"), dtype=torch.float16)
    xd = TensorDescriptor.from_tensor(x, [kw["BM"], kw["BK"]])
    wd = TensorDescriptor.from_tensor(w, [kw["BK"], kw["BN"]])
    cd = TensorDescriptor.from_tensor(out, [kw["BM"], kw["BN"] // 2 if kw.get("EPI_SPLIT") else kw["BN"]])
    mod._dense_gemm_persistent_kernel[(programs,)](xd, wd, cd, M, N, K=K, PROGRAMS=programs, INTERPRET=True, **kw)
    err = (out.float() - ref).abs().max().item() / ref.abs().max().item()
    assert err < 2e-3, (kw, err)
inp = base.make_inputs({"M": 144, "N": 72, "K": 256, "G": 128, "dtype": "fp16"}, g, torch.device("cpu"))
out = torch.empty(144, 72, dtype=torch.float16)
mod._two_pass(inp["x"], inp["qweight"], inp["qzeros"], inp["scales"], out, 128, True, on_cpu=True, gemm="persistent")
ref = base.reference(**inp, group_size=128)
err = (out.float() - ref).abs().max().item() / ref.abs().max().item()
assert err < 2e-3, ("two-pass persistent", err)
print("ok")
'''


@pytest.mark.parametrize("programs", [1, 3])
def test_every_persistent_candidate_computes_the_product(programs: int) -> None:
    run_against_expert("w4a16-awq-gemm", CHECK, programs)


FITS = r'''
from types import SimpleNamespace
import triton
hopper = SimpleNamespace(backend="cuda", arch=90)
ampere = SimpleNamespace(backend="cuda", arch=80)
x = torch.zeros(300, 4104, dtype=torch.float16)
for target, view, n, want in [
    (hopper, x[:, :4096], 4096, True),      # a row-strided view whose rows stay 16-byte aligned
    (hopper, x[:, :4096], 4100, False),     # N not a multiple of 8
    (hopper, x.view(-1)[8:8 + 300 * 4100].view(300, 4100)[:, :4096], 4096, False),  # rows of 8,200 bytes
    (hopper, x.float()[:, :4096], 4096, False),  # 4-byte activations
    (ampere, x[:, :4096], 4096, False),     # no TMA before sm_90
]:
    triton.runtime.driver.set_active(SimpleNamespace(get_current_target=lambda t=target: t))
    assert mod._persistent_fits(view, n) is want, (target, view.stride(), n, want)
print("ok")
'''


def test_the_persistent_route_is_offered_only_where_tma_can_run_it() -> None:
    run_against_expert("w4a16-awq-gemm", FITS)
