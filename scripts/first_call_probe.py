"""What a kernel picks by timing on its first call, in a plain call and in a call inside the ATen-op
recorder (how the worker made a candidate's first check until session 35), alternating, in one
process.

Why: a kernel that times its own routes or configurations does so on its first call of a shape.
In a bench the candidate's first call is its first correctness trial, which the worker made inside
``evaluator.aten_record.AtenRecorder`` (a Python ``TorchDispatchMode``), while the trusted
expert's first call was, and is, its plain warm-up. Session 34's H100 round of fp8-blockwise-gemm
timed the same expert file in both roles and the two processes chose different decode tiles at
W4: the expert (128, 4, 4, 2) at 61 us, the candidate (128, 4, 4, 4) from times 1-25% higher across
the four tiles (docs/results/h100.md, session 34), so its column read 67.3 against 61.2 us. The
suspicion: the recorder's per-op Python cost delays the launches inside a kernel's own
``do_bench`` (the L2 flush's ``zero_`` and the launcher's allocations are ATen ops), so a
candidate's own timings read high and can pick wrong. This script measures that directly: each
round loads the kernel afresh (so its pick caches and autotuners start empty), calls it once plain
and once recorded (the order alternating between rounds), and reports each call's wall time and
everything it chose by timing (``evaluator.worker.timed_picks``, what the results' ``autotune``
report holds), and the host cost of one ATen op plain and inside the recorder.

Session 35 ran it on an H100 (docs/results/h100-runs/s35-fcp-*.md): fp8-blockwise W4's recorded
first calls picked a slower tile in 3 of 6 rounds, its plain ones in none. The judge has since
made a workload's first candidate call outside the recorder (``evaluator.judge.Judge.run_trial``);
the script stays to measure other kernels' first calls the same way.

Usage: python3 scripts/first_call_probe.py SLUG WORKLOAD [--rounds N] [--file PATH]
           [--json PATH] [--markdown PATH]
On the CPU (the interpreter) the experts time nothing, so the picks are empty; CI runs it there
to check the mechanics.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from profile_kernel import find_workload, load  # noqa: E402

from evaluator.aten_record import AtenRecorder  # noqa: E402
from evaluator.inputs import clone_inputs, make_inputs  # noqa: E402
from evaluator.worker import timed_picks  # noqa: E402
from tasks.registry import Task, get_task  # noqa: E402

MODES = ("plain", "recorded")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


#: The ATen ops a launcher and ``do_bench`` dispatch around a kernel: an output allocation, a view
#: and the L2 flush's ``zero_`` (its buffer here is small: the host's cost is what is measured).
HOST_OPS = 3


def host_cost_us(device: torch.device, calls: int = 20000, blocks: int = 4) -> dict[str, float]:
    """Host microseconds an ATen op costs, plain and inside the recorder: ``HOST_OPS`` ops a call,
    ``calls`` calls a block, the modes alternating block by block, each keeping its fastest block
    (the first block of either pays one-time set-up)."""
    buf = torch.empty(1024, device=device)

    def ops() -> None:
        torch.empty(64, 7168, dtype=torch.bfloat16, device=device)
        buf[:10].zero_()

    best: dict[str, float] = {}
    for b in range(blocks):
        for mode in (MODES if b % 2 == 0 else MODES[::-1]):
            t0 = time.perf_counter()
            if mode == "recorded":
                with AtenRecorder():
                    for _ in range(calls):
                        ops()
            else:
                for _ in range(calls):
                    ops()
            us = (time.perf_counter() - t0) * 1e6 / calls / HOST_OPS
            best[mode] = round(min(us, best.get(mode, us)), 2)
    _sync(device)
    return best


def probe(task: Task, workload: str, rounds: int, device: torch.device, path: Path | None = None) -> list[dict[str, Any]]:
    """One row per first call: round, mode, wall ms of the call, the ATen ops the recorder saw
    (recorded calls only) and the picks. ``path`` is the kernel file (default: the expert)."""
    w = find_workload(task, workload)
    baseline = load(task.baseline_path, f"_fcp_base_{task.spec.id}")
    inputs = make_inputs(task, w.params, 0, device, baseline)
    kernel = path or task.expert_path
    rows: list[dict[str, Any]] = []
    for r in range(rounds):
        for mode in (MODES if r % 2 == 0 else MODES[::-1]):
            module = load(kernel, f"_fcp_{r}_{mode}_{task.spec.id}")
            fn = getattr(module, task.spec.entry_point)
            args = clone_inputs(inputs)  # in-place tasks must start every first call from the same state
            _sync(device)
            t0 = time.perf_counter()
            if mode == "recorded":
                with AtenRecorder() as recorder:
                    fn(**args)
                ops = sorted(recorder.ops)
            else:
                fn(**args)
                ops = []
            _sync(device)
            rows.append({"round": r, "mode": mode, "first_call_ms": round((time.perf_counter() - t0) * 1e3, 1),
                         "ops": ops, "picks": timed_picks([module])})
    return rows


def markdown(slug: str, workload: str, rows: list[dict[str, Any]], host: dict[str, float]) -> str:
    """Per pick, what each mode chose in each round; then each call's wall time."""
    keys = sorted({k for row in rows for k in row["picks"]})
    lines = [f"# First-call picks of {slug} at {workload}: plain against recorded", "",
             f"Host cost of one ATen op (an allocation, a view, `zero_`): {host['plain']} µs plain, "
             f"{host['recorded']} µs inside the recorder (`host_cost_us`).", ""]
    if not keys:
        lines += ["Nothing was chosen by timing (on the CPU the experts time nothing).", ""]
    for key in keys:
        lines += [f"**{key}**", "", "| round | mode | pick |", "|---|---|---|"]
        lines += [f"| {row['round']} | {row['mode']} | {row['picks'].get(key, '-')} |" for row in rows]
        lines.append("")
    lines += ["| round | mode | first call ms |", "|---|---|---|"]
    lines += [f"| {row['round']} | {row['mode']} | {row['first_call_ms']} |" for row in rows]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("slug")
    ap.add_argument("workload")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--file", type=Path, help="the kernel file (default: the task's expert)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--markdown", type=Path)
    args = ap.parse_args()
    device = torch.device(args.device)
    rows = probe(get_task(args.slug), args.workload, args.rounds, device, args.file)
    host = host_cost_us(device)
    text = markdown(args.slug, args.workload, rows, host)
    sys.stdout.write(text)
    if args.json:
        args.json.write_text(json.dumps({"slug": args.slug, "workload": args.workload, "host_cost_us": host,
                                               "rows": rows}, indent=1))
    if args.markdown:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
