"""The fused-moe-mlp expert's expert sort (``_align``) at sizes the smoke workloads do not reach.

The smoke workloads have a few dozen slots, so they exercise one chunk of slots only. The second
launch runs a program per chunk plus extra programs that share the padding fill; this checks the
sorted slots, the sentinels and the block-to-expert map against a torch reference with several
chunks, many experts, a hot expert and tiles of 16-64 rows, in Triton's interpreter.
"""

from __future__ import annotations

import pytest

from tests.tasks.expert_script import run_against_expert

pytestmark = pytest.mark.interpreter

CHECK = r'''
n, E, bs = (int(a) for a in sys.argv[1:4])
gen = torch.Generator().manual_seed(n * 7 + E)
ids = torch.randint(0, E, (n,), generator=gen, dtype=torch.int32)
ids[: n // 3] = 1  # one hot expert
sorted_ids, expert_ids, ntpp = mod._align(ids, bs, E)
cnt = torch.bincount(ids.long(), minlength=E)
pad = (cnt + bs - 1) // bs * bs
total = int(pad.sum())
assert int(ntpp) == total, f"padded total {int(ntpp)} != {total}"
start = torch.cumsum(pad, 0) - pad
for e in range(E):
    a, c, p = int(start[e]), int(cnt[e]), int(pad[e])
    seg = sorted_ids[a:a + p]
    assert sorted(seg[:c].tolist()) == torch.nonzero(ids == e).flatten().tolist(), f"expert {e}: wrong slots"
    assert bool((seg[c:] == n).all()), f"expert {e}: tail not filled with the sentinel"
    assert bool((expert_ids[a // bs:(a + p) // bs] == e).all()), f"expert {e}: wrong block owner"
assert bool((sorted_ids[total:] == n).all()), "slots past the padded total not filled"
print("ok")
'''


@pytest.mark.parametrize(("n", "E", "bs"), [
    (512, 128, 16),  # decode: one chunk, 128 programs share the fill
    (3000, 16, 16),  # three chunks, more fill programs than chunks
    (5000, 8, 64),  # five chunks, fewer experts than chunks
    (2100, 256, 32),  # 256 experts: two tails per fill program
])
def test_expert_sort_matches_a_torch_reference(n: int, E: int, bs: int) -> None:
    run_against_expert("fused-moe-mlp", CHECK, n, E, bs)
