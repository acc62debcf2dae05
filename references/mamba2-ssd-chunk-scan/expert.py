"""Expert Triton kernels for T25 ``mamba2-ssd-chunk-scan``: chunked state-space duality.

Chunks never straddle sequences: sequence s is cut into ceil(len_s / Q) chunks (the last may be
partial), numbered sequence after sequence; programs find their chunk by walking ``cu_seqlens`` on
the device. Five launches:

1. ``_ssd_dt_fwd_kernel`` (parallel over chunks x head blocks): Δ = softplus(dt + dt_bias) and the
   chunk-local cumulative sum of Δ·A, once per (token, head), in fp32.
2. ``_ssd_cb_fwd_kernel`` (parallel over chunks x groups x lower-triangle tiles): C·Bᵀ per group
   and chunk, shared by all heads of the group; upper tiles are causally dead and never computed.
3. ``_ssd_chunk_state_kernel`` (parallel over chunks x heads x P-blocks): what each chunk adds
   to the P x N state if it started from zero, sum_j exp(total - cumsum_j)·Δ_j·x_jᵀB_j,
   accumulated in fp32 and stored in the activations' dtype.
4. ``_ssd_state_pass_kernel`` (per sequence x head x small P-block, the only serial walk): the
   state each chunk starts from, state = exp(chunk total)·state + the chunk's own part, written
   in the activations' dtype; and the final states, in fp32.
5. ``_ssd_chunk_out_kernel`` (parallel over 64-token row blocks x chunks x heads): the output,
   i.e. the intra-chunk masked product of C·Bᵀ ⊙ decay ⊙ Δ with x on tensor cores, plus the inter-chunk
   term C·state scaled by exp(cumsum), plus D·x, gated by silu(z).

Until session 7 steps 3-5 were one kernel: one program per (sequence, head, P-block) walking
that sequence's chunks with the state in registers, so no chunk state went to memory. On the
H200 that was 5-10% of SOL, with 512-2,048 programs each serial over 8-32 chunks
(docs/results/h200.md). The split writes each chunk's state twice (its own part and its start
state, both 16-bit) and reads it twice, but only the small state walk is serial. The tensor-core
work runs over every chunk at once, as in the reference SSD implementation's chunk-state /
state-passing / chunk-scan split.

Steps 3 and 5 take flat grids in which the programs that read the same tiles are numbered side
by side (``_group_ids``): a head's row blocks, then the other heads of its group (which share
the chunk's B and C rows and C·Bᵀ tiles), then chunks. With the head as the slowest grid axis,
as until session 21, those readers were a whole pass over the chunks apart and read the tiles
from DRAM again; the flat order took W3 from 3.36 to 3.00 ms on an H100 in one run.

Step 5 treats the key blocks wholly left of a row block apart from the diagonal one: their decay
factors into a row part and a key part (``_ssd_out_below``), so they take one exponential per key
instead of one per element; 1.05-1.07x over the flat-grid version on an H100 in one run
(docs/results/h100.md, session 21).

Each chunk's own part of the state is stored in the activations' dtype, not fp32 (session 22): it
is written once and read once by the state walk, which adds it into its fp32 running state, so
the rounding is one per chunk and element and never compounds. At W3 that is 0.6 GB less traffic
(0.3 GB written, 0.3 GB read); 1.06-1.07x on an H100 in one run, with the final states at up
to 52% of their tolerance (26-39% with fp32 parts; docs/results/h100.md, session 22).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _chunk_of(slot, cu_ptr, S: tl.constexpr, Q: tl.constexpr):
    """(first token, length) of chunk ``slot``; length <= 0 for a surplus slot."""
    t0 = 0
    clen = 0
    acc = 0
    for s in tl.static_range(S):
        a = tl.load(cu_ptr + s)
        b = tl.load(cu_ptr + s + 1)
        nc = tl.cdiv(b - a, Q)
        hit = (slot >= acc) & (slot < acc + nc)
        t0 = tl.where(hit, a + (slot - acc) * Q, t0)
        clen = tl.where(hit, tl.minimum(b - (a + (slot - acc) * Q), Q), clen)
        acc += nc
    return t0, clen


@triton.jit
def _tri_tile(t):
    i = ((tl.sqrt(8.0 * t.to(tl.float32) + 1.0) - 1.0) * 0.5).to(tl.int32)
    i = tl.where((i + 1) * (i + 2) // 2 <= t, i + 1, i)
    i = tl.where(i * (i + 1) // 2 > t, i - 1, i)
    return i, t - i * (i + 1) // 2


@triton.jit
def _key_block(cum_ptr, delta_ptr, j, t0, clen, h, H, ar, BT: tl.constexpr):
    """Key block j of a chunk: (chunk rows, live mask, token ids, cumulative decay, Δ), zero past
    the chunk's end, so a dead key has neither input nor decay."""
    rj = j * BT + ar
    mj = rj < clen
    tok_j = (t0 + rj).to(tl.int64)
    cum_j = tl.load(cum_ptr + tok_j * H + h, mask=mj, other=0.0)
    dl_j = tl.load(delta_ptr + tok_j * H + h, mask=mj, other=0.0)
    return rj, mj, tok_j, cum_j, dl_j


@triton.jit
def _ssd_dt_fwd_kernel(
    dt_ptr, bias_ptr, a_ptr, delta_ptr, cum_ptr, cu_ptr, H,
    S: tl.constexpr, Q: tl.constexpr, BH: tl.constexpr,
):
    t0, clen = _chunk_of(tl.program_id(0), cu_ptr, S, Q)
    heads = tl.program_id(1) * BH + tl.arange(0, BH)
    rows = tl.arange(0, Q)
    hm = heads < H
    mask = (rows[:, None] < clen) & hm[None, :]
    offs = (t0 + rows).to(tl.int64)[:, None] * H + heads[None, :]
    dt = tl.load(dt_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    dt = dt + tl.load(bias_ptr + heads, mask=hm, other=0.0)[None, :]
    delta = tl.where(dt > 20.0, dt, tl.log(1.0 + tl.exp(dt)))
    delta = tl.where(mask, delta, 0.0)
    cum = tl.cumsum(delta * tl.load(a_ptr + heads, mask=hm, other=0.0)[None, :], axis=0)
    tl.store(delta_ptr + offs, delta, mask=mask)
    tl.store(cum_ptr + offs, cum, mask=mask)


@triton.jit
def _ssd_cb_fwd_kernel(
    b_ptr, c_ptr, cb_ptr, cu_ptr, G, N,
    S: tl.constexpr, Q: tl.constexpr, BT: tl.constexpr, BN: tl.constexpr,
):
    slot = tl.program_id(0)
    g = tl.program_id(1)
    ti, tj = _tri_tile(tl.program_id(2))
    t0, clen = _chunk_of(slot, cu_ptr, S, Q)
    ri = ti * BT + tl.arange(0, BT)
    rj = tj * BT + tl.arange(0, BT)
    ns = tl.arange(0, BN)
    nm = ns < N
    ci = tl.load(c_ptr + ((t0 + ri).to(tl.int64)[:, None] * G + g) * N + ns[None, :],
                 mask=(ri[:, None] < clen) & nm[None, :], other=0.0)
    bj = tl.load(b_ptr + ((t0 + rj).to(tl.int64)[:, None] * G + g) * N + ns[None, :],
                 mask=(rj[:, None] < clen) & nm[None, :], other=0.0)
    cb = tl.dot(ci, tl.trans(bj))
    base = cb_ptr + (slot.to(tl.int64) * G + g) * Q * Q
    tl.store(base + ri[:, None] * Q + rj[None, :], cb.to(cb_ptr.dtype.element_ty))


@triton.jit
def _group_ids(pid, n_slots, INNER: tl.constexpr, HPG: tl.constexpr):
    """Flat program id to (inner index, chunk slot, head): the inner index fastest, then the
    heads of one group, then chunks, then groups. The programs that read the same tiles (a
    chunk's B or C rows and C·Bᵀ blocks, shared by the group's heads; a head's state and x,
    shared by its row blocks) are launched side by side, so all but the first read hit L2."""
    inner = pid % INNER
    r = pid // INNER
    hg = r % HPG
    r = r // HPG
    slot = r % n_slots
    return inner, slot, (r // n_slots) * HPG + hg


@triton.jit
def _ssd_chunk_state_kernel(
    x_ptr, b_ptr, delta_ptr, cum_ptr, dst_ptr, cu_ptr, H, G, P, N, n_slots,
    S: tl.constexpr, Q: tl.constexpr, BT: tl.constexpr, BP: tl.constexpr, BN: tl.constexpr,
    NPB: tl.constexpr, HPG: tl.constexpr,
):
    """What one chunk adds to the state, as if it started from zero:
    sum_j exp(cum_end - cum_j) * delta_j * x_j^T B_j, a [P, N] block per (chunk, head), summed in
    fp32 and stored in the destination's dtype."""
    pb, slot, h = _group_ids(tl.program_id(0), n_slots, NPB, HPG)
    t0, clen = _chunk_of(slot, cu_ptr, S, Q)
    if clen <= 0:
        return  # a surplus slot: no state pass reads it
    g = h // HPG
    ps = pb * BP + tl.arange(0, BP)
    pm = ps < P
    ns = tl.arange(0, BN)
    nm = ns < N
    ar = tl.arange(0, BT)
    dtype = x_ptr.dtype.element_ty
    cum_end = tl.load(cum_ptr + (t0 + clen - 1).to(tl.int64) * H + h)
    acc = tl.zeros((BP, BN), dtype=tl.float32)
    for j in range(Q // BT):
        rj, mj, tok_j, cum_j, dl_j = _key_block(cum_ptr, delta_ptr, j, t0, clen, h, H, ar, BT)
        w = tl.exp2((cum_end - cum_j) * LOG2E) * dl_j
        xj = tl.load(x_ptr + (tok_j[:, None] * H + h) * P + ps[None, :], mask=mj[:, None] & pm[None, :], other=0.0)
        bj = tl.load(b_ptr + (tok_j[:, None] * G + g) * N + ns[None, :], mask=mj[:, None] & nm[None, :], other=0.0)
        acc = tl.dot(tl.trans((xj.to(tl.float32) * w[:, None]).to(dtype)), bj, acc)
    offs = ((slot.to(tl.int64) * H + h) * P + ps[:, None]) * N + ns[None, :]
    tl.store(dst_ptr + offs, acc, mask=pm[:, None] & nm[None, :])


@triton.jit
def _ssd_state_pass_kernel(
    dst_ptr, cum_ptr, init_ptr, sin_ptr, final_ptr, cu_ptr, H, P, N,
    S: tl.constexpr, Q: tl.constexpr, BP: tl.constexpr, BN: tl.constexpr,
):
    """The only sequential step: per (sequence, head, P-block), walk the chunks in order, record
    the state each chunk starts from (in the activations' dtype, which is what the output's
    C·state product reads) and advance it: state = exp(chunk total) · state + chunk's own part."""
    s = tl.program_id(0)
    h = tl.program_id(1)
    pb = tl.program_id(2)
    a = tl.load(cu_ptr + s)
    e = tl.load(cu_ptr + s + 1)
    base = 0
    for s2 in tl.static_range(S):
        n2 = tl.cdiv(tl.load(cu_ptr + s2 + 1) - tl.load(cu_ptr + s2), Q)
        base += tl.where(s2 < s, n2, 0)
    nck = tl.cdiv(e - a, Q)
    ps = pb * BP + tl.arange(0, BP)
    ns = tl.arange(0, BN)
    st_offs = ((s.to(tl.int64) * H + h) * P + ps[:, None]) * N + ns[None, :]
    st_mask = (ps < P)[:, None] & (ns < N)[None, :]
    state = tl.load(init_ptr + st_offs, mask=st_mask, other=0.0)
    c = 0
    while c < nck:
        t_end = tl.minimum(a + (c + 1) * Q, e) - 1
        offs = (((base + c).to(tl.int64) * H + h) * P + ps[:, None]) * N + ns[None, :]
        tl.store(sin_ptr + offs, state.to(sin_ptr.dtype.element_ty), mask=st_mask)
        own = tl.load(dst_ptr + offs, mask=st_mask, other=0.0)
        state = state * tl.exp2(tl.load(cum_ptr + t_end.to(tl.int64) * H + h) * LOG2E) + own
        c += 1
    tl.store(final_ptr + st_offs, state, mask=st_mask)


@triton.jit
def _ssd_out_diag(acc, cb_base, x_ptr, delta_ptr, cum_ptr, j, ri, mi, cum_i, t0, clen, h, H, P, ps, pm, ar,
                  Q: tl.constexpr, BT: tl.constexpr):
    """acc += (C·Bᵀ ⊙ decay ⊙ Δ)[i-block, j-block] · x[j-block] for the diagonal block (j = i):
    the causal mask and each element's own decay exponential, on tensor cores."""
    rj, mj, tok_j, cum_j, dl_j = _key_block(cum_ptr, delta_ptr, j, t0, clen, h, H, ar, BT)
    cb = tl.load(cb_base + ri[:, None] * Q + rj[None, :]).to(tl.float32)
    live = mi[:, None] & mj[None, :] & (ri[:, None] >= rj[None, :])
    # Mask before exponentiating: a positive exponent above the diagonal never overflows.
    decay = tl.exp2(tl.where(live, cum_i[:, None] - cum_j[None, :], float("-inf")) * LOG2E)
    m = cb * decay * dl_j[None, :]
    xj = tl.load(x_ptr + (tok_j[:, None] * H + h) * P + ps[None, :], mask=mj[:, None] & pm[None, :], other=0.0)
    return tl.dot(m.to(x_ptr.dtype.element_ty), xj, acc)


@triton.jit
def _ssd_out_below(acc, cb_base, x_ptr, delta_ptr, cum_ptr, j, ri, c0, t0, clen, h, H, P, ps, pm, ar,
                   Q: tl.constexpr, BT: tl.constexpr):
    """acc += (C·Bᵀ ⊙ exp(c0 - cum_j) ⊙ Δ_j)[i-block, j-block] · x[j-block] for a key block j
    wholly before the row block, whose first token's cumulative decay is c0.

    Below the diagonal no mask is needed, and the decay factors: exp(cum_i - cum_j) =
    exp(cum_i - c0) · exp(c0 - cum_j), the row factor the same for every such block (the caller
    applies it once to the sum) and the column factor one exponential per key. Both exponents are
    <= 0 because the cumulative sum of Δ·A only falls, so neither factor overflows, and a factor
    underflows only where the true decay is smaller still."""
    rj, mj, tok_j, cum_j, dl_j = _key_block(cum_ptr, delta_ptr, j, t0, clen, h, H, ar, BT)
    col = tl.exp2((c0 - cum_j) * LOG2E) * dl_j
    cb = tl.load(cb_base + ri[:, None] * Q + rj[None, :]).to(tl.float32)
    xj = tl.load(x_ptr + (tok_j[:, None] * H + h) * P + ps[None, :], mask=mj[:, None] & pm[None, :], other=0.0)
    return tl.dot((cb * col[None, :]).to(x_ptr.dtype.element_ty), xj, acc)


@triton.jit
def _ssd_chunk_out_kernel(
    x_ptr, z_ptr, c_ptr, d_ptr, delta_ptr, cum_ptr, cb_ptr, sin_ptr, out_ptr, cu_ptr,
    H, G, P, N, n_slots,
    S: tl.constexpr, Q: tl.constexpr, BT: tl.constexpr, BP: tl.constexpr, BN: tl.constexpr,
    NPB: tl.constexpr, HPG: tl.constexpr, INTERPRET: tl.constexpr,
):
    """One 64-token row block of one chunk's output, from the state the chunk starts with: the
    intra-chunk masked product of C·Bᵀ ⊙ decay ⊙ Δ with x over the blocks up to the diagonal, plus
    C·state scaled by exp(cumsum), plus D·x, gated by silu(z).

    Launch order (``_group_ids``): a head's row blocks side by side (they share its start state
    and x), then the other heads of the group (they share the chunk's C rows and C·Bᵀ tiles)."""
    nt: tl.constexpr = Q // BT
    inner, slot, h = _group_ids(tl.program_id(0), n_slots, nt * NPB, HPG)
    i = nt - 1 - inner % nt  # the longest rows (most blocks left of the diagonal) first
    pb = inner // nt
    t0, clen = _chunk_of(slot, cu_ptr, S, Q)
    ar = tl.arange(0, BT)
    ri = i * BT + ar
    mi = ri < clen
    if i * BT >= clen:
        return  # a surplus slot, or a row block past a short chunk's end
    g = h // HPG
    ps = pb * BP + tl.arange(0, BP)
    pm = ps < P
    ns = tl.arange(0, BN)
    nm = ns < N
    tok_i = (t0 + ri).to(tl.int64)
    cum_i = tl.load(cum_ptr + tok_i * H + h, mask=mi, other=0.0)
    st_in = tl.load(sin_ptr + ((slot.to(tl.int64) * H + h) * P + ps[:, None]) * N + ns[None, :],
                    mask=pm[:, None] & nm[None, :], other=0.0)
    ci = tl.load(c_ptr + (tok_i[:, None] * G + g) * N + ns[None, :], mask=mi[:, None] & nm[None, :], other=0.0)
    # Everything left of the diagonal block is summed relative to c0, the cumulative decay at the
    # block's first token, and scaled by the row factor exp(cum_i - c0) once (_ssd_out_below):
    # the inter-chunk term's exp(cum_i) is exp(c0) times that factor.
    c0 = tl.load(cum_ptr + (t0 + i * BT).to(tl.int64) * H + h)
    acc = tl.exp2(c0 * LOG2E) * tl.dot(ci, tl.trans(st_in))
    cb_base = cb_ptr + (slot.to(tl.int64) * G + g) * Q * Q
    if INTERPRET:
        # The interpreter cannot take a loop bound derived from program_id in range(); the
        # compiled kernel takes the pipelined loop.
        j = 0
        while j < i:
            acc = _ssd_out_below(acc, cb_base, x_ptr, delta_ptr, cum_ptr, j, ri, c0, t0, clen, h, H, P, ps, pm, ar,
                                 Q, BT)
            j += 1
    else:
        for j in range(0, i):
            acc = _ssd_out_below(acc, cb_base, x_ptr, delta_ptr, cum_ptr, j, ri, c0, t0, clen, h, H, P, ps, pm, ar,
                                 Q, BT)
    acc = acc * tl.where(mi, tl.exp2((cum_i - c0) * LOG2E), 0.0)[:, None]
    # The diagonal block: the causal mask and the decay elementwise.
    acc = _ssd_out_diag(acc, cb_base, x_ptr, delta_ptr, cum_ptr, i, ri, mi, cum_i, t0, clen, h, H, P, ps, pm, ar,
                        Q, BT)
    d_h = tl.load(d_ptr + h)
    io = (tok_i[:, None] * H + h) * P + ps[None, :]
    iom = mi[:, None] & pm[None, :]
    xi = tl.load(x_ptr + io, mask=iom, other=0.0).to(tl.float32)
    zi = tl.load(z_ptr + io, mask=iom, other=0.0).to(tl.float32)
    y = (acc + d_h * xi) * (zi / (1.0 + tl.exp2(-zi * LOG2E)))
    tl.store(out_ptr + io, y.to(out_ptr.dtype.element_ty), mask=iom)


#: GPU candidates for the output kernel, timed by the autotuner per shape: each program holds a
#: 64 x 64 fp32 accumulator and 64 x 64 score-side tiles, so 4 warps keep twice the registers a
#: thread that 8 warps do, and fewer of them fit an SM.
_OUT_CONFIGS = [triton.Config({}, num_warps=4, num_stages=2), triton.Config({}, num_warps=8, num_stages=2),
                triton.Config({}, num_warps=4, num_stages=3),
                triton.Config({}, num_warps=4, num_stages=2, maxnreg=168),
                triton.Config({}, num_warps=4, num_stages=2, maxnreg=128)]
#: Every launch writes its output from its inputs alone, so the tuner's trials need no restoring.
_ssd_chunk_out_tuned = triton.autotune(configs=_OUT_CONFIGS, key=["H", "G", "P", "N", "S", "Q", "n_slots"])(
    _ssd_chunk_out_kernel)


#: 64-token sub-blocks of the 256-token chunk feed 64 x 64 x {P, N} tensor-core products. The
#: chunk-state kernel has (chunks x heads) 8-warp programs, 5,400-18,400 at the catalogue's sizes;
#: the output kernel four times as many, its warps chosen by its autotuner.
BT, NUM_WARPS = 64, 8


#: What the first call of each shape measured, reported by the engine with each result
#: (``TIMED_CHOICES``, docs/bundle-format.md): the time of each of the five launches, so that a
#: results page says where a workload's time goes without a profile. Nothing is chosen by it.
TIMED_CHOICES: dict[str, str] = {}
#: The shapes whose launches were timed.
_TIMED: set[tuple] = set()


def _time_launches(launches: dict, key: tuple) -> None:
    """Time each launch once warmed; every launch writes its outputs from its inputs alone, so
    repeating one needs no restoring."""
    from triton.testing import do_bench

    times = {name: do_bench(run, warmup=3, rep=20) for name, run in launches.items()}
    TIMED_CHOICES["launch times T={} H={} P={} N={} S={}".format(*key[:5])] = ", ".join(
        f"{name} {ms * 1e3:.0f} us" for name, ms in times.items())


def mamba2_ssd_chunk_scan(
    x: torch.Tensor, dt: torch.Tensor, dt_bias: torch.Tensor, A: torch.Tensor, B_: torch.Tensor,
    C_: torch.Tensor, D: torch.Tensor, z: torch.Tensor, initial_states: torch.Tensor,
    cu_seqlens: torch.Tensor, chunk_size: int, varlen: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """x, z: [b, l, h, p]; dt: [b, l, h]; dt_bias, A, D: [h] fp32; B_, C_: [b, l, g, n];
    initial_states: [s, h, p, n] fp32; cu_seqlens: [s+1] int32 over the b*l tokens.

    Returns (out [b, l, h, p], final_states [s, h, p, n] fp32).
    """
    bsz, L, H, P = x.shape
    G, N = B_.shape[2], B_.shape[3]
    S = initial_states.shape[0]
    Q = chunk_size
    T = bsz * L
    dev = x.device
    for t in (x, dt, B_, C_, z, initial_states):
        if not t.is_contiguous():
            raise ValueError("contiguous inputs expected")
    bt = min(BT, Q)
    n_slots = triton.cdiv(T, Q) + S
    delta = torch.empty(T, H, dtype=torch.float32, device=dev)
    cum = torch.empty(T, H, dtype=torch.float32, device=dev)
    bh = 16
    cb = torch.empty(n_slots, G, Q, Q, dtype=x.dtype, device=dev)
    nt = Q // bt
    bn = max(16, triton.next_power_of_2(N))
    out = torch.empty_like(x)
    final = torch.empty(S, H, P, N, dtype=torch.float32, device=dev)
    bp = max(16, triton.next_power_of_2(P))
    npb = triton.cdiv(P, bp)
    # Each chunk's own part of the state, then the state each chunk starts from, both in x's dtype
    # (the state walk sums in fp32; the module docstring says what the 16-bit own part costs).
    own = torch.empty(n_slots, H, P, N, dtype=x.dtype, device=dev)
    start = torch.empty(n_slots, H, P, N, dtype=x.dtype, device=dev)
    bp_pass = min(bp, 16 if S * H >= 512 else 8)  # small blocks: more programs for the one serial walk

    def dt_cumsum() -> None:
        _ssd_dt_fwd_kernel[(n_slots, triton.cdiv(H, bh))](
            dt, dt_bias, A, delta, cum, cu_seqlens, H, S=S, Q=Q, BH=bh, num_warps=4,
        )

    def cb_tiles() -> None:
        _ssd_cb_fwd_kernel[(n_slots, G, nt * (nt + 1) // 2)](
            B_, C_, cb, cu_seqlens, G, N, S=S, Q=Q, BT=bt, BN=bn, num_warps=4,
        )

    def chunk_state() -> None:
        _ssd_chunk_state_kernel[(n_slots * H * npb,)](
            x, B_, delta, cum, own, cu_seqlens, H, G, P, N, n_slots, S=S, Q=Q, BT=bt, BP=bp, BN=bn, NPB=npb,
            HPG=H // G, num_warps=NUM_WARPS,
        )

    def state_pass() -> None:
        _ssd_state_pass_kernel[(S, H, triton.cdiv(P, bp_pass))](
            own, cum, initial_states, start, final, cu_seqlens, H, P, N, S=S, Q=Q, BP=bp_pass, BN=bn, num_warps=4,
        )

    def chunk_out() -> None:
        # One program per (64-token row block, chunk, head): session 18's profile of the earlier
        # one-program-per-chunk form (its four row blocks in a loop) had it at 1.09 of the 1.4 ms
        # of W1 on the H100, one 8-warp program an SM at 244 registers, each a serial chain of ten
        # tile products (docs/results/h100.md).
        grid = (nt * npb * n_slots * H,)
        args = (x, z, C_, D, delta, cum, cb, start, out, cu_seqlens, H, G, P, N, n_slots)
        meta = dict(S=S, Q=Q, BT=bt, BP=bp, BN=bn, NPB=npb, HPG=H // G)
        if dev.type == "cuda":
            _ssd_chunk_out_tuned[grid](*args, **meta, INTERPRET=False)
        else:
            _ssd_chunk_out_kernel[grid](*args, **meta, INTERPRET=True, num_warps=4)

    launches = {"dt": dt_cumsum, "cb": cb_tiles, "chunk-state": chunk_state, "state-pass": state_pass,
                "chunk-out": chunk_out}
    for run in launches.values():
        run()
    key = (T, H, P, N, S, G, Q, x.dtype, dev)
    if dev.type == "cuda" and key not in _TIMED:
        _TIMED.add(key)
        _time_launches(launches, key)
    return out, final
