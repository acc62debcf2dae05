"""Fill torch.compile's on-disk caches for one task's workloads, so a later bench compiles from cache.

``bench --compare compile`` compiles the eager baseline once per workload shape inside the timed
run, one task after another; on a GPU machine with many cores that compile time, not the timing,
dominates a full-suite run. Inductor's FX-graph and autotuning caches are keyed on the traced
graph, not on the function object, so compiling the same baseline on same-shaped inputs here, in
parallel processes ahead of the bench, makes the bench's compiles cache hits. Nothing here is
timed or judged; a failure only costs the cache.

A workload whose compile outlasts ``--per-workload-s`` (default 90) is given up, and the task's
next workload is warmed: the bench gives the compile provider at most half of what is left of the
task's time per call, so a longer compile would not be used anyway. Session 13's first call waited
200 s on attn-varlen-sliding-window W3's compile, which the bench then cut at 41 s.

Usage: python3 scripts/warm_compile.py [--per-workload-s SECONDS] SLUG [SLUG ...]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evaluator.inputs import make_inputs  # noqa: E402
from tasks.registry import get_task  # noqa: E402

#: Seconds one workload's compile may take here. Below the bench's own limit for a compile call
#: (``TimingConfig.optional_call_s``), which a task's remaining time usually halves further.
DEFAULT_PER_WORKLOAD_S = 90.0


class WarmTimeout(BaseException):
    """Raised by the alarm: a BaseException, so that no ``except Exception`` inside torch's
    compile stack swallows it and carries on compiling."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`WarmTimeout` in this (main) thread after ``seconds`` of wall time."""
    def expire(signum: int, frame: object) -> None:
        raise WarmTimeout(f"gave up after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def warm(slug: str, per_workload_s: float) -> None:
    task = get_task(slug)
    spec = importlib.util.spec_from_file_location(f"_warm_{task.spec.id}", task.baseline_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, task.spec.entry_point)
    device = torch.device("cuda")
    for w in task.workloads():
        t0 = time.perf_counter()
        try:
            with time_limit(per_workload_s):
                inputs = make_inputs(task, w.params, 0, device, module)
                torch.compile(fn, dynamic=False)(**inputs)
                torch.cuda.synchronize()
            print(f"{slug} {w.name}: compiled in {time.perf_counter() - t0:.1f} s", flush=True)
        except WarmTimeout as exc:
            print(f"{slug} {w.name}: warm-up {exc}; the bench will compile it itself", flush=True)
        except Exception as exc:  # noqa: BLE001 - a warm-up failure is reported, never fatal
            print(f"{slug} {w.name}: warm-up failed: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
        torch._dynamo.reset()
        torch.cuda.empty_cache()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-workload-s", type=float, default=DEFAULT_PER_WORKLOAD_S)
    parser.add_argument("slugs", nargs="+")
    args = parser.parse_args(argv)
    for name in args.slugs:
        warm(name, args.per_workload_s)


if __name__ == "__main__":
    main()
