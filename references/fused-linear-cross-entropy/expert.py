"""Expert Triton kernels for T21 ``fused-linear-cross-entropy``: token chunks, gradient in the same pass.

Liger's design, with every product in Triton. Tokens are processed in chunks; per chunk:

1. logits GEMM: z = x_c W^T into a reusable [chunk, V] scratch in the activation dtype (fp32
   accumulation on tensor cores);
2. softmax-gradient kernel, one program per token: an online max/sum sweep over the vocab gives
   logsumexp and the target logit (the loss term, added atomically), then a second sweep overwrites
   the scratch in place with dz = (softmax - onehot) / n_valid (zero for ignored tokens);
3. dX GEMM: dX_c = dz W, written once;
4. dW GEMM: dW += dz^T x_c, accumulated into the fp32 output inside the GEMM, whose accumulator
   starts from the stored tile (the beta = 1 form; the first chunk stores without reading).

The products fetch their operand tiles by TMA (host tensor descriptors, tile shapes set per
autotune candidate) when every operand row is 16-byte aligned, else by pointers. On Hopper each
product's first call also times a warp-specialized form written in Gluon (one producer warp issues
the TMA loads, the consumer warp groups only wait, multiply and store) and keeps the faster.
The full [BT, V] logits never exist: the only large buffers are the scratch and the fp32 dW output.
n_valid is counted on the device first, so no host sync is needed.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

IGNORE_INDEX = -100


#: The K tile of every GPU candidate below (EVEN_K is decided against it).
GEMM_BLOCK_K = 64


def _gemm_configs() -> list[triton.Config]:
    """Hopper bf16 tiles: wide 128x256 and square 128x128 warp-group tiles, 3-4 stages in 228 KB of
    shared memory; grouped ordering keeps a band of A rows and B columns resident in L2."""
    return [
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_warps=8, num_stages=4),
        triton.Config({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_warps=8, num_stages=3),
        # A deeper pipeline for the wide tile (192 KB): on the H200 these GEMMs ran at 87-94% of
        # the bf16 rate and torch.compile's extern GEMMs 4-10% faster (docs/results/h200.md).
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}, num_warps=8, num_stages=4),
        # One warp group on the square tile (half the registers a program: two programs an SM can
        # overlap one's epilogue with the other's main loop); the fastest tile of the same kind of
        # TMA GEMM in session 30's w4a16 probe on an H100 (scripts/w4a16_gemm_probe.py).
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_warps=4, num_stages=4),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_warps=4, num_stages=5),
    ]


@triton.jit
def _tile_of(tile, M, N, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr):
    """(row tile, column tile) of output tile ``tile``, in super-groups of GROUP_M row tiles so a
    band of A rows and B columns is reused from L2; every GEMM here orders its tiles this way (the
    Gluon kernel calls it too)."""
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    per_group = GROUP_M * num_n
    first_m = (tile // per_group) * GROUP_M
    rows_in_group = tl.minimum(num_m - first_m, GROUP_M)
    return first_m + (tile % per_group) % rows_in_group, (tile % per_group) // rows_in_group


@triton.jit
def _gemm_k_step(acc, a_ptrs, b_ptrs, kt, K, rk, stride_ak, stride_bk,
                 BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr, PRECISION: tl.constexpr):
    """acc += the kt-th BLOCK_K slice of A times that of B."""
    a_k = a_ptrs + kt * BLOCK_K * stride_ak
    b_k = b_ptrs + kt * BLOCK_K * stride_bk
    if EVEN_K:
        a = tl.load(a_k)
        b = tl.load(b_k)
    else:
        k_ok = rk < K - kt * BLOCK_K
        a = tl.load(a_k, mask=k_ok[None, :], other=0.0)
        b = tl.load(b_k, mask=k_ok[:, None], other=0.0)
    return tl.dot(a, b, acc, input_precision=PRECISION)


@triton.jit
def _gemm_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    A_KMAJOR: tl.constexpr, B_KMAJOR: tl.constexpr, ACCUMULATE: tl.constexpr, PRECISION: tl.constexpr,
    EVEN_K: tl.constexpr, INTERPRET: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    """C[M, N] (+)= A[M, K] B[K, N] with fp32 accumulation; A_KMAJOR/B_KMAJOR only key the tuning.

    EVEN_K (K a multiple of every candidate BLOCK_K) drops the K mask from the main loop.
    """
    pid_m, pid_n = _tile_of(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    # Rows past the edge read row 0 instead of being masked: their results are never stored.
    am = tl.where(rm < M, rm, 0).to(tl.int64)
    bn = tl.where(rn < N, rn, 0).to(tl.int64)
    a_ptrs = a_ptr + am[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + bn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    n_k = tl.cdiv(K, BLOCK_K)
    if INTERPRET:
        # The interpreter cannot take a runtime loop bound in range() (numpy >= 2 refuses int()
        # of a one-element array); the compiled kernel takes the pipelined for loop.
        kt = 0
        while kt < n_k:
            acc = _gemm_k_step(acc, a_ptrs, b_ptrs, kt, K, rk, stride_ak, stride_bk, BLOCK_K, EVEN_K, PRECISION)
            kt += 1
    else:
        for kt in range(n_k):
            acc = _gemm_k_step(acc, a_ptrs, b_ptrs, kt, K, rk, stride_ak, stride_bk, BLOCK_K, EVEN_K, PRECISION)
    rm64 = rm.to(tl.int64)
    rn64 = rn.to(tl.int64)
    c_ptrs = c_ptr + rm64[:, None] * stride_cm + rn64[None, :] * stride_cn
    c_mask = (rm < M)[:, None] & (rn < N)[None, :]
    if ACCUMULATE:
        acc += tl.load(c_ptrs, mask=c_mask, other=0.0)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


@triton.jit
def _gemm_tma_kernel(
    a_desc, b_desc, c_ptr, M, N, K, stride_cm, stride_cn,
    A_T: tl.constexpr, B_T: tl.constexpr, ACCUMULATE: tl.constexpr, PRECISION: tl.constexpr,
    INTERPRET: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    """C[M, N] (+)= A[M, K] B[K, N], operand tiles fetched by TMA (out-of-bounds rows read as zero).

    a_desc describes A's storage: [M, K], or [K, M] when A_T (A is a transposed view); b_desc
    describes [K, N], or [N, K] when B_T. The accumulator is stored (or accumulated) by pointers.
    """
    pid_m, pid_n = _tile_of(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    rm = off_m + tl.arange(0, BLOCK_M)
    rn = off_n + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + rm.to(tl.int64)[:, None] * stride_cm + rn.to(tl.int64)[None, :] * stride_cn
    c_mask = (rm < M)[:, None] & (rn < N)[None, :]
    # Accumulating, C is the accumulator's first value: loaded before the K loop, not added after
    # it, so the epilogue never holds C's tile beside the accumulator (at 128 x 256 that spilled
    # 196 B a thread on sm_90, docs/results/preflight-sm90-table.md).
    if ACCUMULATE:  # noqa: SIM108 - constexpr branches of a Triton kernel
        acc = tl.load(c_ptrs, mask=c_mask, other=0.0).to(tl.float32)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    n_k = tl.cdiv(K, BLOCK_K)
    if INTERPRET:
        kt = 0
        while kt < n_k:
            acc = _gemm_tma_step(acc, a_desc, b_desc, off_m, off_n, kt * BLOCK_K, A_T, B_T, PRECISION)
            kt += 1
    else:
        for kt in range(n_k):
            acc = _gemm_tma_step(acc, a_desc, b_desc, off_m, off_n, kt * BLOCK_K, A_T, B_T, PRECISION)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


@triton.jit
def _gemm_tma_step(acc, a_desc, b_desc, off_m, off_n, k0,
                   A_T: tl.constexpr, B_T: tl.constexpr, PRECISION: tl.constexpr):
    if A_T:  # noqa: SIM108 - constexpr branches of a Triton kernel
        a = a_desc.load([k0, off_m]).T
    else:
        a = a_desc.load([off_m, k0])
    if B_T:  # noqa: SIM108 - constexpr branches of a Triton kernel
        b = b_desc.load([off_n, k0]).T
    else:
        b = b_desc.load([k0, off_n])
    return tl.dot(a, b, acc, input_precision=PRECISION)


def _tma_block_shapes(nargs: dict) -> None:
    """Autotune pre-hook: the descriptors' tile shapes follow the candidate's BLOCK_M/N/K."""
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [bk, bm] if nargs["A_T"] else [bm, bk]
    nargs["b_desc"].block_shape = [bn, bk] if nargs["B_T"] else [bk, bn]


def _tma_configs() -> list[triton.Config]:
    return [triton.Config(c.kwargs, num_warps=c.num_warps, num_stages=c.num_stages, pre_hook=_tma_block_shapes)
            for c in _gemm_configs()]


#: ACCUMULATE is in the key: the dW product's accumulating calls share (M, N, K) with its first,
#: non-accumulating one, and the accumulating kernel holds C in its accumulator too (sm_90: only it
#: spills, 196 B a thread at 128 x 256; docs/results/preflight-sm90.md), so it is tuned on its own.
_gemm_tma_tuned = triton.autotune(configs=_tma_configs(), key=["M", "N", "K", "A_T", "B_T", "ACCUMULATE"],
                                  restore_value=["c_ptr"])(_gemm_tma_kernel)
#: Set when a TMA launch fails on this device; every later product takes the pointer kernel.
_TMA_BROKEN: list[bool] = []


def _tma_ok(*ts: torch.Tensor) -> bool:
    """Every operand's storage is 2-D with one unit stride and 16-byte aligned rows and base."""
    for t in ts:
        if t.stride(0) != 1 and t.stride(1) != 1:
            return False
        row = t.stride(0) if t.stride(1) == 1 else t.stride(1)
        if (row * t.element_size()) % 16 or t.data_ptr() % 16:
            return False
    return True


def _gemm_tma(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, accumulate: bool, interpret: bool = False,
              blocks: tuple[int, int, int] = (64, 64, 32)) -> None:
    """c (+)= a @ b with TMA operand loads (see _gemm_tma_kernel); a, b 2-D views with a unit stride."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    M, K = a.shape
    N = b.shape[1]
    a_t = a.stride(0) == 1 and a.stride(1) != 1
    b_t = b.stride(0) == 1 and b.stride(1) != 1
    bm, bn, bk = blocks
    a_desc = TensorDescriptor.from_tensor(a.t() if a_t else a, [bk, bm] if a_t else [bm, bk])
    b_desc = TensorDescriptor.from_tensor(b.t() if b_t else b, [bn, bk] if b_t else [bk, bn])
    flags = {"A_T": a_t, "B_T": b_t, "ACCUMULATE": accumulate,
             "PRECISION": "ieee" if a.dtype == torch.float32 else "tf32", "INTERPRET": interpret}

    def grid(meta: dict) -> tuple[int]:
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    args = (a_desc, b_desc, c, M, N, K, c.stride(0), c.stride(1))
    if interpret:
        _gemm_tma_kernel[grid](*args, **flags, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=4)
    else:
        _gemm_tma_tuned[grid](*args, **flags)


@gluon.jit
def _ws_load_partition(a_desc, b_desc, c_desc, a_bufs, b_bufs, c_smem, empty, ready, c_ready, c_free, M, N, K,
                       A_T: gl.constexpr, B_T: gl.constexpr, ACCUMULATE: gl.constexpr, BM: gl.constexpr,
                       BN: gl.constexpr, BK: gl.constexpr, GROUP_M: gl.constexpr, STAGES: gl.constexpr,
                       PROGRAMS: gl.constexpr):
    """The producer warp: for every K step of every tile, both operand tiles into a free stage;
    when accumulating, also C's tile into c_smem, once the consumers' last store has left it. C
    goes after the tile's first STAGES - 1 steps, so those are in flight during the previous
    tile's epilogue, which C's load has to wait for. Tiles past an edge of M, N or K read as zeros
    (TMA), so K needs no multiple of BK."""
    tiles = gl.cdiv(M, BM) * gl.cdiv(N, BN)
    n_k = gl.cdiv(K, BK)
    c_after = gl.minimum(STAGES - 2, n_k - 1)
    i = 0
    t = 0
    for tile in range(gl.program_id(0), tiles, PROGRAMS):
        pid_m, pid_n = _tile_of(tile, M, N, BM, BN, GROUP_M)
        for k in range(n_k):
            s = i % STAGES
            mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1)
            mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            if A_T:
                tma.async_copy_global_to_shared(a_desc, [k * BK, pid_m * BM], ready.index(s), a_bufs.index(s))
            else:
                tma.async_copy_global_to_shared(a_desc, [pid_m * BM, k * BK], ready.index(s), a_bufs.index(s))
            if B_T:
                tma.async_copy_global_to_shared(b_desc, [pid_n * BN, k * BK], ready.index(s), b_bufs.index(s))
            else:
                tma.async_copy_global_to_shared(b_desc, [k * BK, pid_n * BN], ready.index(s), b_bufs.index(s))
            if ACCUMULATE:  # noqa: SIM102 - a constexpr branch around a runtime one
                if k == c_after:
                    mbarrier.wait(c_free, (t & 1) ^ 1)  # a fresh barrier passes parity 1
                    mbarrier.expect(c_ready, c_desc.block_type.nbytes)
                    tma.async_copy_global_to_shared(c_desc, [pid_m * BM, pid_n * BN], c_ready, c_smem)
            i += 1
        t += 1  # noqa: SIM113 - Gluon loops have no enumerate


@gluon.jit
def _ws_mma_partition(a_desc, b_desc, c_desc, a_bufs, b_bufs, c_smem, empty, ready, c_ready, c_free, M, N, K,
                      A_T: gl.constexpr, B_T: gl.constexpr, ACCUMULATE: gl.constexpr, BM: gl.constexpr,
                      BN: gl.constexpr, BK: gl.constexpr, GROUP_M: gl.constexpr, STAGES: gl.constexpr,
                      PROGRAMS: gl.constexpr, num_warps: gl.constexpr):
    """The consumer warp groups: per K step, wait for the stage, wgmma from shared memory (a
    transposed operand as a permuted view of its buffer), release the previous step's stage once
    its wgmma has finished; per tile, the accumulator starts from C's tile when accumulating and
    leaves through c_smem by a TMA store."""
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, BN, 16])
    tiles = gl.cdiv(M, BM) * gl.cdiv(N, BN)
    i = 0
    t = 0
    for tile in range(gl.program_id(0), tiles, PROGRAMS):
        pid_m, pid_n = _tile_of(tile, M, N, BM, BN, GROUP_M)
        if ACCUMULATE:
            mbarrier.wait(c_ready, t & 1)
            acc = c_smem.load(mma)
        else:
            acc = gl.zeros([BM, BN], gl.float32, layout=mma)
        for k in range(gl.cdiv(K, BK)):
            s = i % STAGES
            mbarrier.wait(ready.index(s), (i // STAGES) & 1)
            if A_T:  # noqa: SIM108 - constexpr branches of a Gluon kernel
                a = a_bufs.index(s).permute((1, 0))
            else:
                a = a_bufs.index(s)
            if B_T:  # noqa: SIM108 - constexpr branches of a Gluon kernel
                b = b_bufs.index(s).permute((1, 0))
            else:
                b = b_bufs.index(s)
            acc = warpgroup_mma(a, b, acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc, a_bufs.index(s), b_bufs.index(s)))[0]
            mbarrier.arrive(empty.index((i + STAGES - 1) % STAGES), count=1, pred=k > 0)
            i += 1
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
        mbarrier.arrive(empty.index((i + STAGES - 1) % STAGES), count=1)
        if not ACCUMULATE:
            tma.store_wait(pendings=0)  # the last tile's store has left c_smem
        c_smem.store(acc.to(c_desc.dtype))
        fence_async_shared()
        tma.async_copy_shared_to_global(c_desc, [pid_m * BM, pid_n * BN], c_smem)
        if ACCUMULATE:  # the next tile's C may be loaded into c_smem once this store has read it
            tma.store_wait(pendings=0)
            mbarrier.arrive(c_free, count=1)
        t += 1  # noqa: SIM113 - Gluon loops have no enumerate
    tma.store_wait(pendings=0)


@gluon.jit
def _gemm_ws_kernel(a_desc, b_desc, c_desc, M, N, K, A_T: gl.constexpr, B_T: gl.constexpr,
                    ACCUMULATE: gl.constexpr, GROUP_M: gl.constexpr, STAGES: gl.constexpr,
                    PROGRAMS: gl.constexpr, num_warps: gl.constexpr):
    """C (+)= A @ B, persistent and warp-specialized (Hopper, Gluon): one producer warp issues
    every TMA load into a ring of STAGES operand buffers, and the kernel's num_warps warps (one or
    two warp groups) only wait, multiply and store. a_desc describes A's storage ([M, K], or
    [K, M] when A_T), b_desc B's ([K, N], or [N, K] when B_T); c_desc is C, in its own dtype."""
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    BK: gl.constexpr = a_desc.block_type.shape[0] if A_T else a_desc.block_type.shape[1]
    dtype: gl.constexpr = a_desc.dtype
    A0: gl.constexpr = a_desc.block_type.shape[0]
    A1: gl.constexpr = a_desc.block_type.shape[1]
    B0: gl.constexpr = b_desc.block_type.shape[0]
    B1: gl.constexpr = b_desc.block_type.shape[1]
    a_bufs = gl.allocate_shared_memory(dtype, [STAGES, A0, A1], a_desc.layout)
    b_bufs = gl.allocate_shared_memory(dtype, [STAGES, B0, B1], b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, [BM, BN], c_desc.layout)
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    c_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    c_free = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(empty.index(s), count=1)
        mbarrier.init(ready.index(s), count=1)
    mbarrier.init(c_ready, count=1)
    mbarrier.init(c_free, count=1)
    gl.warp_specialize([
        (_ws_mma_partition, (a_desc, b_desc, c_desc, a_bufs, b_bufs, c_smem, empty, ready, c_ready, c_free, M, N, K,
                             A_T, B_T, ACCUMULATE, BM, BN, BK, GROUP_M, STAGES, PROGRAMS, num_warps)),
        (_ws_load_partition, (a_desc, b_desc, c_desc, a_bufs, b_bufs, c_smem, empty, ready, c_ready, c_free, M, N,
                              K, A_T, B_T, ACCUMULATE, BM, BN, BK, GROUP_M, STAGES, PROGRAMS)),
    ], [1], [40])


#: The warp-specialized kernel's tiles: (BM, BN, BK, stages, warps). A 2-byte output fits 128 x 256
#: on two warp groups with 3 stages (144 KB of operands and a 64 KB output tile); an fp32 output
#: (the dW product) 128 x 128 with 4 stages (128 KB and 64 KB), on one warp group or two. On an H100
#: (session 31, docs/results/h100-runs/s31-ab-flce-ws-gemm.md) the first calls picked it, at 128 x
#: 256, for the logits product at every workload (2-3% faster than the Triton kernel) and once for
#: W3's first dW chunk; the Triton kernel kept dX and the accumulating dW products (1-12% faster).
WS_TILES_16 = {"ws-128x256": (128, 256, 64, 3, 8), "ws-128x128": (128, 128, 64, 5, 4)}
WS_TILES_32 = {"ws-128x128": (128, 128, 64, 4, 4), "ws-128x128-2wg": (128, 128, 64, 4, 8)}


def _gemm_ws(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, accumulate: bool, tile: str) -> None:
    """c (+)= a @ b by ``_gemm_ws_kernel`` with one of the tiles above (Hopper; TMA-fit operands)."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonDescriptor

    M, K = a.shape
    N = b.shape[1]
    bm, bn, bk, stages, warps = (WS_TILES_32 if c.dtype == torch.float32 else WS_TILES_16)[tile]
    a_t = a.stride(0) == 1 and a.stride(1) != 1
    b_t = b.stride(0) == 1 and b.stride(1) != 1
    ab = gl.bfloat16 if a.dtype == torch.bfloat16 else gl.float16
    cd = gl.float32 if c.dtype == torch.float32 else ab
    lay = gl.NVMMASharedLayout.get_default_for
    a_block = [bk, bm] if a_t else [bm, bk]
    b_block = [bn, bk] if b_t else [bk, bn]
    a_desc = GluonDescriptor.from_tensor(a.t() if a_t else a, a_block, lay(a_block, ab))
    b_desc = GluonDescriptor.from_tensor(b.t() if b_t else b, b_block, lay(b_block, ab))
    c_desc = GluonDescriptor.from_tensor(c, [bm, bn], lay([bm, bn], cd))
    programs = min(torch.cuda.get_device_properties(a.device).multi_processor_count,
                   triton.cdiv(M, bm) * triton.cdiv(N, bn))
    _gemm_ws_kernel[(programs,)](a_desc, b_desc, c_desc, M, N, K, A_T=a_t, B_T=b_t, ACCUMULATE=accumulate,
                                 GROUP_M=8, STAGES=stages, PROGRAMS=programs, num_warps=warps)


#: Per product (M, N, K, operand layouts, accumulation, dtypes): the form its first call timed
#: fastest, "triton-tma" or one of the warp-specialized tiles.
_ROUTE_PICK: dict[tuple, str] = {}
#: What the timed choices above picked, with the times that decided them (the engine reports a
#: module-level ``TIMED_CHOICES`` with each result, docs/bundle-format.md).
TIMED_CHOICES: dict[str, str] = {}


def _ws_ok(a: torch.Tensor, c: torch.Tensor) -> bool:
    """The warp-specialized kernel is built for Hopper (sm_90's wgmma) and 2-byte operands; the
    caller has checked that every operand, C included, fits TMA."""
    return (a.dtype in (torch.bfloat16, torch.float16) and c.dtype in (a.dtype, torch.float32)
            and triton.runtime.driver.active.get_current_target().arch == 90)


def _product(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, accumulate: bool):
    """The form of this product that its shape's first call timed fastest (each form warmed first,
    then timed twice in opposite orders, keeping its faster time); an accumulating product's C is
    restored after the timing, so the timed runs add nothing to it. A warp-specialized form that
    fails to build or launch is left out (and named in ``TIMED_CHOICES``) rather than taking the
    Triton TMA kernel down with it."""
    tiles = WS_TILES_32 if c.dtype == torch.float32 else WS_TILES_16
    routes = {"triton-tma": functools.partial(_gemm_tma, a, b, c, accumulate)}
    routes.update({t: functools.partial(_gemm_ws, a, b, c, accumulate, t) for t in tiles})
    M, K = a.shape
    key = (M, b.shape[1], K, a.stride(0) == 1, b.stride(0) == 1, accumulate, a.dtype, c.dtype)
    if key not in _ROUTE_PICK:
        from triton.testing import do_bench

        saved = c.clone() if accumulate else None
        failed = []
        for name, run in list(routes.items()):
            try:
                run()
            except Exception as exc:  # noqa: BLE001 - a form that cannot build or launch here is not timed
                if name == "triton-tma":
                    raise  # the caller falls back to the pointer kernel
                failed.append(f"{name} failed: {type(exc).__name__}")
                del routes[name]
        times: dict[str, float] = {}
        for order in (list(routes), list(reversed(routes))):
            for r in order:
                ms = do_bench(routes[r], warmup=5, rep=30)
                times[r] = min(ms, times.get(r, ms))
        if saved is not None:
            c.copy_(saved)
        _ROUTE_PICK[key] = pick = min(times, key=times.get)
        TIMED_CHOICES["product M={} N={} K={} A_T={} B_T={} accumulate={}".format(*key[:6])] = (
            f"{pick} (" + ", ".join([f"{n} {ms * 1e3:.0f} us" for n, ms in times.items()] + failed) + ")")
    return routes[_ROUTE_PICK[key]]


#: Autotuned once per (M, N, K, operand majorness, accumulation); restore_value keeps the accumulating dW GEMM
#: correct while candidates are benchmarked. The interpreter launches the plain kernel instead.
_gemm_tuned = triton.autotune(configs=_gemm_configs(), key=["M", "N", "K", "A_KMAJOR", "B_KMAJOR", "ACCUMULATE"],
                              restore_value=["c_ptr"])(_gemm_kernel)


def _gemm(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, accumulate: bool) -> None:
    """c (+)= a @ b for 2-D strided views (one of each operand's strides is 1)."""
    M, K = a.shape
    N = b.shape[1]

    def grid(meta: dict) -> tuple[int]:
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    args = (a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    on_gpu = a.device.type == "cuda"
    flags = {"A_KMAJOR": a.stride(1) == 1, "B_KMAJOR": b.stride(0) == 1, "ACCUMULATE": accumulate,
             "PRECISION": "ieee" if a.dtype == torch.float32 else "tf32",  # tf32 only matters for fp32
             "EVEN_K": K % (GEMM_BLOCK_K if on_gpu else 32) == 0, "INTERPRET": not on_gpu}
    if not _TMA_BROKEN and _tma_ok(a, b):
        if not on_gpu:  # the interpreter takes the TMA kernel too when rows are aligned (smoke S2)
            _gemm_tma(a, b, c, accumulate, interpret=True)
            return
        try:
            if _tma_ok(c) and _ws_ok(a, c):
                _product(a, b, c, accumulate)()
            else:
                _gemm_tma(a, b, c, accumulate)
            return
        except Exception:  # noqa: BLE001 - a device without usable TMA: pointer kernel from now on
            _TMA_BROKEN.append(True)
    if on_gpu:
        _gemm_tuned[grid](*args, **flags)
    else:  # the interpreter: one small tile shape
        _gemm_kernel[grid](*args, **flags, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=4)


@triton.jit
def _count_valid_kernel(tgt_ptr, n_ptr, BT: tl.constexpr, BLOCK: tl.constexpr, IGNORE: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.int32)
    for i in range(tl.cdiv(BT, BLOCK)):
        offs = i * BLOCK + tl.arange(0, BLOCK)
        t = tl.load(tgt_ptr + offs, mask=offs < BT, other=IGNORE)
        acc += (t != IGNORE).to(tl.int32)
    tl.store(n_ptr, tl.sum(acc, axis=0).to(tl.float32))


@triton.jit
def _ce_grad_kernel(z_ptr, tgt_ptr, n_ptr, loss_ptr, stride_z,
                    V: tl.constexpr, BLOCK_V: tl.constexpr, IGNORE: tl.constexpr):
    """One token row of the chunk: loss term and dz = (softmax - onehot) / n_valid, in place."""
    row = tl.program_id(0).to(tl.int64)
    z_row = z_ptr + row * stride_z
    y = tl.load(tgt_ptr + row)
    valid = y != IGNORE
    y_safe = tl.where(valid, y, 0)
    inv_n = 1.0 / tl.load(n_ptr)
    cols = tl.arange(0, BLOCK_V)
    # Sweep 1: per-lane running max and rescaled sum (one reduction at the end, not per tile).
    m_vec = tl.full((BLOCK_V,), -1e30, dtype=tl.float32)
    s_vec = tl.zeros((BLOCK_V,), dtype=tl.float32)
    for i in range(tl.cdiv(V, BLOCK_V)):
        offs = i * BLOCK_V + cols
        z = tl.load(z_row + offs, mask=offs < V, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m_vec, z)
        s_vec = s_vec * tl.exp(m_vec - m_new) + tl.exp(z - m_new)
        m_vec = m_new
    m = tl.max(m_vec, axis=0)
    lse = m + tl.log(tl.sum(s_vec * tl.exp(m_vec - m), axis=0))
    z_y = tl.load(z_row + y_safe).to(tl.float32)
    tl.atomic_add(loss_ptr, tl.where(valid, (lse - z_y) * inv_n, 0.0))
    # Sweep 2: overwrite the logits with their gradient (zero rows for ignored tokens).
    scale = tl.where(valid, inv_n, 0.0)
    for i in range(tl.cdiv(V, BLOCK_V)):
        offs = i * BLOCK_V + cols
        ok = offs < V
        z = tl.load(z_row + offs, mask=ok, other=0.0).to(tl.float32)
        g = tl.exp(z - lse) - tl.where(offs == y_safe, 1.0, 0.0)
        tl.store(z_row + offs, (g * scale).to(z_ptr.dtype.element_ty), mask=ok)


#: How large the [chunk, V] logits scratch may be, as a multiple of the fp32 dW [V, H] that the call
#: returns anyway: peak memory above the inputs is then at most dX plus twice dW.
SCRATCH_OVER_DW = 1
#: Chunks are never shorter than this many tokens (the dW product's reduction dimension: at 1K
#: tokens it does about 256 FLOP per byte of dW it reads and writes, near an H100's ridge point)
#: nor longer than the most (whatever H and V, the scratch stays at 8K rows of the vocabulary).
MIN_CHUNK, MAX_CHUNK = 1024, 8192


def _chunk_size(BT: int, H: int, itemsize: int, device: torch.device) -> int:
    """Tokens per chunk: as many as keep the scratch within ``SCRATCH_OVER_DW`` of dW's bytes.

    Longer chunks are faster because every chunk after the first reads the whole fp32 dW back in
    its product's epilogue, and that read is not hidden behind the product's tensor-core work: on
    an H100 (session 31's first-call picks) the accumulating dW product took 3.87 ms against 3.19
    ms for the same product writing dW fresh at H = 4096 (+0.69 ms, the 2.1 GB read at 3 TB/s),
    and 5.53 against 4.14 ms at H = 8192. Fixed chunks of 1-2K tokens paid that once or three
    times per call at every catalogue workload; tying the chunk to dW's size pays it only where
    the tokens outnumber twice the hidden size (W2, once)."""
    if device.type != "cuda":
        return 32  # the interpreter: several chunks, so the dW accumulation path is exercised
    by_memory = int(SCRATCH_OVER_DW * 4 * H) // itemsize  # chunk * V * itemsize <= ratio * V * H * 4
    return min(BT, MAX_CHUNK, max(MIN_CHUNK, by_memory))


def fused_linear_cross_entropy(
    x: torch.Tensor, W: torch.Tensor, targets: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x: [BT, H]; W: [V, H] (both contiguous); targets: [BT] int64 (-100 = ignore).

    Returns (loss fp32 scalar, dX [BT, H] in x's dtype, dW [V, H] fp32).
    """
    BT, H = x.shape
    V = W.shape[0]
    if W.shape[1] != H or targets.shape != (BT,):
        raise ValueError(f"bad shapes x={tuple(x.shape)} W={tuple(W.shape)} targets={tuple(targets.shape)}")
    if not (x.is_contiguous() and W.is_contiguous() and targets.is_contiguous()):
        raise ValueError("x, W and targets must be contiguous")
    dev = x.device
    loss = torch.zeros((), dtype=torch.float32, device=dev)
    n_valid = torch.empty(1, dtype=torch.float32, device=dev)
    dX = torch.empty_like(x)
    dW = torch.empty(V, H, dtype=torch.float32, device=dev)
    _count_valid_kernel[(1,)](targets, n_valid, BT=BT, BLOCK=1024, IGNORE=IGNORE_INDEX, num_warps=4)
    chunk = _chunk_size(BT, H, x.element_size(), dev)
    scratch = torch.empty(chunk, V, dtype=x.dtype, device=dev)
    block_v = min(2048, triton.next_power_of_2(V))
    for i, c0 in enumerate(range(0, BT, chunk)):
        c1 = min(BT, c0 + chunk)
        xc = x[c0:c1]
        z = scratch[: c1 - c0]
        _gemm(xc, W.t(), z, accumulate=False)  # z = x_c W^T
        _ce_grad_kernel[(c1 - c0,)](z, targets[c0:c1], n_valid, loss, z.stride(0),
                                    V=V, BLOCK_V=block_v, IGNORE=IGNORE_INDEX, num_warps=8)
        _gemm(z, W, dX[c0:c1], accumulate=False)  # dX_c = dz W
        _gemm(z.t(), xc, dW, accumulate=i > 0)  # dW (+)= dz^T x_c
    return loss, dX, dW
