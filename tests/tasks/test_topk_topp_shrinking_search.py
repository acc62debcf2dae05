"""The topk-topp-sampling expert's exact searches shrink their working set as they go.

Each 16-way pass of the k-th-value and top-p searches compacts the survivors still inside its
interval into a work area after the survivors in the row's scratch (in place from then on), and
keeps the count or mass of those above the interval as a constant. With more survivors than free
slots after them it reads all survivors every pass, as before. The tests run the fused kernel in
Triton's interpreter with its scratch filled with NaN first, so what the searches wrote shows:

- survivors (value and index) fill the first n_c slots; the work area, where it is used, only the
  n_c slots after them; survivors that fit one chunk are never compacted (their passes are one
  load each either way); and the drawn tokens equal the eager baseline's;
- rows with many survivors over several chunks (the in-place compaction across chunk boundaries,
  with both filters, top-k alone and top-p alone) use the work area and draw the baseline's tokens;
- a row that keeps over half its tokens (flat logits, top-p only) leaves the work area untouched
  and still draws the baseline's token.
"""

from __future__ import annotations

import pytest

from tests.tasks.expert_script import run_against_expert

pytestmark = pytest.mark.interpreter

RUN = r'''
def run(inp):
    """The fused kernel as the interpreter's expert launches it, with NaN/-1 scratch returned."""
    logits, k, p, q = inp["logits"], inp["k"], inp["p"], inp["q"]
    B, V = logits.shape
    ids = torch.full((B,), -1, dtype=torch.int64)
    cand_v = torch.full((B, V), float("nan"))
    cand_i = torch.full((B, V), -1, dtype=torch.int32)
    block = min(mod.BLOCK, triton.next_power_of_2(V))
    mod._topk_topp_sample_fwd_kernel[(B,)](
        logits, k, p, q, ids, cand_v, cand_i, logits.stride(0), q.stride(0), B, V=V, BLOCK=block, NB=mod.NB,
        INV_W=mod.INV_W, CB=mod.CB, PREFETCH=1, ROUTE=mod.ROUTES["two-pass"], NS=mod.SAMPLE_N_CPU, num_warps=4)
    assert torch.equal(ids, base.topk_topp_sampling(**inp)), (ids.tolist(), base.topk_topp_sampling(**inp).tolist())
    used = []
    for r in range(B):
        n_c = int((cand_i[r] >= 0).sum())
        if n_c == 0:  # an unfiltered row: the race over the row, no scratch
            used.append(None)
            continue
        assert bool((cand_i[r, :n_c] >= 0).all()) and not bool(cand_v[r, :n_c].isnan().any()), r
        written = ~cand_v[r, n_c:].isnan()
        assert not bool(written[n_c:].any()), f"row {r} wrote past its work area"
        used.append((n_c, int(written.sum())))
    return used
'''

TASK_ROWS = RUN + r'''
filters = int(sys.argv[1])
inp = base.make_inputs({"B": 12, "V": 3001, "filters": filters}, torch.Generator().manual_seed(3 + filters),
                       torch.device("cpu"))
used = [u for u in run(inp) if u is not None]
assert all(w == 0 for n_c, w in used if n_c <= mod.CB), ("a one-chunk working set was compacted", used)
if filters != 2:  # top-k alone (k = 50) keeps under a chunk a row
    assert any(w > 0 for n_c, w in used), used
print("ok")
'''


@pytest.mark.parametrize("filters", [0, 1, 2])
def test_task_rows_search_in_the_work_area_and_draw_the_baselines_tokens(filters: int) -> None:
    run_against_expert("topk-topp-sampling", TASK_ROWS, filters)


MANY = RUN + r'''
g = torch.Generator().manual_seed(5)
B, V = 3, 8000
logits = torch.randn(B, V, generator=g)
k = torch.tensor([1500, 1500, V], dtype=torch.int32)   # both, top-k alone, top-p alone
p = torch.tensor([0.9, 1.0, 0.8])
q = torch.empty(B, V).exponential_(1.0, generator=g).clamp_min(1e-20)
used = run({"logits": logits, "k": k, "p": p, "q": q})
for r, (n_c, w) in enumerate(used):
    assert 2 * mod.CB < n_c <= V // 2 and w > 0, (r, n_c, w)
print("ok")
'''


def test_many_survivors_over_several_chunks_are_compacted_in_place() -> None:
    run_against_expert("topk-topp-sampling", MANY)


FLAT = RUN + r'''
g = torch.Generator().manual_seed(9)
B, V = 2, 3001
logits = torch.zeros(B, V)
logits[1, :1800] = 0.5  # 1,800 tied tokens above the rest: still over half the row kept
k = torch.full((B,), V, dtype=torch.int32)
p = torch.full((B,), 0.999)
q = torch.empty(B, V).exponential_(1.0, generator=g).clamp_min(1e-20)
used = run({"logits": logits, "k": k, "p": p, "q": q})
for r, (n_c, w) in enumerate(used):
    assert n_c > V // 2 and w == 0, (r, n_c, w)
print("ok")
'''


def test_rows_keeping_over_half_the_tokens_search_without_a_work_area() -> None:
    run_against_expert("topk-topp-sampling", FLAT)


SEARCH = r'''
import triton.language as tl

@triton.jit
def probe(v_ptr, arg_ptr, out_ptr, n_c, V, kk, CB: tl.constexpr):
    """The pick's three searches on the survivors at v_ptr: the k-th value, top-p inside top-k
    (target from the top-k mass) and top-p alone (target p * z)."""
    pp = tl.load(arg_ptr)
    m = tl.load(arg_ptr + 1)
    z = tl.load(arg_ptr + 2)
    coffs = tl.arange(0, CB)
    lo_f = float("inf")
    c0 = 0
    while c0 < n_c:
        lo_f = tl.minimum(lo_f, tl.min(tl.load(v_ptr + c0 + coffs, mask=c0 + coffs < n_c, other=float("inf")), axis=0))
        c0 += CB
    lo = mod._key(lo_f).to(tl.int64)
    hi = mod._key(m).to(tl.int64) + 1
    tk = mod._search(lo, hi, kk, v_ptr, n_c, V - n_c, m, False, False, CB)
    tl.store(out_ptr, tk)
    tl.store(out_ptr + 1, mod._search(tk, hi, pp, v_ptr, n_c, V - n_c, m, True, True, CB))
    tl.store(out_ptr + 2, mod._search(lo, hi, pp * z, v_ptr, n_c, V - n_c, m, True, False, CB))


def key(v):
    b = v.view(torch.int32).to(torch.int64)
    return b ^ ((b >> 31) & 0x7FFFFFFF)


def top_p_key(vals, target):
    """The largest key whose values at or above it hold at least ``target`` of the mass (fp64)."""
    ks = key(vals)
    m = float(vals.max())
    for t in torch.unique(ks).flip(0).tolist():
        if float(torch.exp(vals[ks >= t].double() - m).sum()) >= target:
            return t
    raise AssertionError("no key reaches the target")


g = torch.Generator().manual_seed(int(sys.argv[1]))
n_c = 3000
cases = 0
for V in (8000, 4000):  # room for the work area, and not (every pass reads all survivors)
    for kind in ("spread", "ties", "dense"):
        vals = torch.randn(n_c, generator=g) * 2.0
        if kind == "ties":  # bf16 rounding: runs of equal values, also at the k-th one
            vals = vals.to(torch.bfloat16).float()
        if kind == "dense":  # 3,000 values on 5,000 adjacent floats: many a threshold tried is some value's
            vals = (torch.randint(0, 5000, (n_c,), generator=g, dtype=torch.int32) + 0x3F800000).view(torch.float32)
        m = float(vals.max())
        z = float(torch.exp(vals.double() - m).sum())
        for kk in (1, 7, 1500, n_c - 1, n_c):
            for pp in (0.3, 0.9):
                buf = torch.full((V,), float("nan"))
                buf[:n_c] = vals
                out = torch.zeros(3, dtype=torch.int64)
                probe[(1,)](buf, torch.tensor([pp, m, z]), out, n_c, V, kk, CB=512)
                tk = int(key(vals.sort(descending=True).values[kk - 1:kk])[0])
                kept = vals[key(vals) >= tk]
                mk = float(torch.exp(kept.double() - m).sum())
                want = [tk, top_p_key(kept, pp * mk), top_p_key(vals, pp * z)]
                assert out.tolist() == want, (V, kind, kk, pp, out.tolist(), want)
                assert torch.equal(buf[:n_c], vals), "a search overwrote the survivors"
                if V < 2 * n_c:
                    assert bool(buf[n_c:].isnan().all()), "a search used a work area it has no room for"
                cases += 1
assert cases == 60
print("ok")
'''


@pytest.mark.parametrize("seed", [1, 2])
def test_every_search_finds_the_exact_threshold(seed: int) -> None:
    """The searches alone, against thresholds computed in fp64 over sorted values: the k-th
    value (k from 1 to all survivors), top-p inside top-k and top-p alone, with and without tied
    values, on 5,000 adjacent floats (so many a threshold tried is some survivor's own, and the
    interval's bounds are exercised), with and without room for the work area. The first and last k bracket the search's
    interval; 3,000 survivors are six of the interpreter's 512-wide chunks."""
    run_against_expert("topk-topp-sampling", SEARCH, seed)
