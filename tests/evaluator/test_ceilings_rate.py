"""``evaluator.ceilings._rate``: a ceiling is the better of a product's back-to-back median and
its isolated-call median (a ceiling the expert can beat is no ceiling: session 32's H100 ran
FLCE at 1.05x of a back-to-back-only figure). The GPU timers are replaced by scripted times."""

from __future__ import annotations

import itertools

import pytest
import torch
import triton.testing

from evaluator import ceilings


class _Event:
    """A CUDA event whose elapsed time comes from a script of isolated-call times."""

    script: itertools.cycle

    def __init__(self, enable_timing: bool) -> None:
        assert enable_timing

    def record(self) -> None:
        """Nothing to record: the scripted times stand for the device's clock."""

    def synchronize(self) -> None:
        """Nothing to wait for: no device work is queued."""

    def elapsed_time(self, end: _Event) -> float:
        return next(self.script)


@pytest.fixture(autouse=True)
def _no_gpu(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "Event", _Event)
    monkeypatch.setattr(ceilings, "IDLE_S", 0.0)


@pytest.mark.parametrize(("back_to_back_ms", "isolated_ms", "tflops"), [
    (2.0, [1.0, 1.5, 1.0], 4000.0),  # isolated calls faster: their median, 1 ms
    (2.0, [4.0, 3.0], 2000.0),  # back to back faster
])
def test_the_rate_is_the_better_of_the_two_medians(monkeypatch, back_to_back_ms, isolated_ms, tflops) -> None:
    monkeypatch.setattr(triton.testing, "do_bench", lambda fn, **_: back_to_back_ms)
    _Event.script = itertools.cycle(isolated_ms)
    ran = []
    assert ceilings._rate(lambda: ran.append(1), 4 * 10**12) == pytest.approx(tflops)
    assert len(ran) == ceilings.BURSTS  # each isolated call ran the product once
