"""The topk-topp-sampling expert's split path (few rows: passes 1-3 over (row, slice), segments
moved together for step 4) draws the same tokens as its fused kernel (one program per row).

On the GPU the split path serves rows fewer than four per SM (W1, W2), the fused kernel the rest
(W3); the interpreter's expert runs take the split path for the smoke workloads. Both run here,
in Triton's interpreter, on the task's own inputs with every filter mode, with 2 to 8 slices a
row (slices end inside a block and rows are not a power of two), and with unfiltered rows (mode 2
has about 10%, which skip to the race): the ids must be identical, token for token, and equal to
the eager baseline's.
"""

from __future__ import annotations

import pytest

from tests.tasks.expert_script import run_against_expert

pytestmark = pytest.mark.interpreter

CHECK = r'''
filters = int(sys.argv[1])
B, V = 24, 3001
inp = base.make_inputs({"B": B, "V": V, "filters": filters}, torch.Generator().manual_seed(7 + filters),
                       torch.device("cpu"))
if filters == 2:
    assert bool((inp["k"] == V).any()), "no unfiltered row: the race branch would go unchecked"
fused = mod._sample(**inp, splits=1)
for splits in (2, 3, 8):
    assert mod._slices(V, splits, mod.SPLIT_BLOCK_CPU)[0] == min(splits, 6)
    split = mod._sample(**inp, splits=splits)
    assert torch.equal(split, fused), (splits, split.tolist(), fused.tolist())
assert torch.equal(fused, base.topk_topp_sampling(**inp)), "differs from the eager baseline"
print("ok")
'''


@pytest.mark.parametrize("filters", [0, 1, 2])
def test_split_rows_draw_the_same_tokens_as_the_fused_kernel(filters: int) -> None:
    run_against_expert("topk-topp-sampling", CHECK, filters)


SPLITS = r'''
# H100/H200: 132 SMs. W1 (256 rows) and W2 (512) split; W3 (1,024) stays fused.
assert mod._splits(256, 128256, 132, mod.SPLIT_BLOCK) == (5, 26624)
assert mod._splits(512, 151936, 132, mod.SPLIT_BLOCK) == (3, 51200)
assert mod._splits(1024, 129280, 132, mod.SPLIT_BLOCK) == (1, 129280)
print("ok")
'''


def test_the_split_path_serves_only_rows_too_few_for_the_fused_kernel() -> None:
    run_against_expert("topk-topp-sampling", SPLITS)


PICKS = r'''
filters = int(sys.argv[1])
B, V = 24, 3001
inp = base.make_inputs({"B": B, "V": V, "filters": filters}, torch.Generator().manual_seed(11 + filters),
                       torch.device("cpu"))
fused = mod._sample(**inp, splits=1)
n_split, length = mod._slices(V, 3, mod.SPLIT_BLOCK_CPU)
assert n_split == 3
for pick in mod.PICK_SHAPES:
    for route in mod.SPLIT_ROUTES:
        ids = torch.full((B,), -1, dtype=torch.int64)
        cand_v = torch.empty(B, V, dtype=torch.float32)
        cand_i = torch.empty(B, V, dtype=torch.int32)
        mod._split(inp["logits"], inp["k"], inp["p"], inp["q"], ids, cand_v, cand_i, n_split, length,
                   mod.SPLIT_BLOCK_CPU, route=route, pick=pick)
        assert torch.equal(ids, fused), (pick, route, ids.tolist(), fused.tolist())
print("ok")
'''


@pytest.mark.parametrize("filters", [1, 2])
def test_every_pick_shape_the_gpu_times_draws_the_same_tokens(filters: int) -> None:
    """The GPU's first call of a shape times each route with each pick shape (survivors a pass
    and warps) and keeps the fastest, so every one of them must draw the fused kernel's tokens."""
    run_against_expert("topk-topp-sampling", PICKS, filters)
