"""Time one expert call several ways in one process, to find where the bench's median for a short
call goes beyond the kernels' own GPU time (docs/results/h200-profiles.md).

The bench (``evaluator/worker.py``, ``_timed``) synchronizes, queues a 256 MiB L2 flush, records
a start event, calls, records an end event and synchronizes; in the bench, providers take turns
across processes, so the GPU idles between calls. For several short workloads the bench's median
was 1.5-3.5 times the kernels' Nsight time while its minimum matched it. The methods below each
remove one candidate cause, and are interleaved round by round so clocks and thermals are shared:

- ``engine``: the bench's own sequence, back to back in one process.
- ``engine+gap``: the same with a 2 ms host pause before each call, like the judge's round trip
  between interleaved providers (if idle clocks are the cause, this is the slow one).
- ``spin``: a ``torch.cuda._sleep`` spin queued after the flush and before the start event, so
  the host's launches queue behind it and the SMs are busy (host launch time and clock ramp
  both hidden).
- ``read-flush``: the L2 emptied by reading a buffer instead of writing it, so no dirty lines are
  written back while the call runs.
- ``no-sync``: calls queued back to back with no synchronize in between (events per call); the
  host runs ahead, as under a serving loop.

It also reports the host's enqueue time of one call (the wrapper and its launches, measured
without waiting for the GPU), the quantity hypothesis 1 of that page is about.

Needs a GPU. Usage:
  python3 scripts/timing_ab.py SLUG:WORKLOAD [SLUG:WORKLOAD ...] [--rounds N] [--spin-us US] > timing-ab.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

sys.path.insert(0, str(Path(__file__).resolve().parent))

from profile_kernel import load  # noqa: E402

from evaluator.hardware import HardwareProfile  # noqa: E402
from evaluator.inputs import make_inputs  # noqa: E402
from tasks.registry import get_task  # noqa: E402

METHODS = ("engine", "engine+gap", "spin", "read-flush", "no-sync")
FLUSH_BYTES = HardwareProfile.l2_flush_bytes  # the bench's flush size


def summarize(samples: dict[str, list[float]]) -> dict[str, tuple[float, float, float]]:
    """Per method: (median, minimum, first quartile) of its samples, in the samples' unit."""
    out = {}
    for method, xs in samples.items():
        if not xs:
            raise ValueError(f"no samples for {method}")
        q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
        out[method] = (statistics.median(xs), min(xs), q[0])
    return out


def _spin_cycles(spin_us: float) -> int:
    """Cycles of a ``torch.cuda._sleep`` that lasts about ``spin_us``, measured with events (the SM
    clock is not known in advance). This diagnostic keeps the one-thread spin the A/A measured;
    the engine's own spin holds every SM (evaluator/hold.py)."""
    probe = 2_000_000
    torch.cuda._sleep(probe)  # ramps the clocks up first
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(probe)
    end.record()
    torch.cuda.synchronize()
    return max(1, int(spin_us * probe / (start.elapsed_time(end) * 1e3)))


def measure(call: Callable[[], object], rounds: int, spin_us: float) -> tuple[dict[str, list[float]], list[float]]:
    """Every method once per round, in a fixed order; returns µs per method and host enqueue µs."""
    dev = torch.device("cuda")
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.float32, device=dev)
    spin_cycles = _spin_cycles(spin_us)
    samples: dict[str, list[float]] = {m: [] for m in METHODS}
    enqueue: list[float] = []
    for _ in range(rounds):
        for method in METHODS[:-1]:
            torch.cuda.synchronize()
            if method == "engine+gap":
                time.sleep(0.002)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if method == "read-flush":
                flush.sum()
            else:
                flush.zero_()
            if method == "spin":
                torch.cuda._sleep(spin_cycles)
            start.record()
            t0 = time.perf_counter()
            call()
            host = (time.perf_counter() - t0) * 1e6
            end.record()
            torch.cuda.synchronize()
            samples[method].append(start.elapsed_time(end) * 1e3)
            if method == "spin":
                enqueue.append(host)
        # no-sync: a burst of 8 calls queued without waiting, each with its flush and events
        torch.cuda.synchronize()
        events = []
        for _ in range(8):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            flush.zero_()
            s.record()
            call()
            e.record()
            events.append((s, e))
        torch.cuda.synchronize()
        samples["no-sync"].extend(s.elapsed_time(e) * 1e3 for s, e in events[1:])
    return samples, enqueue


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pairs", nargs="+", help="SLUG:WORKLOAD")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--spin-us", type=float, default=500.0, help="length of the spin before the start event")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("timing_ab.py needs a GPU: it compares ways of timing device work")
    print("# Timing methods compared (µs: median / min / first quartile)\n")
    print(f"{args.rounds} rounds; spin {args.spin_us:.0f} µs; flush {FLUSH_BYTES >> 20} MiB; "
          f"{torch.cuda.get_device_name()}; torch {torch.__version__}\n")
    print("| task | workload | host enqueue µs (median) | " + " | ".join(METHODS) + " |")
    print("|---|---|---|" + "---|" * len(METHODS))
    for pair in args.pairs:
        slug, _, name = pair.partition(":")
        task = get_task(slug)
        w = next(x for x in task.workloads() if x.name == name)
        baseline = load(task.baseline_path, f"_ab_base_{task.spec.id}")
        fn = getattr(load(task.expert_path, f"_ab_expert_{task.spec.id}"), task.spec.entry_point)
        inputs = make_inputs(task, w.params, 0, torch.device("cuda"), baseline)
        for _ in range(5):  # compile, autotune, per-shape picks
            fn(**inputs)
        samples, enqueue = measure(lambda f=fn, i=inputs: f(**i), args.rounds, args.spin_us)
        stats = summarize(samples)
        cells = " | ".join(f"{m:,.1f} / {lo:,.1f} / {q1:,.1f}" for m, lo, q1 in (stats[k] for k in METHODS))
        print(f"| {slug} | {name} | {statistics.median(enqueue):,.1f} | {cells} |", flush=True)
        del inputs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
