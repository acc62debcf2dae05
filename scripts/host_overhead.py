"""Per-call host time, device-event time and synced wall time of versions of one task's kernel,
side by side in one process.

Why: the engine's escape check compares the candidate's round trip (the judge's clock less the
worker's device timer) with its expert twin's, and on an H100 the w4a16 A/B was rejected on that
check in both role assignments (session 27: the old expert as the candidate, 241 us over its
twin; session 28: the Gluon route as the candidate, 837 us over). Whether a version's own host
work explains such a gap, or the worker does, needs each version's per-call host cost measured
without the engine: this script times ``fn(**inputs)`` for every given file, alternating them
call by call on the same inputs.

Each call, on a GPU: the engine's pre-call hold of every SM first (``--hold-us``,
evaluator/hold.py, here without the L2 flush, so the launches queue behind it and the events time
the kernels, not the launch, as in the worker's timed call), then
start event, the call, the host clock read (``host_us``: the Python and launch cost of the call),
end event, a synchronize (``wall_us``: host clock from before the call to after the sync) and
``event_us`` (the events). On the CPU (the interpreter) there are no events: ``event_us`` is
None and ``host_us`` equals ``wall_us``, which is what CI checks.

Usage: python3 scripts/host_overhead.py SLUG WORKLOAD FILE [FILE ...] [--calls N] [--warmup N]
           [--hold-us US] [--json PATH]   (FILE may be ``expert`` for the tree's reference)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from profile_kernel import find_workload, load  # noqa: E402

from evaluator import hold  # noqa: E402
from evaluator.inputs import make_inputs  # noqa: E402
from tasks.registry import Task, get_task  # noqa: E402


def measure(task: Task, workload: str, files: list[str], calls: int, warmup: int, hold_us: float,
            device: torch.device) -> dict[str, dict[str, Any]]:
    """Medians of host, event and wall time per call for each file, calls alternating between
    the files; also each module's ``TIMED_CHOICES`` after the run."""
    w = find_workload(task, workload)
    baseline = load(task.baseline_path, f"_ho_base_{task.spec.id}")
    paths = [task.expert_path if f == "expert" else Path(f) for f in files]
    modules = [load(p, f"_ho_{i}_{task.spec.id}") for i, p in enumerate(paths)]
    fns = [getattr(m, task.spec.entry_point) for m in modules]
    inputs = make_inputs(task, w.params, 0, device, baseline)
    cuda = device.type == "cuda"
    if cuda:  # the engine's own pre-call hold (every SM), without the flush
        layout, nothing = hold.layout_for(device), torch.empty(0, dtype=torch.float32, device=device)
    for fn in fns:
        for _ in range(warmup):
            fn(**inputs)
    if cuda:
        torch.cuda.synchronize()
    samples: list[dict[str, list[float]]] = [{"host_us": [], "event_us": [], "wall_us": []} for _ in fns]
    for _ in range(calls):
        for fn, s in zip(fns, samples, strict=True):
            if cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                hold.hold(nothing, int(hold_us * 1e3), *layout)
                t0 = time.perf_counter()
                start.record()
                fn(**inputs)
                t1 = time.perf_counter()
                end.record()
                torch.cuda.synchronize()
                t2 = time.perf_counter()
                s["event_us"].append(start.elapsed_time(end) * 1e3)
            else:
                t0 = time.perf_counter()
                fn(**inputs)
                t1 = t2 = time.perf_counter()
            s["host_us"].append((t1 - t0) * 1e6)
            s["wall_us"].append((t2 - t0) * 1e6)
    out: dict[str, dict[str, Any]] = {}
    for f, p, module, s in zip(files, paths, modules, samples, strict=True):
        row: dict[str, Any] = {k: (round(statistics.median(v), 1) if v else None) for k, v in s.items()}
        row["choices"] = dict(getattr(module, "TIMED_CHOICES", {}) or {})
        row["path"] = str(p)
        out[f] = row
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("slug")
    ap.add_argument("workload")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--hold-us", type=float, default=300.0)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    res = measure(get_task(args.slug), args.workload, args.files, args.calls, args.warmup, args.hold_us,
                  torch.device(args.device))
    for f, row in res.items():
        print(f"{args.slug} {args.workload} {f}: host {row['host_us']} us, event {row['event_us']} us, "
              f"wall {row['wall_us']} us")
    if args.json:
        args.json.write_text(json.dumps({"slug": args.slug, "workload": args.workload, "results": res}, indent=1))


if __name__ == "__main__":
    main()
