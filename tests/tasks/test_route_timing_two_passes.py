"""Every expert that picks a route by timing it on a shape's first call times each route twice.

Why: a single pass lets one slow timing decide for the life of the process. On an H100 a shape's
first call once timed every w4a16 route 30-80% slow, and another run one route 70% slow (session
29, docs/results/h100.md); w4a16 has timed two passes since. Session 33 gave the same rule to the
other experts that choose by timing (``_fastest`` in each: every route run once outside the
timing, then two passes, the second in the opposite order, each route keeping its faster time).
``do_bench`` only runs on a GPU, so here it is replaced by a script of times in which a single
pass would pick the wrong route; the pick sites' own wiring (each decode candidate launched as
itself, causal-conv1d's state put back) is checked the same way. Each expert is one self-contained file (the sandbox loads it
alone), so each carries its own copy; this test holds them to one behaviour.
"""

from __future__ import annotations

import ast

import pytest
import triton.testing

from evaluator.modules import load_module
from tasks.registry import get_task

#: The experts that choose among routes by timing them, and where their picks are remembered.
TIMED = ["topk-topp-sampling", "causal-conv1d", "fp8-blockwise-gemm", "int8-w8a8-scaled-gemm",
         "gated-delta-rule-chunked"]
#: ms per (route, pass): "c" would win a single pass, because b's first timing is the slow one-off.
SCRIPT = {("a", 0): 0.200, ("b", 0): 0.150, ("c", 0): 0.120, ("c", 1): 0.125, ("b", 1): 0.090, ("a", 1): 0.100}


def _expert(slug: str):
    return load_module(get_task(slug).expert_path, f"_two_pass_{slug.replace('-', '_')}")


def _scripted(monkeypatch, routes: dict, fixed: dict | None = None) -> list[str]:
    """Replace do_bench by SCRIPT for the routes (and ``fixed`` ms for launches timed once);
    returns the list of what was timed, in order."""
    calls: list[str] = []
    owner = {id(fn): name for name, fn in routes.items()}

    def do_bench(fn, warmup, rep):  # noqa: ANN001, ANN202 - the signature the experts call
        name = owner[id(fn)]
        calls.append(name)
        if fixed and name in fixed:
            return fixed[name]
        return SCRIPT[(name, calls.count(name) - 1)]

    monkeypatch.setattr(triton.testing, "do_bench", do_bench)
    return calls


def _routes(log: list[str]) -> dict:
    return {name: (lambda name=name: log.append(name)) for name in "abc"}


@pytest.mark.parametrize("slug", TIMED)
def test_fastest_times_two_passes_and_keeps_each_routes_best(slug, monkeypatch) -> None:
    expert = _expert(slug)
    warmed: list[str] = []
    routes = _routes(warmed)
    calls = _scripted(monkeypatch, routes)
    restored: list[int] = []
    pick, times = expert._fastest(routes, restore=lambda: restored.append(len(calls)))
    assert pick == "b"
    assert times == {"a": 0.100, "b": 0.090, "c": 0.120}
    assert warmed == ["a", "b", "c"]  # each route run once (compiled, autotuned) before any timing
    assert calls == ["a", "b", "c", "c", "b", "a"]  # two passes, the second reversed
    # The state a route changes in place is restored after each warm-up run and each timing.
    assert restored == [0, 0, 0, 1, 2, 3, 4, 5, 6]


def test_topk_split_route_pick_uses_both_passes(monkeypatch) -> None:
    expert = _expert("topk-topp-sampling")
    routes = _routes([])
    calls = _scripted(monkeypatch, routes)
    assert expert._pick_route(routes, (256, 128256, 5)) is routes["b"]
    assert expert.TIMED_CHOICES["split route B=256 V=128256 slices=5"] == "b (a 100 us, b 90 us, c 120 us)"
    assert expert._pick_route(routes, (256, 128256, 5)) is routes["b"] and len(calls) == 6  # remembered


def test_gated_delta_phase_one_pick_uses_both_passes(monkeypatch) -> None:
    expert = _expert("gated-delta-rule-chunked")
    ran: list[str] = []
    wy = _routes(ran)
    rest = {"state": lambda: ran.append("state"), "out": lambda: ran.append("out")}
    calls = _scripted(monkeypatch, {**wy, **rest}, fixed={"state": 0.5, "out": 0.25})
    key = (4096, 32, 128, 128, 8)
    assert expert._time_phases(wy, rest, key) == "b"
    assert expert._WY_PICK[key] == "b"
    assert calls == ["a", "b", "c", "c", "b", "a", "state", "out"]
    # The later phases run once warmed, on phase 1's outputs, and are timed for the report only.
    assert ran == ["a", "b", "c", "state", "out"]
    assert expert.TIMED_CHOICES["phase 1 T=4096 HV=32 K=128 V=128 N=8"] == (
        "b (a 100 us, b 90 us, c 120 us; then state 500 us, out 250 us)")


@pytest.mark.parametrize("slug", ["fp8-blockwise-gemm", "int8-w8a8-scaled-gemm"])
def test_decode_pick_launches_each_candidate_as_itself_and_keeps_the_best(slug, monkeypatch) -> None:
    """The decode pick builds one launch per candidate tile in a loop: each launch must run its own
    candidate (a closure over the loop variable would run the last one every time)."""
    expert = _expert(slug)
    launched: list[tuple] = []
    cands = list(expert._DECODE)
    assert len(cands) >= 2

    def decode(*args, on_cpu):  # noqa: ANN002, ANN202 - the expert's _decode(*args, cand, on_cpu=...)
        assert on_cpu is False and args[:-1] == ("args",)
        launched.append(args[-1])

    # A single pass would keep the first candidate; the second pass finds the last one faster.
    def do_bench(fn, warmup, rep):  # noqa: ANN001, ANN202
        fn()
        c = launched[-1]
        first_pass = launched.count(c) == 2  # the warm-up run, then this timing
        return {True: 0.1 if c == cands[0] else 0.3, False: 0.05 if c == cands[-1] else 0.3}[first_pass]

    monkeypatch.setattr(expert, "_decode", decode)
    monkeypatch.setattr(triton.testing, "do_bench", do_bench)
    key = (8, 4096, 7168, "bf16", "cuda")
    expert._decode_timed(("args",), key, 8, 4096, 7168)
    assert expert._DECODE_PICK[key] == cands[-1]
    n = len(cands)
    assert launched[:n] == cands  # each candidate warmed once, as itself
    assert sorted(launched[n:3 * n]) == sorted(cands * 2)  # then timed twice each
    assert launched[-1] == cands[-1]  # and the call itself runs the pick
    assert expert.TIMED_CHOICES["decode M=8 N=4096 K=7168"].startswith(f"{cands[-1]} (")


def test_causal_conv1d_route_pick_restores_the_state_it_changes(monkeypatch) -> None:
    """Every causal-conv1d route updates conv_state in place: the pick's runs and timings must leave
    the caller's state as it was, so the call that follows starts from it."""
    import torch

    expert = _expert("causal-conv1d")
    state = torch.zeros(4)
    routes = {"tile": lambda: state.add_(1.0), "rolling": lambda: state.add_(10.0)}

    def do_bench(fn, warmup, rep):  # noqa: ANN001, ANN202
        fn()
        fn()
        return 0.2 if state[0] >= 10 else 0.1

    monkeypatch.setattr(triton.testing, "do_bench", do_bench)
    key = (4096, 1, 2048, 4, 0, "bf16", "cuda")
    pick = expert._route_timed(routes, key, state)
    assert pick is routes["tile"] and torch.equal(state, torch.zeros(4))
    assert expert.TIMED_CHOICES["route T=4096 N=1 D=2048 W=4 varlen=0"] == "tile (tile 100 us, rolling 200 us)"
    assert expert._route_timed(routes, key, state) is routes["tile"]  # remembered


@pytest.mark.parametrize("slug", TIMED)
def test_no_expert_times_a_choice_outside_fastest(slug) -> None:
    """``do_bench`` is called in ``_fastest`` alone, except gated-delta's report of its later
    phases (``_time_phases``), which chooses nothing; and the pick sites call ``_fastest``."""
    tree = ast.parse(get_task(slug).expert_path.read_text())
    benched_in: set[str] = set()
    fastest_from: set[str] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef):
            for node in ast.walk(fn):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    if node.func.id == "do_bench":
                        benched_in.add(fn.name)
                    if node.func.id == "_fastest":
                        fastest_from.add(fn.name)
    allowed = {"_fastest", "_time_phases"} if slug == "gated-delta-rule-chunked" else {"_fastest"}
    assert benched_in and benched_in <= allowed, benched_in
    assert fastest_from, "no route pick calls _fastest"
