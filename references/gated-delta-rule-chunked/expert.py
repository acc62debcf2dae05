"""Expert Triton kernels for T24 ``gated-delta-rule-chunked``: WY representation, chunk size 64.

Chunks never straddle sequences (each sequence is cut into its own chunks, the last one partial)
and are numbered sequence after sequence; programs find theirs by walking ``cu_seqlens`` on the
device. Three launches, split as in flash-linear-attention:

1. Fully parallel, per chunk: l2-normalizes q and k on load (and stores them for the later phases),
   computes Q·Kᵀ (stored once for the chunk, shared by the head's value heads) and K·Kᵀ, then for
   each value head: the gate cumsum Γ in fp32 (stored), the decayed, β-scaled strictly lower matrix
   A, its unit-lower-triangular inverse T = (I + A)⁻¹ by blocked forward substitution (16 x 16
   diagonal blocks by the terminating Neumann product (I - A)(I + A²)(I + A⁴)(I + A⁸), off-diagonal
   blocks by small products), and the WY matrices W = T (β e^Γ K) and U = T (β V), written as bf16
   scratch. Four routes do this, and a shape's first call on the GPU times them (and the later
   phases, reported in ``TIMED_CHOICES``): ``_gdr_wy_fwd_kernel``, one program per (chunk, q/k
   head) for all of its value heads, with K·Kᵀ, W and U as 16-row products;
   ``_gdr_wy64_fwd_kernel``, one program per (chunk, value head), which forms K·Kᵀ, W and U as
   64-row products and passes K·Kᵀ's and T's blocks through its own slot of a scratch buffer; and
   the split route, the same work in two launches: ``_gdr_t_fwd_kernel`` forms T and stores it
   (fp32, 16 KB a chunk and value head), then ``_gdr_wu_fwd_kernel`` streams W and U from it (one
   program per chunk and value head for both, so T is loaded once). The first kernel compiles to
   255 registers with spills on sm_90 (small products with many warps hold whole operands in every
   warp), the second to 168 with none (128 with spills when capped, which the H100 picked), the
   split's two to 134 (126 capped, no spills) and 64-68: phase 1 was latency-bound, and T's chain of
   small products alone, in fewer registers, lets two programs share an SM without spilling. The
   three-launch route goes further and gives the chain a program of its own size:
   ``_gdr_qkk_fwd_kernel`` (8 warps, one program per chunk and q/k head) forms the normalized rows,
   Q·Kᵀ and K̂·K̂ᵀ (fp32, stored: each once for the head's value heads, where the other routes form
   K̂·K̂ᵀ per value head); ``_gdr_inv_fwd_kernel`` forms T from it in one or two warps a program,
   loading each 16 x 16 block where it is used and storing each block of T once final, so that it
   holds 218 registers a thread with one warp (138 with two) and eight or more programs share an
   SM, each hiding the others' waits along their chains; then ``_gdr_wu_fwd_kernel`` as in the
   split route. On the H100 (session 23) it took phase 1 from 1,546 to 1,219 µs at W1's shape and
   from 3,036 to 2,385 at W3's, with the one-warp inverse (docs/results/h100.md).
2. ``_gdr_state_fwd_kernel``, one program per (sequence, value head, slice of V): the only serial
   part. It carries its K x V slice of the fp32 state on-chip across the sequence's chunks. Per
   chunk it stores the state the chunk starts from (bf16), forms Ṽ = U - W S (stored), and sets
   S <- e^{Γ_end} S + K̂ᵀ (Ṽ ⊙ e^{Γ_end - Γ}), with K̂ the keys as phase 1 stored them
   normalized: no row reduction in the chain, and the decay on the narrow Ṽ slice. Columns of S
   evolve independently, so splitting V across programs keeps the SMs busy even for a single long
   sequence. Nothing in a step waits on the output. On the GPU the tuner picks per shape between
   a pipelined loop (the loads of W, U and K̂ a chunk ahead, more shared memory) and a plain one
   (fewer resources a program, more programs an SM).
3. ``_gdr_out_fwd_kernel``, one program per (chunk, value head, slice of V), all in parallel: the
   output scale·((Q ⊙ e^Γ) S + (QKᵀ ⊙ e^{Γ_i - Γ_j}, causal) Ṽ), written once, from the stored
   state and Ṽ. The first H100 measurement (docs/results/h100.md) had the output inside the serial
   loop. That is the same arithmetic on the same bf16 operands (the interpreter gives identical
   bits), but it made every one of W3's 1,024 steps pay for the output's loads and products. The
   split costs a K x V state per chunk and value head, written once and read once (about 1 GB at
   W3).

Every grid is flat, with the programs that read the same tiles side by side: a chunk's V slices, a
head's value heads (``_flat_ids``). With the chunk or sequence fastest, as in a 3-D grid, they ran
a wave apart whenever the grid outgrew the card, and each re-read its tiles from DRAM: the serial
kernel moved 2.7 GB a call at W1's shape for 1.5 GB of distinct data, and the whole task ran 1.33x
slower at W1 (docs/results/h100.md, session 20).

Decays are only ever exponentials of differences of the chunk-local cumsum (never positive: the
upper triangle is masked before exponentiating).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

CHUNK = 64
LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _flat_ids(NA, NB):
    """(a, b, c) of a flat grid of NA x NB x NC programs, a varying fastest, then b. The programs
    that read the same operands (a chunk's V slices, a head's value heads) are then launched side
    by side and run in the same wave, so the second and later reads of a tile come from L2: in a
    3-D grid with the chunk fastest they were a wave apart, and every V slice read W and the keys
    from DRAM again."""
    pid = tl.program_id(0)
    return pid % NA, (pid // NA) % NB, pid // (NA * NB)


@triton.jit
def _chunk_of(slot, cu_ptr, NSEQ: tl.constexpr, C: tl.constexpr):
    """(first token, length) of chunk ``slot``; length <= 0 for a surplus slot."""
    t0 = 0
    clen = 0
    acc = 0
    for s in tl.static_range(NSEQ):
        a = tl.load(cu_ptr + s)
        b = tl.load(cu_ptr + s + 1)
        nc = tl.cdiv(b - a, C)
        hit = (slot >= acc) & (slot < acc + nc)
        t0 = tl.where(hit, a + (slot - acc) * C, t0)
        clen = tl.where(hit, tl.minimum(b - (a + (slot - acc) * C), C), clen)
        acc += nc
    return t0, clen


@triton.jit
def _l2n(x):
    return x * (1.0 / tl.sqrt(tl.sum(x * x, axis=1) + 1e-6))[:, None]


@triton.jit
def _rows(ptr, t0, r0, clen, stride_t, col0, cols, ncols, BR: tl.constexpr):
    """Rows t0 + r0 .. + BR of a [tokens, ...] tensor at column offset col0, fp32, zero past clen."""
    r = r0 + tl.arange(0, BR)
    m = (r[:, None] < clen) & (cols[None, :] < ncols)
    return tl.load(ptr + (t0 + r).to(tl.int64)[:, None] * stride_t + col0 + cols[None, :], mask=m, other=0.0).to(tl.float32)


@triton.jit
def _vec(ptr, t0, r0, clen, stride_t, col, BR: tl.constexpr):
    r = r0 + tl.arange(0, BR)
    return tl.load(ptr + (t0 + r).to(tl.int64) * stride_t + col, mask=r < clen, other=0.0).to(tl.float32)


@triton.jit
def _inv_unit_lower(A, BR: tl.constexpr):
    """(I + A)⁻¹ for a strictly lower-triangular [BR, BR] fp32 A (BR <= 16).

    A is nilpotent (A^16 = 0), so the Neumann series terminates and factors exactly:
    (I + A)⁻¹ = (I - A)(I + A²)(I + A⁴)(I + A⁸): six small products instead of a BR-step
    substitution. Products in full fp32 (the entries of A are bounded by 1 in magnitude).
    """
    r = tl.arange(0, BR)
    eye = (r[:, None] == r[None, :]).to(tl.float32)
    a2 = tl.dot(A, A, input_precision="ieee")
    a4 = tl.dot(a2, a2, input_precision="ieee")
    a8 = tl.dot(a4, a4, input_precision="ieee")
    t = eye - A
    t = t + tl.dot(t, a2, input_precision="ieee")
    t = t + tl.dot(t, a4, input_precision="ieee")
    t = t + tl.dot(t, a8, input_precision="ieee")
    return t


@triton.jit
def _decayed(kk, b_i, g_i, g_j, DIAG: tl.constexpr, BR: tl.constexpr):
    """β_i (k_i·k_j) e^{Γ_i - Γ_j}, strictly lower on a diagonal block (masked before the exp)."""
    diff = g_i[:, None] - g_j[None, :]
    if DIAG:
        r = tl.arange(0, BR)
        diff = tl.where(r[:, None] > r[None, :], diff, float("-inf"))
    return b_i[:, None] * kk * tl.exp2(diff * LOG2E)


@triton.jit
def _store_rows(ptr, x, t0, r0, clen, stride_t, col0, cols, ncols, BR: tl.constexpr):
    r = r0 + tl.arange(0, BR)
    m = (r[:, None] < clen) & (cols[None, :] < ncols)
    tl.store(ptr + (t0 + r).to(tl.int64)[:, None] * stride_t + col0 + cols[None, :], x.to(ptr.dtype.element_ty), mask=m)


@triton.jit
def _kkt_blocks(k_ptr, t0, clen, sk, col0, ks, K):
    """K̂·K̂ᵀ of a chunk in 16 x 16 blocks (the lower ones), from the l2-normalized key rows."""
    k0 = _l2n(_rows(k_ptr, t0, 0, clen, sk, col0, ks, K, 16))
    k1 = _l2n(_rows(k_ptr, t0, 16, clen, sk, col0, ks, K, 16))
    k2 = _l2n(_rows(k_ptr, t0, 32, clen, sk, col0, ks, K, 16))
    k3 = _l2n(_rows(k_ptr, t0, 48, clen, sk, col0, ks, K, 16))
    return (tl.dot(k0, tl.trans(k0)), tl.dot(k1, tl.trans(k0)), tl.dot(k1, tl.trans(k1)),
            tl.dot(k2, tl.trans(k0)), tl.dot(k2, tl.trans(k1)), tl.dot(k2, tl.trans(k2)),
            tl.dot(k3, tl.trans(k0)), tl.dot(k3, tl.trans(k1)), tl.dot(k3, tl.trans(k2)), tl.dot(k3, tl.trans(k3)))


@triton.jit
def _gate_blocks(g_ptr, gam_ptr, t0, clen, HV, hv):
    """The gate cumsum Γ of a chunk per 16-row block, continued across blocks; stored for the later
    phases."""
    r16 = tl.arange(0, 16)
    g0 = tl.cumsum(_vec(g_ptr, t0, 0, clen, HV, hv, 16), axis=0)
    g1 = tl.cumsum(_vec(g_ptr, t0, 16, clen, HV, hv, 16), axis=0) + tl.sum(tl.where(r16 == 15, g0, 0.0), axis=0)
    g2 = tl.cumsum(_vec(g_ptr, t0, 32, clen, HV, hv, 16), axis=0) + tl.sum(tl.where(r16 == 15, g1, 0.0), axis=0)
    g3 = tl.cumsum(_vec(g_ptr, t0, 48, clen, HV, hv, 16), axis=0) + tl.sum(tl.where(r16 == 15, g2, 0.0), axis=0)
    tl.store(gam_ptr + (t0 + r16).to(tl.int64) * HV + hv, g0, mask=r16 < clen)
    tl.store(gam_ptr + (t0 + 16 + r16).to(tl.int64) * HV + hv, g1, mask=16 + r16 < clen)
    tl.store(gam_ptr + (t0 + 32 + r16).to(tl.int64) * HV + hv, g2, mask=32 + r16 < clen)
    tl.store(gam_ptr + (t0 + 48 + r16).to(tl.int64) * HV + hv, g3, mask=48 + r16 < clen)
    return g0, g1, g2, g3


@triton.jit
def _beta_blocks(beta_ptr, t0, clen, HV, hv):
    """β of a chunk per 16-row block."""
    return (_vec(beta_ptr, t0, 0, clen, HV, hv, 16), _vec(beta_ptr, t0, 16, clen, HV, hv, 16),
            _vec(beta_ptr, t0, 32, clen, HV, hv, 16), _vec(beta_ptr, t0, 48, clen, HV, hv, 16))


@triton.jit
def _inverse_blocks(kk00, kk10, kk11, kk20, kk21, kk22, kk30, kk31, kk32, kk33, b0, b1, b2, b3, g0, g1, g2, g3):
    """The lower 16 x 16 blocks of T = (I + A)⁻¹, A the decayed, β-scaled strictly lower K̂·K̂ᵀ:
    diagonal blocks inverted directly, the rest by block forward substitution."""
    t00 = _inv_unit_lower(_decayed(kk00, b0, g0, g0, True, 16), 16)
    t11 = _inv_unit_lower(_decayed(kk11, b1, g1, g1, True, 16), 16)
    t22 = _inv_unit_lower(_decayed(kk22, b2, g2, g2, True, 16), 16)
    t33 = _inv_unit_lower(_decayed(kk33, b3, g3, g3, True, 16), 16)
    a10 = _decayed(kk10, b1, g1, g0, False, 16)
    a20 = _decayed(kk20, b2, g2, g0, False, 16)
    a21 = _decayed(kk21, b2, g2, g1, False, 16)
    a30 = _decayed(kk30, b3, g3, g0, False, 16)
    a31 = _decayed(kk31, b3, g3, g1, False, 16)
    a32 = _decayed(kk32, b3, g3, g2, False, 16)
    t10 = -tl.dot(t11, tl.dot(a10, t00))
    t21 = -tl.dot(t22, tl.dot(a21, t11))
    t20 = -tl.dot(t22, tl.dot(a20, t00) + tl.dot(a21, t10))
    t32 = -tl.dot(t33, tl.dot(a32, t22))
    t31 = -tl.dot(t33, tl.dot(a31, t11) + tl.dot(a32, t21))
    t30 = -tl.dot(t33, tl.dot(a30, t00) + tl.dot(a31, t10) + tl.dot(a32, t20))
    return t00, t10, t11, t20, t21, t22, t30, t31, t32, t33


@triton.jit
def _qk_head(q_ptr, k_ptr, qk_ptr, qn_ptr, kn_ptr, slot, t0, clen, h, H, K, ks, C: tl.constexpr):
    """Per chunk and q/k head: the l2-normalized q and k rows, stored once for the later phases
    (the serial kernel's key operand and the output kernel's query operand then come straight from
    memory, with no row reduction inside the chain's steps), and Q·Kᵀ, decay-free (the output
    kernel applies decay and mask), shared by the head's value heads."""
    dtype = k_ptr.dtype.element_ty
    sk = H * K
    qn = _l2n(_rows(q_ptr, t0, 0, clen, sk, h * K, ks, K, C))
    kn = _l2n(_rows(k_ptr, t0, 0, clen, sk, h * K, ks, K, C))
    qk = tl.dot(qn.to(dtype), tl.trans(kn.to(dtype)))
    _store_rows(qn_ptr, qn, t0, 0, clen, sk, h * K, ks, K, C)
    _store_rows(kn_ptr, kn, t0, 0, clen, sk, h * K, ks, K, C)
    rc = tl.arange(0, C)
    tl.store(qk_ptr + (slot.to(tl.int64) * H + h) * C * C + rc[:, None] * C + rc[None, :], qk.to(qk_ptr.dtype.element_ty))


@triton.jit
def _gdr_wy_fwd_kernel(
    q_ptr, k_ptr, v_ptr, g_ptr, beta_ptr, qk_ptr, gam_ptr, w_ptr, u_ptr, qn_ptr, kn_ptr, cu_ptr,
    H, HV, K, V,
    NSEQ: tl.constexpr, C: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, REP: tl.constexpr,
):
    """Phase 1 in 16-row blocks, one program per (chunk, q/k head) for all of the head's value
    heads: K̂·K̂ᵀ once, then per value head T's blocks and W, U as sums of 16-row products."""
    slot = tl.program_id(0)
    h = tl.program_id(1)
    t0, clen = _chunk_of(slot, cu_ptr, NSEQ, C)
    if clen > 0:  # surplus slots (from the upper bound on the chunk count) do nothing
        ks = tl.arange(0, BK)
        vs = tl.arange(0, BV)
        sk = H * K  # token stride of q and k
        _qk_head(q_ptr, k_ptr, qk_ptr, qn_ptr, kn_ptr, slot, t0, clen, h, H, K, ks, C)
        # K·Kᵀ in 16 x 16 blocks (lower blocks only), shared by the value heads. The normalized
        # rows are dead once K·Kᵀ is formed: the W products below load and normalize them again
        # (from L2), which frees a 64 x 128 fp32 block of registers across the value-head loop
        # (sm_90 compile: spills 336 -> 140 B a thread; preflight-sm90.md).
        kk00, kk10, kk11, kk20, kk21, kk22, kk30, kk31, kk32, kk33 = _kkt_blocks(k_ptr, t0, clen, sk, h * K, ks, K)
        for rep in tl.static_range(REP):
            hv = h * REP + rep
            g0, g1, g2, g3 = _gate_blocks(g_ptr, gam_ptr, t0, clen, HV, hv)
            b0, b1, b2, b3 = _beta_blocks(beta_ptr, t0, clen, HV, hv)
            t00, t10, t11, t20, t21, t22, t30, t31, t32, t33 = _inverse_blocks(
                kk00, kk10, kk11, kk20, kk21, kk22, kk30, kk31, kk32, kk33, b0, b1, b2, b3, g0, g1, g2, g3)
            # W = T (β e^Γ K), U = T (β V).
            kb0 = (b0 * tl.exp2(g0 * LOG2E))[:, None] * _l2n(_rows(k_ptr, t0, 0, clen, sk, h * K, ks, K, 16))
            kb1 = (b1 * tl.exp2(g1 * LOG2E))[:, None] * _l2n(_rows(k_ptr, t0, 16, clen, sk, h * K, ks, K, 16))
            kb2 = (b2 * tl.exp2(g2 * LOG2E))[:, None] * _l2n(_rows(k_ptr, t0, 32, clen, sk, h * K, ks, K, 16))
            kb3 = (b3 * tl.exp2(g3 * LOG2E))[:, None] * _l2n(_rows(k_ptr, t0, 48, clen, sk, h * K, ks, K, 16))
            sw = HV * K
            _store_rows(w_ptr, tl.dot(t00, kb0), t0, 0, clen, sw, hv * K, ks, K, 16)
            _store_rows(w_ptr, tl.dot(t10, kb0) + tl.dot(t11, kb1), t0, 16, clen, sw, hv * K, ks, K, 16)
            _store_rows(w_ptr, tl.dot(t20, kb0) + tl.dot(t21, kb1) + tl.dot(t22, kb2), t0, 32, clen, sw, hv * K, ks, K, 16)
            _store_rows(w_ptr, tl.dot(t30, kb0) + tl.dot(t31, kb1) + tl.dot(t32, kb2) + tl.dot(t33, kb3), t0, 48, clen, sw, hv * K, ks, K, 16)
            sv = HV * V
            vb0 = b0[:, None] * _rows(v_ptr, t0, 0, clen, sv, hv * V, vs, V, 16)
            vb1 = b1[:, None] * _rows(v_ptr, t0, 16, clen, sv, hv * V, vs, V, 16)
            vb2 = b2[:, None] * _rows(v_ptr, t0, 32, clen, sv, hv * V, vs, V, 16)
            vb3 = b3[:, None] * _rows(v_ptr, t0, 48, clen, sv, hv * V, vs, V, 16)
            _store_rows(u_ptr, tl.dot(t00, vb0), t0, 0, clen, sv, hv * V, vs, V, 16)
            _store_rows(u_ptr, tl.dot(t10, vb0) + tl.dot(t11, vb1), t0, 16, clen, sv, hv * V, vs, V, 16)
            _store_rows(u_ptr, tl.dot(t20, vb0) + tl.dot(t21, vb1) + tl.dot(t22, vb2), t0, 32, clen, sv, hv * V, vs, V, 16)
            _store_rows(u_ptr, tl.dot(t30, vb0) + tl.dot(t31, vb1) + tl.dot(t32, vb2) + tl.dot(t33, vb3), t0, 48, clen, sv, hv * V, vs, V, 16)


@triton.jit
def _store_block(ptr, x, r0: tl.constexpr, c0: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, 16)
    tl.store(ptr + (r0 + r)[:, None] * C + c0 + r[None, :], x)


@triton.jit
def _load_block(ptr, r0: tl.constexpr, c0: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, 16)
    return tl.load(ptr + (r0 + r)[:, None] * C + c0 + r[None, :])


@triton.jit
def _wy64_t(k_ptr, g_ptr, beta_ptr, gam_ptr, tb, t0, clen, h, hv, H, HV, K, ks, C: tl.constexpr):
    """T's lower 16 x 16 blocks, written to the program's 64 x 64 tile ``tb``, and Γ stored. K̂·K̂ᵀ
    is formed as one 64-row product and put through the same tile to be read back in 16 x 16
    blocks: ten 16-row products would each need the whole 16 x K operands in every warp."""
    rc = tl.arange(0, C)
    kn = _l2n(_rows(k_ptr, t0, 0, clen, H * K, h * K, ks, K, C))
    tl.store(tb + rc[:, None] * C + rc[None, :], tl.dot(kn, tl.trans(kn)))
    tl.debug_barrier()  # what this program's threads wrote, visible to all of them
    kk00 = _load_block(tb, 0, 0, C)
    kk10 = _load_block(tb, 16, 0, C)
    kk11 = _load_block(tb, 16, 16, C)
    kk20 = _load_block(tb, 32, 0, C)
    kk21 = _load_block(tb, 32, 16, C)
    kk22 = _load_block(tb, 32, 32, C)
    kk30 = _load_block(tb, 48, 0, C)
    kk31 = _load_block(tb, 48, 16, C)
    kk32 = _load_block(tb, 48, 32, C)
    kk33 = _load_block(tb, 48, 48, C)
    g0, g1, g2, g3 = _gate_blocks(g_ptr, gam_ptr, t0, clen, HV, hv)
    b0, b1, b2, b3 = _beta_blocks(beta_ptr, t0, clen, HV, hv)
    t00, t10, t11, t20, t21, t22, t30, t31, t32, t33 = _inverse_blocks(
        kk00, kk10, kk11, kk20, kk21, kk22, kk30, kk31, kk32, kk33, b0, b1, b2, b3, g0, g1, g2, g3)
    tl.debug_barrier()  # every thread has read K̂·K̂ᵀ before T's blocks overwrite it
    _store_block(tb, t00, 0, 0, C)
    _store_block(tb, t10, 16, 0, C)
    _store_block(tb, t11, 16, 16, C)
    _store_block(tb, t20, 32, 0, C)
    _store_block(tb, t21, 32, 16, C)
    _store_block(tb, t22, 32, 32, C)
    _store_block(tb, t30, 48, 0, C)
    _store_block(tb, t31, 48, 16, C)
    _store_block(tb, t32, 48, 32, C)
    _store_block(tb, t33, 48, 48, C)


@triton.jit
def _wy64_wu(k_ptr, v_ptr, beta_ptr, gam_ptr, w_ptr, u_ptr, tb, t0, clen, h, hv, H, HV, K, V,
             C: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, KC: tl.constexpr,
             DO_W: tl.constexpr, DO_U: tl.constexpr):
    """W = T (β e^Γ K̂) and/or U = T (β V), each a 64-row product, from T's tile ``tb`` (its upper
    blocks are zero and never written: masked on load) and Γ as stored. The products go ``KC``
    columns at a time, so that no 64 x 128 operand and accumulator are live together."""
    rc = tl.arange(0, C)
    lower = (rc[:, None] // 16) >= (rc[None, :] // 16)
    t = tl.load(tb + rc[:, None] * C + rc[None, :], mask=lower, other=0.0)
    beta = _vec(beta_ptr, t0, 0, clen, HV, hv, C)
    if DO_W:
        # Row scales: β e^Γ and the key rows' inverse norms.
        ks = tl.arange(0, BK)
        gam = tl.load(gam_ptr + (t0 + rc).to(tl.int64) * HV + hv, mask=rc < clen, other=0.0)
        kr = _rows(k_ptr, t0, 0, clen, H * K, h * K, ks, K, C)
        kscale = beta * tl.exp2(gam * LOG2E) * (1.0 / tl.sqrt(tl.sum(kr * kr, axis=1) + 1e-6))
        for c in tl.static_range(BK // KC):
            cols = c * KC + tl.arange(0, KC)
            kb = kscale[:, None] * _rows(k_ptr, t0, 0, clen, H * K, h * K, cols, K, C)
            _store_rows(w_ptr, tl.dot(t, kb), t0, 0, clen, HV * K, hv * K, cols, K, C)
    if DO_U:
        for c in tl.static_range(BV // KC):
            cols = c * KC + tl.arange(0, KC)
            vb = beta[:, None] * _rows(v_ptr, t0, 0, clen, HV * V, hv * V, cols, V, C)
            _store_rows(u_ptr, tl.dot(t, vb), t0, 0, clen, HV * V, hv * V, cols, V, C)


@triton.jit
def _wy64_program_t(q_ptr, k_ptr, g_ptr, beta_ptr, qk_ptr, gam_ptr, qn_ptr, kn_ptr, t_ptr, slot, hv, t0, clen,
                    H, HV, K, C: tl.constexpr, BK: tl.constexpr, REP: tl.constexpr):
    """A (chunk, value head) program's T, in its slot of ``t_ptr`` (returned): for a head's first
    value head also the normalized rows and Q·Kᵀ."""
    h = hv // REP
    ks = tl.arange(0, BK)
    if hv % REP == 0:
        _qk_head(q_ptr, k_ptr, qk_ptr, qn_ptr, kn_ptr, slot, t0, clen, h, H, K, ks, C)
    tb = t_ptr + (slot.to(tl.int64) * HV + hv) * C * C
    _wy64_t(k_ptr, g_ptr, beta_ptr, gam_ptr, tb, t0, clen, h, hv, H, HV, K, ks, C)
    return tb


@triton.jit
def _gdr_wy64_fwd_kernel(
    q_ptr, k_ptr, v_ptr, g_ptr, beta_ptr, qk_ptr, gam_ptr, w_ptr, u_ptr, qn_ptr, kn_ptr, t_ptr, cu_ptr,
    H, HV, K, V,
    NSEQ: tl.constexpr, C: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, REP: tl.constexpr,
    KC: tl.constexpr,
):
    """Phase 1 with 64-row products, one program per (chunk, value head): T's 16 x 16 blocks as
    above, then T put together as one 64 x 64 tile through the program's own slot of a scratch
    buffer (written, a barrier, read back: it stays in cache), so that W = T (β e^Γ K̂) and
    U = T (β V) are each one 64-row product, which the tensor cores take whole, instead of ten
    16-row ones. More, smaller programs than the blocked kernel's: K̂·K̂ᵀ is formed per value head
    (a 64 x 64 x K product, cheap) and the head's first value head stores the normalized rows and
    Q·Kᵀ."""
    hv, _, slot = _flat_ids(HV, 1)  # a head's value heads side by side: they read the same keys
    t0, clen = _chunk_of(slot, cu_ptr, NSEQ, C)
    if clen > 0:
        tb = _wy64_program_t(q_ptr, k_ptr, g_ptr, beta_ptr, qk_ptr, gam_ptr, qn_ptr, kn_ptr, t_ptr, slot, hv,
                             t0, clen, H, HV, K, C, BK, REP)
        tl.debug_barrier()  # T's blocks, written by all of the program's threads, read whole below
        _wy64_wu(k_ptr, v_ptr, beta_ptr, gam_ptr, w_ptr, u_ptr, tb, t0, clen, hv // REP, hv, H, HV, K, V,
                 C, BK, BV, KC, True, True)


@triton.jit
def _gdr_t_fwd_kernel(
    q_ptr, k_ptr, g_ptr, beta_ptr, qk_ptr, gam_ptr, qn_ptr, kn_ptr, t_ptr, cu_ptr,
    H, HV, K,
    NSEQ: tl.constexpr, C: tl.constexpr, BK: tl.constexpr, REP: tl.constexpr,
):
    """The split route's first half, one program per (chunk, value head): T only (and Γ, and
    for a head's first value head the normalized rows and Q·Kᵀ), written to memory. Without the
    W and U products a program holds far fewer registers than the 64-row kernel's, so more of
    them share an SM to hide the latency of the inverse's chain of small products (the profile
    found phase 1 latency-bound: docs/results/h100-profiles.md)."""
    hv, _, slot = _flat_ids(HV, 1)  # a head's value heads side by side: they read the same keys
    t0, clen = _chunk_of(slot, cu_ptr, NSEQ, C)
    if clen > 0:
        _wy64_program_t(q_ptr, k_ptr, g_ptr, beta_ptr, qk_ptr, gam_ptr, qn_ptr, kn_ptr, t_ptr, slot, hv,
                        t0, clen, H, HV, K, C, BK, REP)


@triton.jit
def _gdr_wu_fwd_kernel(
    k_ptr, v_ptr, beta_ptr, gam_ptr, w_ptr, u_ptr, t_ptr, cu_ptr,
    H, HV, K, V,
    NSEQ: tl.constexpr, C: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, REP: tl.constexpr,
    KC: tl.constexpr,
):
    """The split routes' last launch, one program per (chunk, value head): W, then U, streaming
    64-row products from the stored T (fp32, as the 64-row kernel's tile, so every route computes
    the same products on the same operands). T is loaded once for both: with a program each for W
    and U, side by side, the second load came from L2 but the kernel took 608 µs at W1's shape on
    the H100 against 568 for this one (session 24)."""
    hv, _, slot = _flat_ids(HV, 1)
    t0, clen = _chunk_of(slot, cu_ptr, NSEQ, C)
    if clen > 0:
        tb = t_ptr + (slot.to(tl.int64) * HV + hv) * C * C
        _wy64_wu(k_ptr, v_ptr, beta_ptr, gam_ptr, w_ptr, u_ptr, tb, t0, clen, hv // REP, hv, H, HV, K, V,
                 C, BK, BV, KC, True, True)


@triton.jit
def _gdr_qkk_fwd_kernel(
    q_ptr, k_ptr, qk_ptr, kk_ptr, qn_ptr, kn_ptr, cu_ptr,
    H, K,
    NSEQ: tl.constexpr, C: tl.constexpr, BK: tl.constexpr,
):
    """The three-launch route's first launch, one program per (chunk, q/k head): the normalized q
    and k rows, Q·Kᵀ and K̂·K̂ᵀ (fp32, for the inverse), each formed once for the head's value
    heads. The products want a wide program; the inverse that follows does not."""
    h, _, slot = _flat_ids(H, 1)
    t0, clen = _chunk_of(slot, cu_ptr, NSEQ, C)
    if clen > 0:
        ks = tl.arange(0, BK)
        _qk_head(q_ptr, k_ptr, qk_ptr, qn_ptr, kn_ptr, slot, t0, clen, h, H, K, ks, C)
        rc = tl.arange(0, C)
        kn = _l2n(_rows(k_ptr, t0, 0, clen, H * K, h * K, ks, K, C))
        tl.store(kk_ptr + (slot.to(tl.int64) * H + h) * C * C + rc[:, None] * C + rc[None, :], tl.dot(kn, tl.trans(kn)))


@triton.jit
def _t_from_kkt_streamed(kb, tb, g_ptr, beta_ptr, gam_ptr, t0, clen, hv, HV, C: tl.constexpr):
    """T's lower 16 x 16 blocks from K̂·K̂ᵀ's at ``kb`` (a stored 64 x 64 tile), written to the tile
    ``tb``, and Γ stored: as ``_wy64_t`` does from its own tile, but each K̂·K̂ᵀ block is loaded where
    it is used (again where it is used twice) and each block of T stored once final, so that a
    narrow program holds T's blocks and little else."""
    g0, g1, g2, g3 = _gate_blocks(g_ptr, gam_ptr, t0, clen, HV, hv)
    b0, b1, b2, b3 = _beta_blocks(beta_ptr, t0, clen, HV, hv)
    t00 = _inv_unit_lower(_decayed(_load_block(kb, 0, 0, C), b0, g0, g0, True, 16), 16)
    _store_block(tb, t00, 0, 0, C)
    t11 = _inv_unit_lower(_decayed(_load_block(kb, 16, 16, C), b1, g1, g1, True, 16), 16)
    _store_block(tb, t11, 16, 16, C)
    t22 = _inv_unit_lower(_decayed(_load_block(kb, 32, 32, C), b2, g2, g2, True, 16), 16)
    _store_block(tb, t22, 32, 32, C)
    t33 = _inv_unit_lower(_decayed(_load_block(kb, 48, 48, C), b3, g3, g3, True, 16), 16)
    _store_block(tb, t33, 48, 48, C)
    t10 = -tl.dot(t11, tl.dot(_decayed(_load_block(kb, 16, 0, C), b1, g1, g0, False, 16), t00))
    _store_block(tb, t10, 16, 0, C)
    t21 = -tl.dot(t22, tl.dot(_decayed(_load_block(kb, 32, 16, C), b2, g2, g1, False, 16), t11))
    _store_block(tb, t21, 32, 16, C)
    t32 = -tl.dot(t33, tl.dot(_decayed(_load_block(kb, 48, 32, C), b3, g3, g2, False, 16), t22))
    _store_block(tb, t32, 48, 32, C)
    t20 = -tl.dot(t22, tl.dot(_decayed(_load_block(kb, 32, 0, C), b2, g2, g0, False, 16), t00)
                  + tl.dot(_decayed(_load_block(kb, 32, 16, C), b2, g2, g1, False, 16), t10))
    _store_block(tb, t20, 32, 0, C)
    t31 = -tl.dot(t33, tl.dot(_decayed(_load_block(kb, 48, 16, C), b3, g3, g1, False, 16), t11)
                  + tl.dot(_decayed(_load_block(kb, 48, 32, C), b3, g3, g2, False, 16), t21))
    _store_block(tb, t31, 48, 16, C)
    t30 = -tl.dot(t33, tl.dot(_decayed(_load_block(kb, 48, 0, C), b3, g3, g0, False, 16), t00)
                  + tl.dot(_decayed(_load_block(kb, 48, 16, C), b3, g3, g1, False, 16), t10)
                  + tl.dot(_decayed(_load_block(kb, 48, 32, C), b3, g3, g2, False, 16), t20))
    _store_block(tb, t30, 48, 0, C)


@triton.jit
def _gdr_inv_fwd_kernel(
    kk_ptr, g_ptr, beta_ptr, gam_ptr, t_ptr, cu_ptr,
    H, HV,
    NSEQ: tl.constexpr, C: tl.constexpr, REP: tl.constexpr,
):
    """The three-launch route's second launch, one program per (chunk, value head): Γ, then T from
    the stored K̂·K̂ᵀ. Its chain of 16 x 16 products is latency, not work: launched with one or two
    warps, a program is small enough that many share an SM and hide each other's waits, where the
    wide program that also forms the products fits two."""
    hv, _, slot = _flat_ids(HV, 1)
    t0, clen = _chunk_of(slot, cu_ptr, NSEQ, C)
    if clen > 0:
        kb = kk_ptr + (slot.to(tl.int64) * H + hv // REP) * C * C
        tb = t_ptr + (slot.to(tl.int64) * HV + hv) * C * C
        _t_from_kkt_streamed(kb, tb, g_ptr, beta_ptr, gam_ptr, t0, clen, hv, HV, C)


@triton.jit
def _gdr_state_step(S, c, a, e, base, hv, h, kn_ptr, gam_ptr, w_ptr, u_ptr, hs_ptr, vn_ptr, H, HV, K, V, ks, vs, km, vm,
                    st_mask, C: tl.constexpr):
    """One chunk of the serial kernel: store the state the chunk starts from, form and store
    Ṽ = U - W S, and return the state after the chunk,
    e^{Γ_end} S + K̂ᵀ (Ṽ ⊙ e^{Γ_end - Γ}). The per-row decay goes on Ṽ (C x BV values), not on
    the normalized keys K̂ (C x K), which the step loads as they were stored."""
    dtype = kn_ptr.dtype.element_ty
    rc = tl.arange(0, C)
    t0 = a + c * C
    clen = tl.minimum(e - t0, C)
    slot = base + c
    rm = rc < clen
    tok = (t0 + rc).to(tl.int64)
    Sd = S.to(dtype)
    tl.store(hs_ptr + ((slot.to(tl.int64) * HV + hv) * K + ks[:, None]) * V + vs[None, :], Sd, mask=st_mask)
    gam = tl.load(gam_ptr + tok * HV + hv, mask=rm, other=0.0)
    gam_end = tl.load(gam_ptr + (t0 + clen - 1).to(tl.int64) * HV + hv)
    w = tl.load(w_ptr + (tok[:, None] * HV + hv) * K + ks[None, :], mask=rm[:, None] & km[None, :], other=0.0)
    u = tl.load(u_ptr + (tok[:, None] * HV + hv) * V + vs[None, :], mask=rm[:, None] & vm[None, :], other=0.0)
    vn = u.to(tl.float32) - tl.dot(w, Sd)
    tl.store(vn_ptr + (tok[:, None] * HV + hv) * V + vs[None, :], vn.to(dtype), mask=rm[:, None] & vm[None, :])
    kn = tl.load(kn_ptr + tok[:, None] * (H * K) + h * K + ks[None, :], mask=rm[:, None] & km[None, :], other=0.0)
    vd = (vn * tl.where(rm, tl.exp2((gam_end - gam) * LOG2E), 0.0)[:, None]).to(dtype)
    S = S * tl.exp2(gam_end * LOG2E)
    return tl.dot(tl.trans(kn), vd, S)


@triton.jit
def _gdr_state_fwd_kernel(
    kn_ptr, gam_ptr, w_ptr, u_ptr, init_ptr, hs_ptr, vn_ptr, final_ptr, cu_ptr,
    H, HV, K, V,
    NSEQ: tl.constexpr, C: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, REP: tl.constexpr,
    HAS_INIT: tl.constexpr, HAS_FINAL: tl.constexpr, INTERPRET: tl.constexpr, STAGES: tl.constexpr,
):
    """The serial part, and nothing else: per chunk, store the state it starts from, form
    Ṽ = U - W S (stored), and carry S to the next chunk. The outputs are left to the parallel
    kernel below, so each step of this chain is two products and three loads that do not depend
    on S (the pipelined loop issues them a chunk ahead)."""
    vb, hv, n = _flat_ids(tl.cdiv(V, BV), HV)
    h = hv // REP
    a = tl.load(cu_ptr + n)
    e = tl.load(cu_ptr + n + 1)
    base = 0
    for s2 in tl.static_range(NSEQ):
        n2 = tl.cdiv(tl.load(cu_ptr + s2 + 1) - tl.load(cu_ptr + s2), C)
        base += tl.where(s2 < n, n2, 0)
    nck = tl.cdiv(e - a, C)
    ks = tl.arange(0, BK)
    vs = vb * BV + tl.arange(0, BV)
    km = ks < K
    vm = vs < V
    st_offs = ((n.to(tl.int64) * HV + hv) * K + ks[:, None]) * V + vs[None, :]
    st_mask = km[:, None] & vm[None, :]
    if HAS_INIT:  # noqa: SIM108 (a constexpr branch: no load at all without initial states)
        S = tl.load(init_ptr + st_offs, mask=st_mask, other=0.0)
    else:
        S = tl.zeros((BK, BV), dtype=tl.float32)
    if INTERPRET:
        # The interpreter cannot take a loop bound loaded from memory in range() (numpy >= 2
        # refuses int() of a one-element array); the compiled kernel takes the pipelined loop.
        c = 0
        while c < nck:
            S = _gdr_state_step(S, c, a, e, base, hv, h, kn_ptr, gam_ptr, w_ptr, u_ptr, hs_ptr, vn_ptr, H, HV, K, V,
                                ks, vs, km, vm, st_mask, C)
            c += 1
    else:
        for c in tl.range(0, nck, num_stages=STAGES):
            S = _gdr_state_step(S, c, a, e, base, hv, h, kn_ptr, gam_ptr, w_ptr, u_ptr, hs_ptr, vn_ptr, H, HV, K, V,
                                ks, vs, km, vm, st_mask, C)
    if HAS_FINAL:
        tl.store(final_ptr + st_offs, S, mask=st_mask)


#: GPU candidates for the serial kernel, timed by the autotuner per shape (sm_90 builds in
#: docs/results/preflight-sm90-table.md). Pipelined (2 stages), the step's W, U and normalized-key
#: tiles are copied into shared memory a chunk ahead: 74-82 KB, two or three programs per SM.
#: Unpipelined, the loads wait in each step, but the program needs 22-29 KB, so registers (136-178
#: a thread) decide how many share an SM. Which wins depends on how many programs the shape has
#: (W1: 1,024, W3: 256): on the H100 (session 20) unpipelined at W1 and W2, pipelined at W3.
_STATE_CONFIGS = [
    triton.Config({"STAGES": 2}, num_warps=4),
    triton.Config({"STAGES": 1}, num_warps=4),
    triton.Config({"STAGES": 2}, num_warps=8),
]
#: Every launch writes all of hs, Ṽ and the final states from the inputs alone, so the tuner's
#: trials need no restoring.
_gdr_state_fwd_tuned = triton.autotune(
    configs=_STATE_CONFIGS, key=["K", "V", "HV", "NSEQ", "BV", "HAS_INIT", "HAS_FINAL"],
)(_gdr_state_fwd_kernel)


@triton.jit
def _gdr_out_fwd_kernel(
    qn_ptr, qk_ptr, gam_ptr, hs_ptr, vn_ptr, o_ptr, cu_ptr,
    H, HV, K, V, scale,
    NSEQ: tl.constexpr, C: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, REP: tl.constexpr,
):
    """The outputs, one program per (chunk, value head, V slice), all in parallel:
    O = scale·((Q ⊙ e^Γ) S + (QKᵀ ⊙ e^{Γ_i - Γ_j}, causal) Ṽ), from the state the chunk starts
    with and the Ṽ the serial kernel stored."""
    vb, hv, slot = _flat_ids(tl.cdiv(V, BV), HV)
    t0, clen = _chunk_of(slot, cu_ptr, NSEQ, C)
    if clen > 0:  # surplus slots (from the upper bound on the chunk count) do nothing
        h = hv // REP
        dtype = qn_ptr.dtype.element_ty
        ks = tl.arange(0, BK)
        vs = vb * BV + tl.arange(0, BV)
        km = ks < K
        vm = vs < V
        rc = tl.arange(0, C)
        rm = rc < clen
        tok = (t0 + rc).to(tl.int64)
        gam = tl.load(gam_ptr + tok * HV + hv, mask=rm, other=0.0)
        Sd = tl.load(hs_ptr + ((slot.to(tl.int64) * HV + hv) * K + ks[:, None]) * V + vs[None, :],
                     mask=km[:, None] & vm[None, :], other=0.0)
        qn = tl.load(qn_ptr + tok[:, None] * (H * K) + h * K + ks[None, :], mask=rm[:, None] & km[None, :], other=0.0).to(tl.float32)
        acc = tl.dot((qn * (scale * tl.exp2(gam * LOG2E))[:, None]).to(dtype), Sd)
        qk = tl.load(qk_ptr + (slot.to(tl.int64) * H + h) * C * C + rc[:, None] * C + rc[None, :]).to(tl.float32)
        live = (rc[:, None] >= rc[None, :]) & rm[:, None] & rm[None, :]
        decay = tl.exp2(tl.where(live, gam[:, None] - gam[None, :], float("-inf")) * LOG2E)
        vnd = tl.load(vn_ptr + (tok[:, None] * HV + hv) * V + vs[None, :], mask=rm[:, None] & vm[None, :], other=0.0)
        acc = tl.dot((qk * decay * scale).to(dtype), vnd, acc)
        tl.store(o_ptr + (tok[:, None] * HV + hv) * V + vs[None, :], acc.to(o_ptr.dtype.element_ty), mask=rm[:, None] & vm[None, :])


#: Per (shape, device): the phase-1 kernel the first call timed fastest (a key of the routes in
#: ``_forward``).
_WY_PICK: dict[tuple, str] = {}
#: What the timed choice above picked, with the times that decided it and the other two phases'
#: times on that first call: the engine reports a module-level ``TIMED_CHOICES`` with each result
#: (docs/bundle-format.md), so a results page shows where a workload's time goes.
TIMED_CHOICES: dict[str, str] = {}


def _fastest(routes: dict, warmup: int = 5, restore=None) -> tuple:
    """(name, times in ms) of the fastest of ``routes`` (name -> launch): each route run once first
    (compiled and autotuned outside the timing), then timed in two passes, the second in the
    opposite order, each keeping its faster time. A single pass let one slow timing decide for the
    life of the process (an H100 once timed every route of a shape's first call 30-80% slow, and
    another run one route 70% slow; docs/results/h100.md, session 29). ``restore`` runs after
    each launch or timing of a route that changes an input in place."""
    from triton.testing import do_bench

    for run in routes.values():
        run()
        if restore is not None:
            restore()
    times: dict = {}
    for order in (list(routes), list(reversed(routes))):
        for name in order:
            ms = do_bench(routes[name], warmup=warmup, rep=30)
            if restore is not None:
                restore()
            times[name] = min(ms, times.get(name, ms))
    return min(times, key=times.get), times


def _time_phases(wy: dict, rest: dict, key: tuple) -> str:
    """Time each phase-1 kernel (``_fastest``) and each later phase once warmed (every launch
    writes its outputs from its inputs alone, so repeats need no restoring); remember the faster
    phase 1."""
    from triton.testing import do_bench

    _WY_PICK[key], times = _fastest(wy, warmup=3)
    for run in rest.values():
        run()
    after = {name: do_bench(run, warmup=3, rep=30) for name, run in rest.items()}
    words = ", ".join(f"{n} {ms * 1e3:.0f} us" for n, ms in times.items())
    then = ", ".join(f"{n} {ms * 1e3:.0f} us" for n, ms in after.items())
    TIMED_CHOICES["phase 1 T={} HV={} K={} V={} N={}".format(*key[:5])] = f"{_WY_PICK[key]} ({words}; then {then})"
    return _WY_PICK[key]


def gated_delta_rule_chunked(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
    initial_state: torch.Tensor, cu_seqlens: torch.Tensor, scale: float, varlen: int, n_final: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """q, k: [B, T, H, K]; v: [B, T, HV, V]; g fp32, beta: [B, T, HV]; initial_state: [NI, HV, K, V]
    fp32; cu_seqlens: [N+1] int32 over the B*T tokens. Returns (o [B, T, HV, V], final_state
    [n_final, HV, K, V] fp32)."""
    return _forward(q, k, v, g, beta, initial_state, cu_seqlens, scale, n_final, None)


def _forward(q, k, v, g, beta, initial_state, cu_seqlens, scale: float, n_final: int, wy: str | None):
    """The three phases; ``wy`` forces phase 1's route (a key of ``routes`` below) for tests, None
    lets the first call of a shape time them on the GPU (the interpreter takes "64-row")."""
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    NSEQ = cu_seqlens.numel() - 1
    for t in (q, k, v, g, beta):
        if not t.is_contiguous():
            raise ValueError("contiguous inputs expected")
    dev = q.device
    tokens = B * T
    n_slots = triton.cdiv(tokens, CHUNK) + NSEQ
    bk = max(16, triton.next_power_of_2(K))
    bv_full = max(16, triton.next_power_of_2(V))
    qk = torch.empty(n_slots, H, CHUNK, CHUNK, dtype=q.dtype, device=dev)
    gam = torch.empty(tokens, HV, dtype=torch.float32, device=dev)
    w = torch.empty(tokens, HV, K, dtype=q.dtype, device=dev)
    u = torch.empty(tokens, HV, V, dtype=q.dtype, device=dev)
    qn = torch.empty(tokens, H, K, dtype=q.dtype, device=dev)  # l2-normalized q and k
    kn = torch.empty(tokens, H, K, dtype=q.dtype, device=dev)
    wy_args = (q, k, v, g, beta, qk, gam, w, u, qn, kn)
    wy_meta = dict(NSEQ=NSEQ, C=CHUNK, BK=bk, BV=bv_full, REP=HV // H)

    def wy_blocks() -> None:
        _gdr_wy_fwd_kernel[(n_slots, H)](*wy_args, cu_seqlens, H, HV, K, V, **wy_meta, num_warps=8)

    def wy_64(**regs: int) -> None:
        tmat = torch.empty(n_slots, HV, CHUNK, CHUNK, dtype=torch.float32, device=dev)
        _gdr_wy64_fwd_kernel[(HV * n_slots,)](*wy_args, tmat, cu_seqlens, H, HV, K, V, **wy_meta,
                                            KC=min(64, bk, bv_full), num_warps=8, **regs)

    def wu_from(tmat: torch.Tensor) -> None:  # the split routes' last launch: W and U from the stored T
        # 32 columns a product: of the five W/U shapes timed as routes on an H100 (4 or 8 warps; 32,
        # 64 or 128 columns), this one won at both phase-1 shapes (session 25: 1,157 -> 1,101 us at
        # W1's, 2,270 -> 2,262 at W3's); 64-68 registers on sm_90, no spills.
        _gdr_wu_fwd_kernel[(HV * n_slots,)](k, v, beta, gam, w, u, tmat, cu_seqlens, H, HV, K, V, **wy_meta,
                                           KC=min(32, bk, bv_full), num_warps=4)

    def wy_split(**regs: int) -> None:
        tmat = torch.empty(n_slots, HV, CHUNK, CHUNK, dtype=torch.float32, device=dev)
        _gdr_t_fwd_kernel[(HV * n_slots,)](q, k, g, beta, qk, gam, qn, kn, tmat, cu_seqlens, H, HV, K,
                                         NSEQ=NSEQ, C=CHUNK, BK=bk, REP=HV // H, num_warps=8, **regs)
        wu_from(tmat)

    def wy_split3(inv_warps: int) -> None:
        kkt = torch.empty(n_slots, H, CHUNK, CHUNK, dtype=torch.float32, device=dev)
        tmat = torch.empty(n_slots, HV, CHUNK, CHUNK, dtype=torch.float32, device=dev)
        _gdr_qkk_fwd_kernel[(H * n_slots,)](q, k, qk, kkt, qn, kn, cu_seqlens, H, K, NSEQ=NSEQ, C=CHUNK, BK=bk,
                                           num_warps=8)
        _gdr_inv_fwd_kernel[(HV * n_slots,)](kkt, g, beta, gam, tmat, cu_seqlens, H, HV, NSEQ=NSEQ, C=CHUNK,
                                            REP=HV // H, num_warps=inv_warps)
        wu_from(tmat)

    # V slices per program: enough (sequence, value head, slice) programs to fill 132 SMs twice.
    bv = min(bv_full, 32)
    while bv > 16 and NSEQ * HV * triton.cdiv(V, bv) < 264:
        bv //= 2
    o = torch.empty(B, T, HV, V, dtype=q.dtype, device=dev)
    final = torch.empty(n_final, HV, K, V, dtype=torch.float32, device=dev)
    # The state each chunk starts from and Ṽ, handed from the serial kernel to the parallel one:
    # K·V and C·V values per chunk and value head, written once and read once.
    hs = torch.empty(n_slots, HV, K, V, dtype=q.dtype, device=dev)
    vn = torch.empty(tokens, HV, V, dtype=q.dtype, device=dev)
    state_args = (kn, gam, w, u, initial_state, hs, vn, final, cu_seqlens, H, HV, K, V)
    state_meta = dict(NSEQ=NSEQ, C=CHUNK, BK=bk, BV=bv, REP=HV // H,
                      HAS_INIT=initial_state.shape[0] > 0, HAS_FINAL=n_final > 0, INTERPRET=dev.type != "cuda")
    state_grid = (triton.cdiv(V, bv) * HV * NSEQ,)

    def state() -> None:
        if dev.type == "cuda":
            _gdr_state_fwd_tuned[state_grid](*state_args, **state_meta)
        else:  # the interpreter runs the while loop, one fixed shape
            _gdr_state_fwd_kernel[state_grid](*state_args, **state_meta, STAGES=1, num_warps=4)

    bvo = min(bv_full, 64)

    def out() -> None:
        _gdr_out_fwd_kernel[(triton.cdiv(V, bvo) * HV * n_slots,)](
            qn, qk, gam, hs, vn, o, cu_seqlens, H, HV, K, V, scale,
            NSEQ=NSEQ, C=CHUNK, BK=bk, BV=bvo, REP=HV // H, num_warps=4,
        )

    # The 64-row kernel compiles to 168 registers a thread on sm_90 with no spills: one 8-warp
    # program an SM. Capped at 128 it spills about 250 bytes a thread but two programs share an
    # SM (docs/results/preflight-sm90-table.md); which is faster is for the timing to say. That
    # capped build won on the H100 (session 19) with the phase still latency-bound, which is what
    # the split route is for: T's kernel alone needs 134 registers (so capped at 128 it spills
    # little), and W and U stream from the stored T at 64-68 registers, 4 warps. The three-launch
    # route moves the chain into programs of one or two warps, many an SM; it won at every shape
    # on the H100 (session 23).
    routes = {"blocks": wy_blocks, "64-row": wy_64, "64-row-128-regs": lambda: wy_64(maxnreg=128),
              "split": wy_split, "split-128-regs": lambda: wy_split(maxnreg=128),
              "3-launch-1-warp": lambda: wy_split3(1), "3-launch-2-warps": lambda: wy_split3(2)}
    if wy is None:
        key = (tokens, HV, K, V, NSEQ, H, initial_state.shape[0] > 0, n_final > 0, q.dtype, dev)
        if dev.type != "cuda":
            wy = "64-row"
        elif key in _WY_PICK:
            wy = _WY_PICK[key]
        else:
            wy = _time_phases(routes, {"state": state, "out": out}, key)
    routes[wy]()
    state()
    out()
    return o, final
