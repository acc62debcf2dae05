"""Fill torch.compile's on-disk caches for one task's workloads, so a later bench compiles from cache.

``bench --compare compile`` compiles the eager baseline once per workload shape inside the timed
run, one task after another; on a GPU machine with many cores that compile time, not the timing,
dominates a full-suite run. Inductor's FX-graph and autotuning caches are keyed on the traced
graph, not on the function object, so compiling the same baseline on same-shaped inputs here, in
parallel processes ahead of the bench, makes the bench's compiles cache hits. Nothing here is
timed or judged; a failure only costs the cache.

Usage: python3 scripts/warm_compile.py SLUG [SLUG ...]
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evaluator.inputs import make_inputs  # noqa: E402
from tasks.registry import get_task  # noqa: E402


def warm(slug: str) -> None:
    task = get_task(slug)
    spec = importlib.util.spec_from_file_location(f"_warm_{task.spec.id}", task.baseline_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, task.spec.entry_point)
    device = torch.device("cuda")
    for w in task.workloads():
        t0 = time.perf_counter()
        try:
            inputs = make_inputs(task, w.params, 0, device, module)
            torch.compile(fn, dynamic=False)(**inputs)
            torch.cuda.synchronize()
            print(f"{slug} {w.name}: compiled in {time.perf_counter() - t0:.1f} s", flush=True)
        except Exception as exc:  # noqa: BLE001 - a warm-up failure is reported, never fatal
            print(f"{slug} {w.name}: warm-up failed: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
        torch._dynamo.reset()
        torch.cuda.empty_cache()


if __name__ == "__main__":
    for name in sys.argv[1:]:
        warm(name)
