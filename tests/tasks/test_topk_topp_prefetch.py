"""The topk-topp-sampling expert draws the same tokens with and without PREFETCH, on both routes.

The GPU autotuner chooses among tiles with and without the prefetching streaming passes, each on
the three-pass and the two-pass route; the interpreter's expert runs take the prefetching two-pass
one only. All four variants run here, in Triton's interpreter, on rows of several blocks
(V = 20,000 over 4,096-wide blocks) with every filter mode and the task's own inputs: the ids
must be identical, token for token.
"""

from __future__ import annotations

import pytest

from tests.tasks.expert_script import run_against_expert

pytestmark = pytest.mark.interpreter

CHECK = r'''
filters = int(sys.argv[1])
B, V = 6, 20000
inp = base.make_inputs({"B": B, "V": V, "filters": filters}, torch.Generator().manual_seed(filters), torch.device("cpu"))
ids = {}
for prefetch in (0, 1):
    for route in mod.ROUTES.values():
        out = torch.empty(B, dtype=torch.int64)
        cand_v = torch.empty(B, V)
        cand_i = torch.empty(B, V, dtype=torch.int32)
        mod._topk_topp_sample_fwd_kernel[(B,)](
            inp["logits"], inp["k"], inp["p"], inp["q"], out, cand_v, cand_i, V, V, B,
            V=V, BLOCK=4096, NB=mod.NB, INV_W=mod.INV_W, CB=mod.CB, PREFETCH=prefetch, ROUTE=route,
            NS=mod.SAMPLE_N_CPU)
        ids[prefetch, route] = out
want = base.topk_topp_sampling(**inp)
for variant, got in ids.items():
    assert torch.equal(got, want), (variant, got.tolist(), want.tolist())
print("ok")
'''


@pytest.mark.parametrize("filters", [0, 1, 2])
def test_prefetching_passes_draw_the_same_tokens_on_both_routes(filters: int) -> None:
    run_against_expert("topk-topp-sampling", CHECK, filters)
