"""The topk-topp-sampling expert's two-pass route draws the same tokens as its three-pass route
(and, on the fused kernel, so does the sampled route).

The two-pass route builds the histogram in the max-and-normalizer sweep, below an anchor known
before the row is read (the max of the row's first block) instead of below the row's max. Its
bound is safe only if the buckets fall monotonically with the logit and the first bucket, which
holds everything above the anchor, is bounded by the row's max. These checks run both routes, on
the fused kernel and on the split path, and the sampled route on the fused kernel (the ramps put
the row's high tokens where a sample of evenly spaced tokens sees them least evenly), in Triton's
interpreter:

- on the task's own inputs with every filter mode;
- on rows built so that the first block's max is far below the rest of the row (a rising ramp:
  most tokens lie above the anchor, so the first bucket holds most of the row), far above it (a
  falling ramp), and with a plateau of tied values at the k-th position beyond the first block.

The ids must be identical, token for token, and equal to the eager baseline's.
"""

from __future__ import annotations

import pytest

from tests.tasks.expert_script import run_against_expert

pytestmark = pytest.mark.interpreter

CHECK = r'''
kind = sys.argv[1]
g = torch.Generator().manual_seed(11)
if kind == "task":
    B, V = 8, 3001
    inp = {}
    for filters in (0, 1, 2):
        part = base.make_inputs({"B": B, "V": V, "filters": filters}, torch.Generator().manual_seed(3 + filters),
                                torch.device("cpu"))
        for name, t in part.items():
            inp[name] = torch.cat([inp[name], t]) if name in inp else t
else:
    B, V = 12, 9001  # three of the fused kernel's 4,096-wide blocks, eighteen of the split path's 512
    x = torch.arange(V, dtype=torch.float32) / V * 24.0          # 24 nats from the first token to the last
    rows = [x, x.flip(0), x, x, x.flip(0), x, x, x]
    logits = torch.stack([r + 0.05 * torch.randn(V, generator=g) for r in rows]
                         + [torch.randn(V, generator=g) for _ in range(4)])
    logits[5, 6000:6300] = logits[5].max() + 1.0                    # a tied plateau beyond the first block
    logits[6, 4500:] = logits[6, :4500].mean()                      # half the row tied, above the anchor
    # Rows 8-11: a flat bulk with a few spikes beyond the first block, a few nats above its max: the
    # nucleus reaches deep below the anchor, so the bound's upper masses must use M - A exactly.
    for row, spikes in zip(range(8, 12), (1, 3, 8, 2)):
        logits[row, 5000:5000 + spikes] = logits[row].max() + 2.5
    logits = logits.to(torch.bfloat16).float()
    k = torch.tensor([50, 50, V, V, 300, 200, 1000, 7, V, V, 3000, V], dtype=torch.int32)
    p = torch.tensor([1.0, 1.0, 0.9, 0.3, 0.95, 1.0, 0.5, 0.99, 0.9, 0.99, 0.8, 0.5], dtype=torch.float32)
    q = -torch.log(torch.rand(B, V, generator=g).clamp_min(1e-12))
    inp = {"logits": logits, "k": k, "p": p, "q": q}
want = base.topk_topp_sampling(**inp)
for splits in (1, 3):
    for route in mod.ROUTES if splits == 1 else mod.SPLIT_ROUTES:
        got = mod._sample(**inp, splits=splits, route=route)
        assert torch.equal(got, want), (kind, splits, route, got.tolist(), want.tolist())
print("ok")
'''


@pytest.mark.parametrize("kind", ["task", "anchored"])
def test_both_routes_draw_the_baselines_tokens(kind: str) -> None:
    run_against_expert("topk-topp-sampling", CHECK, kind)


BUCKETS = r'''
import triton.language as tl

@triton.jit
def buckets(x_ptr, out_ptr, a, N: tl.constexpr, NB: tl.constexpr, INV_W: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, mod._bucket(a, tl.load(x_ptr + offs), NB, INV_W))

x = torch.linspace(-60.0, 20.0, 4096)
out = torch.empty(4096, dtype=torch.int32)
buckets[(1,)](x, out, 3.0, N=4096, NB=mod.NB, INV_W=mod.INV_W)
assert int(out.min()) == 0 and int(out.max()) == mod.NB - 1, (out.min(), out.max())
assert bool((out[1:] <= out[:-1]).all()), "buckets must not rise with the logit"
assert bool((out[x > 3.0 - 1.0 / mod.INV_W] == 0).all()), "everything above the anchor goes to the first bucket"
print("ok")
'''


def test_buckets_stay_in_range_and_fall_with_the_logit() -> None:
    """On the GPU a bucket outside [0, NB) would be an out-of-range histogram bin: logits above the
    anchor must land in the first bucket, not a negative one."""
    run_against_expert("topk-topp-sampling", BUCKETS)
