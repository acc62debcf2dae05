"""Expert Triton kernel for T22 ``topk-topp-sampling``: no row sort; rows fused, or split when few.

Per row:

1. Stream the row once for its max M and softmax normalizer Z (online, per lane).
2. Stream it again into a 256-bucket histogram of (A - logit) in steps of 1/8 (``tl.histogram``),
   below an anchor A; everything above A - 1/8 lands in the first bucket. From the counts alone
   this gives a safe lower bound L on the final threshold: with top-k on, the first
   bucket whose cumulative count reaches k (the whole top-k set lies above it); with top-p only,
   the first bucket below which an upper bound of the remaining mass (each token counted at its
   bucket's largest possible probability, never above M) is at most (1 - p) Z.
3. Stream it a third time (mostly from L2) and compact the (value, index) pairs above L, in index
   order, into a per-row scratch: typically a few hundred to a few thousand survivors.

The two histogram routes differ in the anchor. The three-pass route anchors at M, so passes 1 and 2 are
separate sweeps. The two-pass route anchors at the max of the row's first block, known before
the row is streamed, so the histogram is built in pass 1's sweep and the row is read twice, not
three times; the bound is as safe (the buckets still fall monotonically with the logit, and the
first bucket's tokens are bounded by M), only looser when many tokens lie above the first block's
max.

The sampled route builds no histogram at all. Triton lowers a 256-bucket histogram to warp
ballots: each token costs 9 ballots, 8 popcounts and about 27 logic ops in the sm_90 PTX, more
than the rest of the sweep. After pass 1 this route guesses the bound from 2,048 evenly spaced
tokens of the row: with top-k on, the sampled value at rank k / f with room for its spread; with
top-p only, where the sampled mass below, scaled up by f = V / 2,048, drops under 0.35 (1 - p) Z.
It compacts everything at or above the guess and keeps the guess only if the survivors prove it:
k or more of them, or mass at least p Z. A row the sample misjudges is redone from the
three-pass route's histogram by the program that found out, so a bad guess costs time, never a
token. On an H100 it took W3 (the fused kernel, top-k only) from 956 to 743 us in one
run. Which route is faster is timed per shape on the GPU.
4. On the survivors only: the exact k-th largest value by a 16-way search over the
   order-preserving integer image of the float bits (ties are kept because the test is >=), the top-k mass, then
   the exact top-p threshold by the same search driven by exp-mass sums, and finally the race
   argmax of logit - log q, reading the noise only at kept positions (about half the bytes).

Rows with both filters off skip straight to a single race pass over the row.

With enough rows (four or more per SM), one program does all of this for its row. With fewer, one
program per row leaves too few bytes in flight, so the three streaming passes are split: each row
is cut into slices, and passes 1-3 run as three launches over (row, slice). Pass 1 writes each
slice's (max, normalizer); pass 2 merges those and writes each slice's histogram; pass 3 sums the
histograms into the row's bound and compacts the slice's survivors into its own segment. A fourth
launch, one program per row, moves the segments together in order and runs step 4 as above. The
split path has the two histogram routes only: the sampled one lost there when timed (its looser
guess keeps more survivors, and the per-row launch pays for each; ``SPLIT_ROUTES``).
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _key(x):
    """Order-preserving int32 image of fp32 (for x != NaN; -0.0 sorts just below +0.0)."""
    b = x.to(tl.int32, bitcast=True)
    return b ^ ((b >> 31) & 0x7FFFFFFF)


@triton.jit
def _race_update(best, best_i, s, idx):
    """Fold a block's (score, index) into the running winner; equal scores keep the smaller index."""
    bm = tl.max(s, axis=0)
    bi = tl.min(tl.where(s == bm, idx, 2147483647), axis=0)
    better = (bm > best) | ((bm == best) & (bi < best_i))
    return tl.where(better, bm, best), tl.where(better, bi, best_i)


@triton.jit
def _first_block(row, offs, V, other, PREFETCH: tl.constexpr):
    """What a streaming pass holds before its first step: block 0 with PREFETCH, else nothing."""
    if PREFETCH:
        return tl.load(row + offs, mask=offs < V, other=other)
    return tl.full(offs.shape, other, tl.float32)


@triton.jit
def _stream(row, start, offs, V, other, held, BLOCK: tl.constexpr, PREFETCH: tl.constexpr):
    """(block at ``start``, what to hold for the next step). With PREFETCH the block was loaded a
    step ago (``held``) and the next one is requested now, before this one is used; without, the
    block is loaded now and nothing is held."""
    if PREFETCH:
        nxt = start + BLOCK + offs
        return held, tl.load(row + nxt, mask=nxt < V, other=other)
    return tl.load(row + start + offs, mask=start + offs < V, other=other), held


@triton.jit
def _bucket(a, x, NB: tl.constexpr, INV_W: tl.constexpr):
    """Histogram bucket of ``x`` below the anchor ``a``: 0 for anything above a - 1/INV_W (above
    ``a`` too), NB - 1 for the tail. Monotone in ``x``, which is what makes the bound safe."""
    return tl.minimum(tl.maximum((a - x) * INV_W, 0.0), NB - 1.0).to(tl.int32)


@triton.jit
def _anchor(lrow, offs, V):
    """The two-pass route's anchor: the max of the row's first block, read before the row is streamed."""
    return tl.max(tl.load(lrow + offs, mask=offs < V, other=-1e30), axis=0)


@triton.jit
def _slice_stats(lrow, lo, hi, a, offs, NSTEP: tl.constexpr, BLOCK: tl.constexpr, NB: tl.constexpr,
                 INV_W: tl.constexpr, PREFETCH: tl.constexpr, HIST: tl.constexpr):
    """Max and softmax normalizer of ``lrow[lo:hi]``, online per lane, and with HIST (the two-pass
    route) the histogram below the anchor ``a`` from the same read of each block (zeros without).
    With PREFETCH, every streaming pass requests the next block before it uses the current one
    (two in flight)."""
    m_vec = tl.full((BLOCK,), -1e30, tl.float32)
    z_vec = tl.zeros((BLOCK,), tl.float32)
    hist = tl.zeros((NB,), tl.int32)
    x_next = _first_block(lrow + lo, offs, hi - lo, -1e30, PREFETCH)
    for i in range(NSTEP):
        start = lo + i * BLOCK
        mask = start + offs < hi
        x, x_next = _stream(lrow, start, offs, hi, -1e30, x_next, BLOCK, PREFETCH)
        if HIST:
            hist += tl.histogram(_bucket(a, x, NB, INV_W), NB, mask=mask)
        m_new = tl.maximum(m_vec, x)
        z_vec = z_vec * tl.exp2((m_vec - m_new) * LOG2E) + tl.where(mask, tl.exp2((x - m_new) * LOG2E), 0.0)
        m_vec = m_new
    m = tl.max(m_vec, axis=0)
    return m, tl.sum(z_vec * tl.exp2((m_vec - m) * LOG2E), axis=0), hist


@triton.jit
def _slice_hist(lrow, lo, hi, a, offs, NSTEP: tl.constexpr, BLOCK: tl.constexpr, NB: tl.constexpr,
                INV_W: tl.constexpr, PREFETCH: tl.constexpr):
    """The three-pass route's second sweep: the histogram of ``lrow[lo:hi]`` below the anchor ``a``
    (there the row's max)."""
    hist = tl.zeros((NB,), tl.int32)
    x_next = _first_block(lrow + lo, offs, hi - lo, 0.0, PREFETCH)
    for i in range(NSTEP):
        start = lo + i * BLOCK
        x, x_next = _stream(lrow, start, offs, hi, 0.0, x_next, BLOCK, PREFETCH)
        hist += tl.histogram(_bucket(a, x, NB, INV_W), NB, mask=start + offs < hi)
    return hist


@triton.jit
def _slice_compact(lrow, lo, hi, a, jl, cbase_v, cbase_i, offs, NSTEP: tl.constexpr, BLOCK: tl.constexpr,
                   NB: tl.constexpr, INV_W: tl.constexpr, PREFETCH: tl.constexpr, BY_VALUE: tl.constexpr = False):
    """Write the (value, index) pairs of ``lrow[lo:hi]`` in bucket ``jl`` or above (buckets below
    the anchor ``a``), or with BY_VALUE those at or above the value ``a`` (the sampled route's
    bound; ``jl`` unused), in index order, from ``cbase_v``/``cbase_i`` on; returns how many."""
    n_c = 0
    x_next = _first_block(lrow + lo, offs, hi - lo, 0.0, PREFETCH)
    for i in range(NSTEP):
        start = lo + i * BLOCK
        x, x_next = _stream(lrow, start, offs, hi, 0.0, x_next, BLOCK, PREFETCH)
        if BY_VALUE:  # noqa: SIM108 (a constexpr branch)
            keep = x >= a
        else:
            keep = _bucket(a, x, NB, INV_W) <= jl
        sel = (start + offs < hi) & keep
        pos = n_c + tl.cumsum(sel.to(tl.int32), axis=0) - 1
        tl.store(cbase_v + pos, x, mask=sel)
        tl.store(cbase_i + pos, start + offs, mask=sel)
        n_c += tl.sum(sel.to(tl.int32), axis=0)
    return n_c


@triton.jit
def _race_row(lrow, qrow, offs, V, NSTEP: tl.constexpr, BLOCK: tl.constexpr, PREFETCH: tl.constexpr):
    """No filter at all: one race pass over the whole row."""
    best = float("-inf")
    best_i = 2147483647
    x_next = _first_block(lrow, offs, V, 0.0, PREFETCH)
    q_next = _first_block(qrow, offs, V, 1.0, PREFETCH)
    for i in range(NSTEP):
        start = i * BLOCK
        x, x_next = _stream(lrow, start, offs, V, 0.0, x_next, BLOCK, PREFETCH)
        qv, q_next = _stream(qrow, start, offs, V, 1.0, q_next, BLOCK, PREFETCH)
        s = tl.where(start + offs < V, x - tl.log(qv), float("-inf"))
        best, best_i = _race_update(best, best_i, s, start + offs)
    return best_i


@triton.jit
def _bound(hist, kk, pp, z, topk_on, d, NB: tl.constexpr, INV_W: tl.constexpr):
    """The histogram's safe lower bound on the final threshold, as a bucket index: with top-k on,
    the first bucket whose cumulative count reaches k; with top-p only, the first bucket below which
    an upper bound of the remaining mass is at most (1 - p) Z. ``d`` = M - A >= 0, the row's max
    above the histogram's anchor (0 on the three-pass route)."""
    j = tl.arange(0, NB)
    cum = tl.cumsum(hist, axis=0)
    jk = tl.min(tl.where(cum >= kk, j, NB - 1), axis=0)
    # Upper bound of each bucket's mass relative to M: its tokens at the bucket's top edge,
    # A - j / INV_W. (Not true of the first bucket, which reaches M, but a bucket's own bound
    # never enters its tail below.)
    ub = hist.to(tl.float32) * tl.exp2(-(j.to(tl.float32) / INV_W + d) * LOG2E)
    tail = tl.cumsum(ub, axis=0, reverse=True) - ub  # bound on the mass strictly below bucket j
    jp = tl.min(tl.where(tail <= (1.0 - pp) * z, j, NB - 1), axis=0)
    return tl.where(topk_on, jk, jp)


@triton.jit
def _sample_bound(lrow, V, m, z, kk, pp, topk_on, NS: tl.constexpr):
    """The sampled route's guess at a lower bound on the final threshold, from NS of the row's
    tokens (32 evenly spaced runs of adjacent tokens, so each run is a coalesced read). With top-k
    on: the sample's value at rank k / f plus two standard deviations and a margin (f = V / NS
    tokens per sampled one). With top-p only: the largest sampled value whose sampled mass below
    it, scaled by f, is at most 0.35 (1 - p) Z. Only a guess: the caller keeps it only if its
    survivors prove it (``_sampled_ok``), so a row the sample misjudges costs time, never a wrong
    token."""
    i = tl.arange(0, NS)
    NCH: tl.constexpr = 32
    CHUNK: tl.constexpr = NS // NCH
    if V <= NS:  # the whole row is the sample
        pos = i
        n = V
    else:
        pos = (i // CHUNK) * (V // NCH) + i % CHUNK
        n = NS
    f = V / n
    s = tl.sort(tl.load(lrow + pos, mask=pos < V, other=float("-inf")), descending=True)
    # Top-k: the bound's expected survivors in the sample, with room for its spread.
    r_f = kk.to(tl.float32) / f
    r = (r_f + 2.0 * tl.sqrt(r_f) + 3.0).to(tl.int32)
    b_k = tl.where(r <= n, tl.sum(tl.where(i == r - 1, s, 0.0), axis=0), float("-inf"))
    # Top-p: the sampled mass strictly below each sampled value (in sorted order), scaled to the row.
    w = tl.where(i < n, tl.exp2((s - m) * LOG2E), 0.0)
    below = (tl.cumsum(w, axis=0, reverse=True) - w) * f
    ip = tl.min(tl.where((below <= 0.35 * (1.0 - pp) * z) & (i < n), i, n - 1), axis=0)
    b_p = tl.sum(tl.where(i == ip, s, 0.0), axis=0)
    return tl.where(topk_on, b_k, b_p)


@triton.jit
def _sampled_ok(cbase_v, n_c, b, m, z, kk, pp, topk_on, CB: tl.constexpr):
    """Whether the ``n_c`` survivors at or above the guessed bound ``b`` hold everything the
    filters keep. With top-k on: k or more of them (so the k-th value is at or above ``b``, and
    top-p then works inside the top-k set). With top-p only: their mass reaches p Z, with a margin
    for fp32 rounding (then every token below ``b`` has at least p Z above it and is dropped)."""
    coffs = tl.arange(0, CB)
    n_mass = tl.where(topk_on, 0, n_c)  # the mass is summed only where top-p alone decides
    mass = 0.0
    c0 = 0
    while c0 < n_mass:
        cm = c0 + coffs < n_mass
        v = tl.load(cbase_v + c0 + coffs, mask=cm, other=float("-inf"))
        mass += tl.sum(tl.where(cm, tl.exp2((v - m) * LOG2E), 0.0), axis=0)
        c0 += CB
    return (b == float("-inf")) | tl.where(topk_on, n_c >= kk, mass >= pp * z * 1.001)


@triton.jit
def _hist_compact(lrow, V, m, z, kk, pp, topk_on, cbase_v, cbase_i, offs, NSTEP: tl.constexpr,
                  BLOCK: tl.constexpr, NB: tl.constexpr, INV_W: tl.constexpr):
    """The sampled route's fallback for a row its guess failed: the three-pass route's histogram
    below the row's max, its bound, and the compaction, over the whole row from one program.
    Returns the survivors' count. Without prefetching: the fallback is rare, and the registers a
    prefetching sweep would hold count against the whole kernel's occupancy."""
    hist = _slice_hist(lrow, 0, V, m, offs, NSTEP, BLOCK, NB, INV_W, False)
    jl = _bound(hist, kk, pp, z, topk_on, 0.0, NB, INV_W)
    return _slice_compact(lrow, 0, V, m, jl, cbase_v, cbase_i, offs, NSTEP, BLOCK, NB, INV_W, False)


@triton.jit
def _search(lo, hi, target, cbase_v, n_c, room, m, BY_MASS: tl.constexpr, ZK_FIRST: tl.constexpr, CB: tl.constexpr):
    """The largest integer key in [lo, hi) whose survivors at or above it reach ``target``: by
    count (the k-th value), or by exp-mass (the top-p threshold). With ``ZK_FIRST`` the target is
    ``target`` times the mass at or above ``lo`` (the top-k mass), summed in the first pass. A
    16-way search: each pass tests 16 thresholds at once, so about 8 passes instead of 32 halvings.

    The passes shrink. Only survivors inside the interval can still fall on either side of a
    threshold, so each pass from the second (from the first with ``ZK_FIRST``, whose interval
    already leaves out the survivors below the k-th value) also compacts the ones inside its
    interval into a work area after the survivors, and adds the count or mass of those above it to
    a constant. The next pass reads only the work area, compacted in place from then on (two
    barriers a chunk, as in the split pick's move). Where the survivors spread evenly over the
    keys a pass keeps about 1/17 of its elements, so a search reads the survivors about twice
    instead of eight times. A working set of one chunk is left where it is (its pass is one load
    either way), and with fewer than ``n_c`` free slots after the survivors (``room``: over half
    the row kept) every pass reads all of them, as before."""
    coffs = tl.arange(0, CB)
    frac = (tl.arange(0, 16) + 1).to(tl.int64)
    wbase = cbase_v + n_c
    off = 0  # the working set: the survivors (0), or the work area (n_c) once a pass wrote it
    n_src = n_c
    if BY_MASS:  # noqa: SIM108 (constexpr branches: the count search stays in int32, no exponentials)
        dropped = 0.0
    else:
        dropped = 0
    npass = 0
    tmul = target
    while hi - lo > 1:
        mids = lo + ((hi - lo) * frac) // 17
        write = ((npass > 0) | ZK_FIRST) & (n_src > CB) & ((off > 0) | (room >= n_c))
        if BY_MASS:
            acc = tl.zeros((16,), tl.float32)
            top = 0.0
            zsum = 0.0
        else:
            acc = tl.zeros((16,), tl.int32)
            top = 0
            zsum = 0
        n_w = 0
        c0 = 0
        while c0 < n_src:
            cm = c0 + coffs < n_src
            v = tl.load(cbase_v + off + c0 + coffs, mask=cm, other=float("-inf"))
            kv = _key(v).to(tl.int64)
            # Every element at or above a threshold counts, those above the interval too: the
            # same sums as over all survivors once ``dropped`` (the ones left behind) is added.
            above = kv[:, None] >= mids[None, :]
            if BY_MASS:
                ev = tl.where(cm, tl.exp2((v - m) * LOG2E), 0.0)
                acc += tl.sum(tl.where(above, ev[:, None], 0.0), axis=0)
                if ZK_FIRST:  # noqa: SIM102 (a constexpr branch around a runtime one)
                    if npass == 0:
                        zsum += tl.sum(tl.where(kv >= lo, ev, 0.0), axis=0)
            else:
                acc += tl.sum((above & cm[:, None]).to(tl.int32), axis=0)
            if write:
                inside = cm & (kv >= lo) & (kv < hi)
                if BY_MASS:
                    top += tl.sum(tl.where(kv >= hi, ev, 0.0), axis=0)
                else:
                    top += tl.sum((cm & (kv >= hi)).to(tl.int32), axis=0)
                pos = tl.cumsum(inside.to(tl.int32), axis=0) - 1
                tl.debug_barrier()
                tl.store(wbase + n_w + pos, v, mask=inside)
                tl.debug_barrier()
                n_w += tl.sum(inside.to(tl.int32), axis=0)
            c0 += CB
        if ZK_FIRST:  # noqa: SIM102 (a constexpr branch around a runtime one)
            if npass == 0:
                target = tmul * (dropped + zsum)
        ge = (acc + dropped) >= target
        if write:
            off = n_c
            n_src = n_w
            dropped += top
        lo = tl.maximum(lo, tl.max(tl.where(ge, mids, lo), axis=0))
        hi = tl.minimum(hi, tl.min(tl.where(ge, hi, mids), axis=0))
        npass += 1
    return lo


@triton.jit
def _pick(cbase_v, cbase_i, n_c, V, m, z, kk, pp, topk_on, topp_on, qrow, CB: tl.constexpr):
    """Step 4 on the ``n_c`` survivors at ``cbase_v``/``cbase_i`` (index order; the row's scratch
    holds V slots, the ones after the survivors the searches' work area): the exact k-th value,
    the top-k mass, the exact top-p threshold and the race. Returns (score, index)."""
    neg_inf = float("-inf")
    best = neg_inf
    best_i = 2147483647
    coffs = tl.arange(0, CB)
    # 4a. k-th largest value: the key search by count, from the smallest survivor up.
    hi = _key(m).to(tl.int64) + 1
    lo_f = float("inf")
    c0 = 0
    while c0 < n_c:
        cm = c0 + coffs < n_c
        lo_f = tl.minimum(lo_f, tl.min(tl.load(cbase_v + c0 + coffs, mask=cm, other=float("inf")), axis=0))
        c0 += CB
    lo = _key(lo_f).to(tl.int64)
    room = V - n_c
    if topk_on:
        lo = _search(lo, hi, kk, cbase_v, n_c, room, m, False, False, CB)
    tk = lo
    # 4b-c. top-p threshold: the largest key whose mass at or above it still reaches p * zk, where
    # zk is the top-k mass (summed in the search's first pass, which with top-k on also drops the
    # survivors below the k-th value) or, with top-k off, the whole row's normalizer.
    thr = tk
    if topp_on:
        if topk_on:
            thr = _search(tk, _key(m).to(tl.int64) + 1, pp, cbase_v, n_c, room, m, True, True, CB)
        else:
            thr = _search(tk, _key(m).to(tl.int64) + 1, pp * z, cbase_v, n_c, room, m, True, False, CB)
    # 4d. exponential race over the kept survivors; noise read only where kept.
    c0 = 0
    while c0 < n_c:
        cm = c0 + coffs < n_c
        v = tl.load(cbase_v + c0 + coffs, mask=cm, other=neg_inf)
        idx = tl.load(cbase_i + c0 + coffs, mask=cm, other=0)
        kept = cm & (_key(v).to(tl.int64) >= thr)
        qv = tl.load(qrow + idx, mask=kept, other=1.0)
        s = tl.where(kept, v - tl.log(qv), neg_inf)
        best, best_i = _race_update(best, best_i, s, idx)
        c0 += CB
    return best, best_i


#: The three routes (the ``ROUTE`` constexpr): where the bound on the threshold comes from. The
#: kernels compare ``ROUTE`` with these names; the host passes the values by route name.
THREE_PASS, TWO_PASS, SAMPLED = tl.constexpr(0), tl.constexpr(1), tl.constexpr(2)
ROUTES = {"three-pass": THREE_PASS.value, "two-pass": TWO_PASS.value, "sampled": SAMPLED.value}
#: The split path's routes. The sampled one was timed there too and lost at both split workloads
#: on an H100 (session 25, W1: 462-481 against 293 us, W2: 1,131-1,722 against 826 us): its
#: looser guess keeps two to three times the survivors, and the per-row pick, already the split
#: path's longest launch, pays for every one of them.
SPLIT_ROUTES = ("three-pass", "two-pass")
#: The sampled route's sample, in tokens: on the GPU 32 runs of 64; in the interpreter 32 runs of 8
#: (its sort of 2,048 values takes seconds a program there).
SAMPLE_N, SAMPLE_N_CPU = 2048, 256


@triton.jit
def _topk_topp_sample_fwd_kernel(
    logits_ptr, k_ptr, p_ptr, q_ptr, ids_ptr, cand_v_ptr, cand_i_ptr,
    stride_l, stride_q, B,  # B: rows, only for the autotuner's key (resident programs per SM)
    V: tl.constexpr, BLOCK: tl.constexpr, NB: tl.constexpr, INV_W: tl.constexpr, CB: tl.constexpr,
    PREFETCH: tl.constexpr, ROUTE: tl.constexpr, NS: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    kk = tl.load(k_ptr + row)
    pp = tl.load(p_ptr + row)
    lrow = logits_ptr + row * stride_l
    qrow = q_ptr + row * stride_q
    offs = tl.arange(0, BLOCK)
    topk_on = kk < V
    topp_on = pp < 1.0
    NSTEP: tl.constexpr = (V + BLOCK - 1) // BLOCK
    if topk_on | topp_on:
        cbase_v = cand_v_ptr + row * V
        cbase_i = cand_i_ptr + row * V
        # 1. max and normalizer; 2. histogram and the bound (or the sample's guess); 3. compaction.
        if ROUTE == SAMPLED:  # no histogram: the sample's guess, kept only if its survivors prove it
            m, z, _none = _slice_stats(lrow, 0, V, 0.0, offs, NSTEP, BLOCK, NB, INV_W, PREFETCH, False)
            b = _sample_bound(lrow, V, m, z, kk, pp, topk_on, NS)
            n_c = _slice_compact(lrow, 0, V, b, 0, cbase_v, cbase_i, offs, NSTEP, BLOCK, NB, INV_W, PREFETCH, True)
            if not _sampled_ok(cbase_v, n_c, b, m, z, kk, pp, topk_on, CB):
                n_c = _hist_compact(lrow, V, m, z, kk, pp, topk_on, cbase_v, cbase_i, offs, NSTEP, BLOCK, NB, INV_W)
        else:
            if ROUTE == TWO_PASS:  # the histogram in the same sweep, below the first block's max
                a = _anchor(lrow, offs, V)
                m, z, hist = _slice_stats(lrow, 0, V, a, offs, NSTEP, BLOCK, NB, INV_W, PREFETCH, True)
            else:
                m, z, _none = _slice_stats(lrow, 0, V, 0.0, offs, NSTEP, BLOCK, NB, INV_W, PREFETCH, False)
                a = m
                hist = _slice_hist(lrow, 0, V, a, offs, NSTEP, BLOCK, NB, INV_W, PREFETCH)
            jl = _bound(hist, kk, pp, z, topk_on, m - a, NB, INV_W)
            n_c = _slice_compact(lrow, 0, V, a, jl, cbase_v, cbase_i, offs, NSTEP, BLOCK, NB, INV_W, PREFETCH)
        best, best_i = _pick(cbase_v, cbase_i, n_c, V, m, z, kk, pp, topk_on, topp_on, qrow, CB)
    else:
        best_i = _race_row(lrow, qrow, offs, V, NSTEP, BLOCK, PREFETCH)
    tl.store(ids_ptr + row, best_i.to(tl.int64))


@triton.jit
def _row_stats(stats_ptr, row, S: tl.constexpr, SP: tl.constexpr):
    """The row's max and normalizer from its S slices' (max, normalizer) pairs."""
    ss = tl.arange(0, SP)
    ms = tl.load(stats_ptr + (row * S + ss) * 2, mask=ss < S, other=-1e30)
    zs = tl.load(stats_ptr + (row * S + ss) * 2 + 1, mask=ss < S, other=0.0)
    m = tl.max(ms, axis=0)
    return m, tl.sum(zs * tl.exp2((ms - m) * LOG2E), axis=0)


@triton.jit
def _split_stats_kernel(logits_ptr, k_ptr, p_ptr, stats_ptr, hist_ptr, stride_l, V: tl.constexpr, L: tl.constexpr,
                        S: tl.constexpr, BLOCK: tl.constexpr, NB: tl.constexpr, INV_W: tl.constexpr,
                        PREFETCH: tl.constexpr, ROUTE: tl.constexpr):
    """Split path, pass 1, one program per (row, slice of L tokens): the slice's max and normalizer,
    and on the two-pass route its histogram below the row's anchor, from the same sweep."""
    row = tl.program_id(0).to(tl.int64)
    sl = tl.program_id(1)
    if (tl.load(k_ptr + row) < V) | (tl.load(p_ptr + row) < 1.0):  # unfiltered rows: the race only
        lo = sl * L
        lrow = logits_ptr + row * stride_l
        offs = tl.arange(0, BLOCK)
        a = _anchor(lrow, offs, V) if ROUTE == TWO_PASS else 0.0
        m, z, hist = _slice_stats(lrow, lo, tl.minimum(lo + L, V), a, offs, L // BLOCK, BLOCK, NB, INV_W, PREFETCH,
                                  ROUTE == TWO_PASS)
        if ROUTE == TWO_PASS:
            tl.store(hist_ptr + (row * S + sl) * NB + tl.arange(0, NB), hist)
        tl.store(stats_ptr + (row * S + sl) * 2, m)
        tl.store(stats_ptr + (row * S + sl) * 2 + 1, z)


@triton.jit
def _split_hist_kernel(logits_ptr, k_ptr, p_ptr, stats_ptr, hist_ptr, stride_l, V: tl.constexpr, L: tl.constexpr,
                       S: tl.constexpr, SP: tl.constexpr, BLOCK: tl.constexpr, NB: tl.constexpr, INV_W: tl.constexpr,
                       PREFETCH: tl.constexpr):
    """Split path, pass 2 of the three-pass route: the slice's histogram below the whole row's max."""
    row = tl.program_id(0).to(tl.int64)
    sl = tl.program_id(1)
    if (tl.load(k_ptr + row) < V) | (tl.load(p_ptr + row) < 1.0):
        m, _z = _row_stats(stats_ptr, row, S, SP)
        lo = sl * L
        hist = _slice_hist(logits_ptr + row * stride_l, lo, tl.minimum(lo + L, V), m, tl.arange(0, BLOCK), L // BLOCK,
                           BLOCK, NB, INV_W, PREFETCH)
        tl.store(hist_ptr + (row * S + sl) * NB + tl.arange(0, NB), hist)


@triton.jit
def _split_compact_kernel(logits_ptr, k_ptr, p_ptr, stats_ptr, hist_ptr, cand_v_ptr, cand_i_ptr, count_ptr, stride_l,
                          V: tl.constexpr, L: tl.constexpr, S: tl.constexpr, SP: tl.constexpr, BLOCK: tl.constexpr,
                          NB: tl.constexpr, INV_W: tl.constexpr, PREFETCH: tl.constexpr, ROUTE: tl.constexpr):
    """Split path, last streaming pass: the row's bound from the summed histograms, then the slice's
    survivors, compacted in index order into the slice's own segment of the row's scratch."""
    row = tl.program_id(0).to(tl.int64)
    sl = tl.program_id(1)
    kk = tl.load(k_ptr + row)
    pp = tl.load(p_ptr + row)
    topk_on = kk < V
    if topk_on | (pp < 1.0):
        m, z = _row_stats(stats_ptr, row, S, SP)
        ss = tl.arange(0, SP)
        j = tl.arange(0, NB)
        hists = tl.load(hist_ptr + (row * S + ss)[:, None] * NB + j[None, :], mask=(ss < S)[:, None], other=0)
        lrow = logits_ptr + row * stride_l
        offs = tl.arange(0, BLOCK)
        if ROUTE == TWO_PASS:  # noqa: SIM108 (a constexpr branch)
            a = _anchor(lrow, offs, V)
        else:
            a = m
        jl = _bound(tl.sum(hists, axis=0), kk, pp, z, topk_on, m - a, NB, INV_W)
        lo = sl * L
        seg = row * V + lo
        n = _slice_compact(lrow, lo, tl.minimum(lo + L, V), a, jl, cand_v_ptr + seg, cand_i_ptr + seg, offs,
                           L // BLOCK, BLOCK, NB, INV_W, PREFETCH)
        tl.store(count_ptr + row * S + sl, n)


@triton.jit
def _split_pick_kernel(logits_ptr, k_ptr, p_ptr, q_ptr, ids_ptr, stats_ptr, cand_v_ptr, cand_i_ptr, count_ptr,
                       stride_l, stride_q, V: tl.constexpr, L: tl.constexpr, S: tl.constexpr, SP: tl.constexpr,
                       BLOCK: tl.constexpr, CB: tl.constexpr, PREFETCH: tl.constexpr):
    """Split path, step 4, one program per row: the slices' survivor segments are moved together
    (in place, in order, so index order holds), then the same exact search and race as the fused
    kernel."""
    row = tl.program_id(0).to(tl.int64)
    kk = tl.load(k_ptr + row)
    pp = tl.load(p_ptr + row)
    qrow = q_ptr + row * stride_q
    topk_on = kk < V
    topp_on = pp < 1.0
    if topk_on | topp_on:
        m, z = _row_stats(stats_ptr, row, S, SP)
        cbase_v = cand_v_ptr + row * V
        cbase_i = cand_i_ptr + row * V
        coffs = tl.arange(0, CB)
        n_c = 0
        for sl in tl.static_range(S):
            # A segment moves left or stays (n_c <= sl * L), chunk by chunk, and barriers keep the
            # warps together: where a segment moves by less than a chunk, one warp's stores would
            # otherwise overwrite slots of the same or the next chunk that another warp has not
            # loaded yet, so every warp loads its part of a chunk before any stores, and stores
            # it before any loads the next; the pick below then reads slots other warps wrote.
            n_s = tl.load(count_ptr + row * S + sl)
            c0 = 0
            while c0 < n_s:
                cm = c0 + coffs < n_s
                v = tl.load(cbase_v + sl * L + c0 + coffs, mask=cm)
                i = tl.load(cbase_i + sl * L + c0 + coffs, mask=cm)
                tl.debug_barrier()
                tl.store(cbase_v + n_c + c0 + coffs, v, mask=cm)
                tl.store(cbase_i + n_c + c0 + coffs, i, mask=cm)
                tl.debug_barrier()
                c0 += CB
            n_c += n_s
        best, best_i = _pick(cbase_v, cbase_i, n_c, V, m, z, kk, pp, topk_on, topp_on, qrow, CB)
    else:
        best_i = _race_row(logits_ptr + row * stride_l, qrow, tl.arange(0, BLOCK), V, (V + BLOCK - 1) // BLOCK, BLOCK,
                           PREFETCH)
    tl.store(ids_ptr + row, best_i.to(tl.int64))


#: One row per program; 4096-wide blocks with 16 warps keep 8 fp32 lanes per thread in flight per
#: load, and the 256 buckets of width 1/8 cover 32 nats below the max (mass beyond that is < 1e-13
#: of the max token's and lands in the catch-all bucket). The fused kernel's tile in the interpreter.
BLOCK, NUM_WARPS, NB, INV_W, CB = 4096, 16, 256, 8.0, 512

#: GPU candidates, timed by the autotuner per shape. On the H200 the 4096 x 16-warp tile alone
#: ran at 9-13% of bandwidth: 99 registers x 512 threads allow one program per SM, and each
#: block's load is followed by a block-wide reduction, so an SM has only about 16 KB of loads in
#: flight (Nsight, docs/results/h200-profiles.md). The others trade threads per program for
#: resident programs (two per SM at 8 warps, four at 4) or for bytes per load (8192-wide blocks):
#: each holds 16 elements a thread per load, twice the current tile's bytes in flight per SM.
#: PREFETCH (the next block requested before the current one is used) doubles the bytes in flight
#: again, at up to 35 more registers: on sm_90 it fits the 16-warp 4096 tile (112 registers) and the
#: 4-warp 2048 one (122-161) without spills, while the 8-warp and 8192-wide tiles spill with it
#: (scripts/preflight_sm90.py), so those two run without it. Each tile runs on all three routes
#: (ROUTE): the two-pass sweep holds the histogram beside the max and normalizer, the sampled one
#: holds none but keeps a larger survivor set, so which route's reads are fewer and which one's
#: registers allow more in flight is left to the timing.
_TILES = [
    ({"BLOCK": 4096, "PREFETCH": 0}, 16),
    ({"BLOCK": 8192, "PREFETCH": 0}, 16),
    ({"BLOCK": 4096, "PREFETCH": 0}, 8),
    ({"BLOCK": 2048, "PREFETCH": 0}, 4),
    ({"BLOCK": 4096, "PREFETCH": 1}, 16),
    ({"BLOCK": 2048, "PREFETCH": 1}, 4),
]
_GPU_CONFIGS = [triton.Config({**tile, "ROUTE": route}, num_warps=warps) for route in ROUTES.values()
                for tile, warps in _TILES]
_topk_topp_sample_tuned = triton.autotune(configs=_GPU_CONFIGS, key=["V", "B"])(_topk_topp_sample_fwd_kernel)


#: The split path (rows spread over several programs) takes over when there are fewer rows than
#: this many per SM: the fused kernel's one program per row then leaves SMs with too few bytes in
#: flight (W1 and W2 ran at 13-18% of bandwidth on the H100, docs/results/h100.md). Each row is cut
#: into slices of whole blocks, for about SPLIT_TARGET programs per SM in each of the three
#: streaming passes: 4-warp programs with 2048-wide prefetching blocks (the fused kernel's
#: spill-free small tile).
SPLIT_BELOW, SPLIT_TARGET, MAX_SPLITS = 4, 8, 8
SPLIT_BLOCK, SPLIT_WARPS = 2048, 4
#: The interpreter's split block: small, so the smoke rows are cut into several slices.
SPLIT_BLOCK_CPU = 512

#: Per (rows, V, slices, device): the split path's route the first call timed faster.
_ROUTE_PICK: dict[tuple, str] = {}
#: What the timed choices above picked, with the times that decided them; the engine reports a
#: module-level ``TIMED_CHOICES`` with each result (docs/bundle-format.md). The fused kernel's
#: route is a tuning parameter of its autotuner, which the engine reports by itself.
TIMED_CHOICES: dict[str, str] = {}


def _slices(V: int, want: int, block: int) -> tuple[int, int]:
    """(slices, tokens per slice) for about ``want`` slices of whole blocks over a row of V."""
    length = triton.cdiv(triton.cdiv(V, max(1, want)), block) * block
    return triton.cdiv(V, length), length


def _splits(B: int, V: int, sms: int, block: int) -> tuple[int, int]:
    """(slices per row, tokens per slice): one slice when the fused kernel has enough rows."""
    if SPLIT_BELOW * sms <= B:
        return 1, V
    return _slices(V, min(MAX_SPLITS, triton.cdiv(SPLIT_TARGET * sms, B)), block)


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


def _pick_route(routes: dict, key: tuple):
    """The route of ``routes`` that the first call of this shape timed fastest (``_fastest``),
    remembered in ``_ROUTE_PICK``. Every route writes all of its outputs and scratch from the
    inputs alone, so the trials need no restoring."""
    if key not in _ROUTE_PICK:
        _ROUTE_PICK[key], times = _fastest(routes)
        TIMED_CHOICES["split route B={} V={} slices={}".format(*key[:3])] = (
            f"{_ROUTE_PICK[key]} (" + ", ".join(f"{r} {ms * 1e3:.0f} us" for r, ms in times.items()) + ")")
    return routes[_ROUTE_PICK[key]]


#: The split path's per-row pick (survivor gathering, the exact searches and the race): survivors
#: a pass and warps. Session 18's H100 profile of W2 had it at 494 of 1,016 µs, one 4-warp program
#: a row (512 programs, 9% occupancy), each search pass a serial loop over the survivors. Wider
#: programs take the same 64 survivor-threshold pairs a thread per pass, with more threads on each
#: row. Which one wins depends on how many survivors the rows keep, so the first call of a shape
#: times every route with each (``_pick_route``) and reports the times.
PICK_SHAPES = {"pick 512x4w": (512, 4), "pick 1024x8w": (1024, 8), "pick 2048x16w": (2048, 16)}
PICK_DEFAULT = "pick 512x4w"


def _split(logits, k, p, q, ids, cand_v, cand_i, n_split: int, length: int, sblock: int, route: str,
           pick: str = PICK_DEFAULT) -> None:
    """The split path: the streaming passes over (row, slice), then one program per row."""
    B, V = logits.shape
    if route not in SPLIT_ROUTES:
        raise ValueError(f"the split path's routes are {SPLIT_ROUTES}, not {route!r}")
    rt = ROUTES[route]
    sp = triton.next_power_of_2(n_split)
    stats = torch.empty(B * n_split * 2, dtype=torch.float32, device=logits.device)
    hist = torch.empty(B * n_split * NB, dtype=torch.int32, device=logits.device)
    count = torch.empty(B * n_split, dtype=torch.int32, device=logits.device)
    meta = {"V": V, "L": length, "S": n_split, "BLOCK": sblock, "PREFETCH": 1, "num_warps": SPLIT_WARPS}
    _split_stats_kernel[(B, n_split)](logits, k, p, stats, hist, logits.stride(0), NB=NB, INV_W=INV_W, ROUTE=rt,
                                      **meta)
    if route == "three-pass":
        _split_hist_kernel[(B, n_split)](logits, k, p, stats, hist, logits.stride(0), SP=sp, NB=NB, INV_W=INV_W, **meta)
    _split_compact_kernel[(B, n_split)](logits, k, p, stats, hist, cand_v, cand_i, count, logits.stride(0), SP=sp,
                                        NB=NB, INV_W=INV_W, ROUTE=rt, **meta)
    cb, warps = PICK_SHAPES[pick]
    _split_pick_kernel[(B,)](logits, k, p, q, ids, stats, cand_v, cand_i, count, logits.stride(0), q.stride(0),
                             SP=sp, CB=cb, **{**meta, "num_warps": warps})


#: The route the interpreter takes when none is forced (the GPU times them: ``_pick_route`` on the
#: split path, the autotuner on the fused kernel).
CPU_ROUTE = "two-pass"


def _sample(logits: torch.Tensor, k: torch.Tensor, p: torch.Tensor, q: torch.Tensor,
            splits: int | None = None, route: str | None = None) -> torch.Tensor:
    """The expert, with the path forced for tests: ``splits`` = 1 the fused kernel, None the
    choice by the row count, another number that many slices where the row allows; ``route`` one
    of ``ROUTES`` (None: timed on the GPU, ``CPU_ROUTE`` in the interpreter)."""
    B, V = logits.shape
    if logits.stride(1) != 1 or q.stride(1) != 1:
        raise ValueError("rows of logits and q must be contiguous")
    ids = torch.empty(B, dtype=torch.int64, device=logits.device)
    cand_v = torch.empty(B, V, dtype=torch.float32, device=logits.device)
    cand_i = torch.empty(B, V, dtype=torch.int32, device=logits.device)
    cpu = logits.device.type == "cpu"
    sblock = SPLIT_BLOCK_CPU if cpu else SPLIT_BLOCK
    # The interpreter has no SMs: it takes an H100's or H200's count, so it picks the paths the GPU would.
    sms = 132 if cpu else torch.cuda.get_device_properties(logits.device).multi_processor_count
    n_split, length = _splits(B, V, sms, sblock)
    if splits is not None:
        n_split, length = (1, V) if splits == 1 else _slices(V, splits, sblock)
    if n_split > 1:
        split_args = (logits, k, p, q, ids, cand_v, cand_i, n_split, length, sblock)
        if route is None and not cpu:
            _pick_route({f"{name}, {pick}": functools.partial(_split, *split_args, route=name, pick=pick)
                         for name in SPLIT_ROUTES for pick in PICK_SHAPES},
                        (B, V, n_split, logits.device))()
        else:
            _split(*split_args, route=route or CPU_ROUTE)
        return ids
    args = (logits, k, p, q, ids, cand_v, cand_i, logits.stride(0), q.stride(0), B)
    block = min(BLOCK, triton.next_power_of_2(V))
    if cpu or block < BLOCK or route is not None:  # the interpreter, short rows, or a forced route
        _topk_topp_sample_fwd_kernel[(B,)](
            *args, V=V, BLOCK=block, NB=NB, INV_W=INV_W, CB=CB, PREFETCH=1, ROUTE=ROUTES[route or CPU_ROUTE],
            NS=SAMPLE_N_CPU if cpu else SAMPLE_N, num_warps=NUM_WARPS if block >= 4096 else 4,
        )
    else:
        _topk_topp_sample_tuned[(B,)](*args, V=V, NB=NB, INV_W=INV_W, CB=CB, NS=SAMPLE_N)
    return ids


def topk_topp_sampling(logits: torch.Tensor, k: torch.Tensor, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """logits, q: [B, V] fp32; k: [B] int32; p: [B] fp32. Returns ids [B] int64."""
    return _sample(logits, k, p, q)
