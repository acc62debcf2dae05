"""The w4a16-awq-gemm expert's first-call route pick (``_pick``) times every route twice, the second
pass in the opposite order, and keeps each route's faster time.

Why: on an H100 a shape's first call once timed every route 30-80% slow and another run timed
one route 70% slow (session 29, docs/results/h100.md), and a single pass then keeps a slower route
for the life of the process. ``do_bench`` only runs on a GPU, so here it is replaced by a script of
times: one slow first-pass timing must not decide the pick.
"""

from __future__ import annotations

import pytest
import triton.testing

from evaluator.modules import load_module
from tasks.registry import get_task


@pytest.fixture
def expert():
    return load_module(get_task("w4a16-awq-gemm").expert_path, "_w4a16_pick_test")


def test_each_route_keeps_its_faster_time_and_the_pick_follows(expert, monkeypatch) -> None:
    calls: list[str] = []
    warmed: list[str] = []
    # ms per (route, pass): "c" would win a single pass (b's first timing is the slow one-off).
    script = {("a", 0): 0.200, ("b", 0): 0.150, ("c", 0): 0.120, ("c", 1): 0.125, ("b", 1): 0.090, ("a", 1): 0.100}
    routes = {name: (lambda name=name: warmed.append(name)) for name in "abc"}
    owner = {id(fn): name for name, fn in routes.items()}

    def do_bench(fn, warmup, rep):  # noqa: ANN001, ANN202 - the signature _pick calls
        name = owner[id(fn)]
        calls.append(name)
        return script[(name, calls.count(name) - 1)]

    monkeypatch.setattr(triton.testing, "do_bench", do_bench)
    picked = expert._pick(routes, (1, 2, 3, "fp16", "cuda"))
    assert picked is routes["b"]
    assert warmed == ["a", "b", "c"]  # each route run once (compiled, autotuned) before any timing
    assert calls == ["a", "b", "c", "c", "b", "a"]  # two passes, the second reversed
    assert expert.TIMED_CHOICES["route M=1 N=2 K=3"] == "b (a 100 us, b 90 us, c 120 us)"
    # Remembered: a second call of the shape times nothing.
    assert expert._pick(routes, (1, 2, 3, "fp16", "cuda")) is routes["b"] and len(calls) == 6


def test_a_single_route_is_not_timed(expert, monkeypatch) -> None:
    monkeypatch.setattr(triton.testing, "do_bench", lambda *a, **k: pytest.fail("timed a lone route"))
    only = {"split-k": lambda: None}
    assert expert._pick(only, (4, 5, 6, "fp16", "cuda")) is only["split-k"]
