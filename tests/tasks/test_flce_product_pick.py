"""The fused-linear-cross-entropy expert's per-product pick (``_product``) between the Triton TMA
kernel and the warp-specialized Gluon one.

``do_bench`` and both kernels need a GPU, so here the kernels are replaced by CPU products that
record their runs and ``do_bench`` by a script of times. What must hold: the accumulating product
ends with exactly one accumulation into C, however many times the timing ran it; a Gluon form
that fails to build is left out and named, and the Triton kernel keeps serving the product; the
pick is remembered per shape.
"""

from __future__ import annotations

import pytest
import torch
import triton.testing

from evaluator.modules import load_module
from tasks.registry import get_task


@pytest.fixture
def expert(monkeypatch):
    mod = load_module(get_task("fused-linear-cross-entropy").expert_path, "_flce_pick_test")

    def product(a, b, c, accumulate, *_):  # noqa: ANN001, ANN202 - the signatures _product calls
        c.copy_(a @ b + (c if accumulate else 0))

    def ws(a, b, c, accumulate, tile):  # noqa: ANN001, ANN202
        if tile == "ws-128x128-2wg":
            raise RuntimeError("no such build")
        product(a, b, c, accumulate)

    monkeypatch.setattr(mod, "_gemm_tma", product)
    monkeypatch.setattr(mod, "_gemm_ws", ws)
    return mod


def test_the_accumulating_product_adds_once_and_a_failing_form_is_dropped(expert, monkeypatch) -> None:
    times = {"triton-tma": 0.3, "ws-128x128": 0.2}
    monkeypatch.setattr(triton.testing, "do_bench",
                        lambda fn, warmup, rep: (fn(), times[fn.args[-1] if fn.args[-1] in times else "triton-tma"])[1])
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(8, 4, generator=g), torch.randn(4, 6, generator=g)
    c = torch.randn(8, 6, dtype=torch.float32, generator=g)
    before = c.clone()
    expert._product(a, b, c, True)()  # timed (every form run several times), then run once
    torch.testing.assert_close(c, before + a @ b)
    (choice,) = expert.TIMED_CHOICES.values()
    assert choice.startswith("ws-128x128 (") and "ws-128x128-2wg failed: RuntimeError" in choice, choice
    monkeypatch.setattr(triton.testing, "do_bench", lambda *a, **k: pytest.fail("timed a shape twice"))
    assert expert._product(a, b, c, True).args[-1] == "ws-128x128"  # remembered for the shape


def test_a_failing_triton_kernel_is_raised_for_the_caller_to_fall_back(expert, monkeypatch) -> None:
    def broken(*_):  # noqa: ANN202
        raise RuntimeError("no TMA here")

    monkeypatch.setattr(expert, "_gemm_tma", broken)
    a, b, c = torch.ones(2, 2), torch.ones(2, 2), torch.zeros(2, 2)
    with pytest.raises(RuntimeError, match="no TMA here"):
        expert._product(a, b, c, False)
