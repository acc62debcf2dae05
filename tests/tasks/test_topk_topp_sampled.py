"""The topk-topp-sampling expert's sampled route stays exact when its sample misjudges a row.

The sampled route skips the histogram: it guesses the bound on the threshold from a few thousand
evenly spaced tokens of the row, compacts everything at or above the guess in one sweep, and
keeps the guess only if the survivors prove it (k or more of them with top-k on; mass of at
least p Z with top-p alone). Otherwise the row is redone from the histogram. The guess is right
on the task's rows almost always, so the fallback would go unchecked by the other tests; these
rows are built to defeat the sample:

- top-k rows whose high tokens sit exactly on the sampled positions, so the sample sees far more
  of them than the row holds (the guess keeps fewer than k);
- a top-p row whose sampled positions hold three spikes and near-nothing, while every token the
  sample skips is large: together they hold most of the mass, which the sample never sees.

A check first proves the guess fails on exactly those rows (else the test would not reach the
fallback); then the fused kernel, on the sampled route, must draw the eager baseline's tokens on
them and on the task's own rows beside them, in Triton's interpreter. The route is the fused
kernel's only (on the GPU the autotuner's pick at W3); the split path refuses it.
"""

from __future__ import annotations

import pytest

from tests.tasks.expert_script import run_against_expert

pytestmark = pytest.mark.interpreter

CHECK = r'''
import triton.language as tl

@triton.jit
def guess(l_ptr, k_ptr, p_ptr, m_ptr, z_ptr, out_ptr, V: tl.constexpr, NS: tl.constexpr):
    row = tl.program_id(0)
    kk = tl.load(k_ptr + row)
    tl.store(out_ptr + row, mod._sample_bound(l_ptr + row * V, V, tl.load(m_ptr + row), tl.load(z_ptr + row), kk,
                                              tl.load(p_ptr + row), kk < V, NS))

g = torch.Generator().manual_seed(5)
V, NS = 9001, mod.SAMPLE_N_CPU
gap, run = V // 32, NS // 32
sampled = (torch.arange(32)[:, None] * gap + torch.arange(run)[None, :]).flatten()
hostile = []
for k, p in ((1000, 1.0), (1000, 0.5), (300, 0.9)):        # high tokens on the sample only
    row = 0.1 * torch.randn(V, generator=g)
    row[sampled[:6 * run]] = 0.5 + 0.01 * torch.randn(6 * run, generator=g)
    hostile.append((row, k, p))
row = torch.full((V,), 5.0)                                  # the mass where the sample is not
row[sampled] = 0.0
row[sampled[:3]] = 10.0
hostile.append((row, V, 0.9))
n_h = len(hostile)
task = base.make_inputs({"B": 6, "V": V, "filters": 0}, torch.Generator().manual_seed(9), torch.device("cpu"))
logits = torch.cat([torch.stack([r for r, _, _ in hostile]).to(torch.bfloat16).float(), task["logits"]])
k = torch.cat([torch.tensor([k for _, k, _ in hostile], dtype=torch.int32), task["k"]])
p = torch.cat([torch.tensor([p for _, _, p in hostile], dtype=torch.float32), task["p"]])
B = logits.shape[0]
q = -torch.log(torch.rand(B, V, generator=g).clamp_min(1e-12))

m = logits.max(1).values
z = torch.exp(logits - m[:, None]).sum(1)
b = torch.empty(B)
guess[(B,)](logits, k, p, m, z, b, V=V, NS=NS)
for r in range(n_h):
    kept = logits[r] >= b[r]
    if k[r] < V:
        assert int(kept.sum()) < int(k[r]), (r, "the guess keeps k tokens: the fallback would not run")
    else:
        mass = float(torch.exp(logits[r][kept] - m[r]).sum())
        assert mass < float(p[r] * z[r]), (r, "the guess keeps p of the mass: the fallback would not run")

want = base.topk_topp_sampling(logits, k, p, q)
got = mod._sample(logits, k, p, q, splits=1, route="sampled")
assert torch.equal(got, want), (got.tolist(), want.tolist())
try:  # the split path has no sampled route (it lost there when timed)
    mod._sample(logits, k, p, q, splits=3, route="sampled")
except ValueError as e:
    assert "split path" in str(e), e
else:
    raise AssertionError("the split path took the sampled route")
print("ok")
'''


def test_rows_the_sample_misjudges_fall_back_and_draw_the_baselines_tokens() -> None:
    run_against_expert("topk-topp-sampling", CHECK)
