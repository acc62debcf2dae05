"""scripts/warm_compile.py's per-workload limit: a compile the bench could not use is given up."""

from __future__ import annotations

import contextlib
import importlib.util
import signal
import time

from tasks.registry import REPO_ROOT


def _module():
    spec = importlib.util.spec_from_file_location("warm_compile", REPO_ROOT / "scripts/warm_compile.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_limit_interrupts_code_that_swallows_exceptions_and_restores_the_handler() -> None:
    warm = _module()
    before = signal.getsignal(signal.SIGALRM)
    t0 = time.perf_counter()
    try:
        with warm.time_limit(0.2):
            while True:  # like a compile stack that catches Exception and carries on
                with contextlib.suppress(Exception):
                    time.sleep(0.02)
        raise AssertionError("the limit did not fire")
    except warm.WarmTimeout as exc:
        assert "gave up after 0.2 s" in str(exc)
    assert 0.15 < time.perf_counter() - t0 < 2.0
    assert signal.getsignal(signal.SIGALRM) == before
    with warm.time_limit(5.0):  # work that finishes in time is left alone, and the alarm is cleared
        time.sleep(0.01)
    time.sleep(0.05)
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_the_default_limit_is_below_what_the_bench_gives_a_compile_call() -> None:
    """The bench's compile provider gets min(optional_call_s, half the task's time left) per call:
    a warm-up allowed longer than that would fill a cache the bench cannot reach."""
    from evaluator.timing_config import TimingConfig

    warm = _module()
    assert 0 < warm.DEFAULT_PER_WORKLOAD_S < TimingConfig().optional_call_s
