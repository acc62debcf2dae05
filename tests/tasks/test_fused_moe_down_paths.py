"""The fused-moe-mlp expert's two down-projection paths compute the op.

On the GPU the first call of a shape times GEMM2's candidates (Triton's autotuner): the usual
K loop per column tile, and, where the intermediate fits one TMA box (I <= 256, DeepSeek's
sharded experts), the row tile loaded once and kept while the program walks several column
tiles. The smoke workloads take the K loop. Here both run in Triton's interpreter, on shapes
with a hidden size that is not a multiple of a program's column span and an intermediate that
is not a power of two, against the task's baseline; and the GPU tables are checked: every
candidate shares the row tile its sort padded to, and the whole-intermediate candidates are
resolved to the intermediate's width where it fits a box and dropped where it does not.
"""

from __future__ import annotations

import pytest

from tests.tasks.expert_script import run_against_expert

pytestmark = pytest.mark.interpreter

CHECK = r'''
import json
params = json.loads(sys.argv[1])
inp = base.make_inputs(params, torch.Generator().manual_seed(params["T"] + params["H"]), torch.device("cpu"))
ref = base.fused_moe_mlp(**{k: v.double() if k in ("x", "w13", "w2") else v for k, v in inp.items()})
tol = {"fp16": 3e-3, "fp32": 1e-4}[params["dtype"]]
for whole in (False, True):
    out = mod.fused_moe_mlp(**inp, down_whole_k=whole)
    err = float((out.double() - ref).abs().max() / ref.abs().max())
    assert err < tol, (whole, err)
for bm, configs in mod._DOWN_CONFIGS.items():
    assert all(c[0] == bm for c in configs) and all(c[0] == bm for c in mod._GATE_UP_CONFIGS[bm]), bm
    tuned = mod._DOWN_TUNED[bm]
    for inter, whole_width in ((256, 256), (48, 64), (768, None)):
        kept = [c.kwargs["BLOCK_K"] for c in mod._whole_k(tuned.configs, {}, INTER=inter)]
        want = [c[2] or whole_width for c in configs if c[2] or whole_width]
        assert kept == want, (bm, inter, kept, want)
print("ok")
'''


@pytest.mark.parametrize("params", [
    {"T": 11, "H": 64, "I": 48, "E": 4, "k": 2, "Et": 4, "dtype": "fp16"},  # the smoke shape
    {"T": 23, "H": 136, "I": 40, "E": 6, "k": 3, "Et": 6, "dtype": "fp32"},  # H past a program's two tiles
])
def test_both_down_paths_match_the_baseline(params: dict) -> None:
    import json

    run_against_expert("fused-moe-mlp", CHECK, json.dumps(params))
