"""Run one provider of one task on one workload, with exactly one call inside a profiler window.

The misses on docs/results/h200.md name causes that were not profiled. Nsight Compute answers
them, but a bench run launches thousands of kernels (baseline, compile, flushes, checks); this
script launches the provider alone: ``--warmup`` calls first (Triton's compilation and any
autotuning or per-shape picking happen there), then one call between ``cudaProfilerStart`` and
``cudaProfilerStop``, so ``ncu --profile-from-start off`` records that call's kernels and nothing
else. Inputs are the workload's, from the engine's own generator. Nothing is judged or timed here.

On a machine without a GPU (``--device cpu``, with TRITON_INTERPRET=1) it runs the same steps
without the profiler calls, which is how CI checks it.

Usage: python3 scripts/profile_kernel.py SLUG WORKLOAD [--provider expert|baseline] [--warmup N] [--device cuda|cpu]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evaluator.inputs import make_inputs  # noqa: E402
from tasks.registry import Task, get_task  # noqa: E402


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def find_workload(task: Task, workload: str):
    """The task's real or smoke workload of that name; exits naming the ones it has otherwise."""
    every = task.workloads() + task.workloads(smoke=True)
    w = next((x for x in every if x.name == workload), None)
    if w is None:
        raise SystemExit(f"{task.slug} has no workload {workload!r} (it has {', '.join(x.name for x in every)})")
    return w


def run(task: Task, workload: str, provider: str, warmup: int, device: torch.device) -> int:
    """Warm up, then one call in the profiler window; returns the number of output tensors."""
    w = find_workload(task, workload)
    baseline = load(task.baseline_path, f"_prof_base_{task.spec.id}")
    module = baseline if provider == "baseline" else load(task.expert_path, f"_prof_expert_{task.spec.id}")
    fn = getattr(module, task.spec.entry_point)
    inputs = make_inputs(task, w.params, 0, device, baseline)
    for _ in range(warmup):
        fn(**inputs)
    # A route the kernel timed on its first call decides which kernels the profile shows, and the
    # pick can differ from the bench's (session 29: the w4a16 W2 profile ran the 64-column route
    # the bench never took), so say which ran.
    for choice, value in getattr(module, "TIMED_CHOICES", {}).items():
        print(f"timed choice: {choice}: {value}")
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
    out = fn(**inputs)
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
    return len(out) if isinstance(out, tuple | list) else 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("slug")
    ap.add_argument("workload")
    ap.add_argument("--provider", choices=("expert", "baseline"), default="expert")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    n = run(get_task(args.slug), args.workload, args.provider, args.warmup, torch.device(args.device))
    print(f"{args.slug} {args.workload} {args.provider}: one profiled call, {n} output(s)")


if __name__ == "__main__":
    main()
