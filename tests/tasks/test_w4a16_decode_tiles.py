"""Every decode tile the w4a16-awq-gemm expert offers its GPU autotuner computes the same product.

On the GPU, decode sizes (M <= 128) pick among `_DECODE_CONFIGS`, and for M <= 64 also among the
transposed kernel's `_SWAPPED_CONFIGS` (the faster route on the first call); the interpreter's
expert runs take one fixed small tile and never reach them. Here the kernel runs in Triton's interpreter with
each candidate's (BN, BK), at BM = 16 and 32, split-K 1 and 2 (fp32 partials summed by the reduce
kernel, as on the GPU), on N not a multiple of the widest tile, against the fp32 reference.
"""

from __future__ import annotations

import pytest

from tests.tasks.expert_script import run_against_expert

pytestmark = pytest.mark.interpreter

CHECK = r'''
M, split = int(sys.argv[1]), int(sys.argv[2])
N, K, G = 200, 512, 128
inp = base.make_inputs({"M": M, "N": N, "K": K, "G": G, "dtype": "fp16"}, torch.Generator().manual_seed(M + split),
                       torch.device("cpu"))
x, qw, qz, sc = inp["x"], inp["qweight"], inp["qzeros"], inp["scales"]
ref = base.reference(**inp, group_size=G)
bm = 16 if M <= 16 else 32
for cfg in mod._DECODE_CONFIGS:
    bn, bk = cfg.kwargs["BN"], cfg.kwargs["BK"]
    target = torch.empty(split, M, N, dtype=torch.float32) if split > 1 else torch.empty(M, N, dtype=torch.float16)
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn), split)
    mod._awq_gemm_kernel[grid](x, qw, qz, sc, target, M, N, x.stride(0), qw.stride(0), qz.stride(0), sc.stride(0),
                               M * N, N, K_SPLIT=K // split, G=G, BM=bm, BN=bn, BK=bk, GROUP_M=8, FAST_CVT=True)
    out = target.sum(0) if split > 1 else target.float()
    err = (out - ref).abs().max().item() / ref.abs().max().item()
    assert err < 2e-3, (cfg.kwargs, err)
for cfg in mod._SWAPPED_CONFIGS:  # the transposed kernel: C^T = W^T X^T, one [BN, BM] tile a program
    bn, bk = cfg.kwargs["BN"], cfg.kwargs["BK"]
    target = torch.empty(split, M, N, dtype=torch.float32) if split > 1 else torch.empty(M, N, dtype=torch.float16)
    mod._awq_swapped_kernel[(triton.cdiv(N, bn), split)](
        x, qw, qz, sc, target, M, N, x.stride(0), qw.stride(0), qz.stride(0), sc.stride(0), M * N, N,
        K_SPLIT=K // split, G=G, BM=bm, BN=bn, BK=bk, FAST_CVT=True)
    out = target.sum(0) if split > 1 else target.float()
    err = (out - ref).abs().max().item() / ref.abs().max().item()
    assert err < 2e-3, ("swapped", cfg.kwargs, err)
print("ok")
'''


@pytest.mark.parametrize("m, split", [(5, 1), (16, 2), (29, 2)])
def test_every_decode_candidate_computes_the_product(m: int, split: int) -> None:
    run_against_expert("w4a16-awq-gemm", CHECK, m, split)
