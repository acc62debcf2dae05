"""The anti-cheat run on a GPU: the cheat corpus, every expert kernel, and the protections' cost.

Writes ``anti-cheat-<part>.md`` (for docs/results/anti-cheat.md) and ``.json`` into ``--out``.
Run it through scripts/device_anticheat.sh on the device machine; it only uses the engine's
public API (``evaluator.runner.run``), so what it measures is what the portal gets.

1. The sandbox: whether bubblewrap works there, and with which namespaces.
2. The cheat corpus (tests/evaluator/cheats/), each file benched on one workload of
   silu-and-mul: every one must fail, with the code this script expects on a GPU.
3. The expert kernel of every task as the candidate: ``check`` on every workload, then ``bench``
   on its first workload with a short timing budget; each must be correct and clean.
4. The overhead: one task (silu-and-mul, expert as the candidate) judged with every protection,
   without bubblewrap, and without bubblewrap, fresh inputs, checked timed calls and the judge's
   flush; wall time of the whole task and the medians, so a change in the numbers shows too.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from evaluator import errors, sandbox  # noqa: E402
from evaluator.cli import timing_overrides  # noqa: E402
from evaluator.result import TaskResult  # noqa: E402
from evaluator.runner import RunOptions, run  # noqa: E402
from evaluator.timing_config import TimingConfig  # noqa: E402
from tasks.registry import get_task, load_tasks  # noqa: E402

CHEATS = REPO / "tests" / "evaluator" / "cheats"
TASK = "silu-and-mul"
FAST = {"budget_s": 1.0, "max_count": 300, "min_count": 20}
#: What each planted cheat must fail with on a GPU.
EXPECTED = {
    "torch_fallback.py": {errors.USER_FORBIDDEN},
    "pointer_cache.py": {errors.USER_WRONG_ANSWER},
    "count_calls.py": {errors.USER_TIMED_MISMATCH},
    "side_stream.py": {errors.USER_TIMING_INTEGRITY, errors.USER_TIMED_MISMATCH},
    "escape_after_timer.py": {errors.USER_TIMING_INTEGRITY},
    "input_view.py": {errors.USER_WRONG_ANSWER},
    "lazy_output.py": {errors.USER_WRONG_ANSWER},
    "patch_timer.py": {errors.USER_TAMPER},
    "patch_harness_clock.py": {errors.USER_TAMPER},
    "patch_comparison.py": {errors.USER_WRONG_ANSWER},
    "forge_channel.py": {errors.USER_PROTOCOL},
    "read_reference.py": {errors.USER_IMPORT},
    "early_exit.py": {errors.USER_EXIT},
    "hang.py": {errors.USER_TIMEOUT},
    "segfault.py": {errors.USER_CRASH},
    "host_oom.py": {errors.USER_HOST_OOM},
    "gpu_oom.py": {errors.USER_GPU_OOM},
    "illegal_address.py": {errors.USER_ILLEGAL_ADDRESS},
    "spawn.py": {errors.USER_PROCESS},
    "fork_python.py": {errors.USER_PROCESS},
    "write_outside.py": {errors.USER_WRONG_ANSWER},
    "network.py": {errors.USER_WRONG_ANSWER},
    "stdout_flood.py": {errors.USER_OUTPUT_FLOOD},
    "probe_recorder.py": {errors.USER_FORBIDDEN},
    "unblock_library.py": {errors.USER_TAMPER},
    "conv_gemm.py": {errors.USER_FORBIDDEN},
}
#: Cheats written for another task than TASK, with the workload they run on there.
CHEAT_TASKS = {"conv_gemm.py": ("w4a16-awq-gemm", "W1")}
#: Cheats honest in the correctness trials: only the bench's timed calls show them.
TIMING_CHEATS = {"count_calls.py", "side_stream.py", "escape_after_timer.py", "probe_recorder.py",
                 "unblock_library.py"}


def judge(kernel: Path, slug: str, command: str, workloads: list[str], compare: list[str] | None = None,
          timing: dict | None = None, timeout_s: float = 240) -> tuple[TaskResult, float]:
    opts = RunOptions(command=command, workloads=workloads, compare=compare or [], timeout_s=timeout_s,
                      timing=timing or {}, label=kernel.name)
    t0 = time.perf_counter()
    (task,) = run([get_task(slug)], lambda _t: kernel, opts, candidate_path=kernel).tasks
    return task, time.perf_counter() - t0


def cheat_row(name: str, workload: str) -> dict:
    command = "bench" if name in TIMING_CHEATS else "check"
    slug, workload = CHEAT_TASKS.get(name, (TASK, workload))
    task, wall = judge(CHEATS / name, slug, command, [workload], timing=FAST,
                       timeout_s=60 if name == "hang.py" else 240)
    caught = task.status != "correct" and task.error_code in EXPECTED[name]
    return {"cheat": name, "task": slug, "command": command, "status": task.status, "code": task.error_code,
            "verdict": task.verdict, "reason": task.reason[:600].replace("\n", " "), "caught": caught,
            "wall_s": round(wall, 1)}


def round_trip_us(timings: dict) -> str:
    """Per provider, the median round trip around its device time in µs (first half / second
    half of its timed calls): what the escape check compares, shown so a note can be explained."""
    cells = []
    for name, t in sorted(timings.items()):
        if t.residual_ms is None:
            continue
        halves = ""
        if t.residual_first_half_ms is not None:
            halves = f" ({t.residual_first_half_ms * 1e3:.0f}/{t.residual_second_half_ms * 1e3:.0f})"
        cells.append(f"{name} {t.residual_ms * 1e3:.0f}{halves}")
    return ", ".join(cells)


def expert_rows(command: str, jobs: int, only: list[str], save: Callable[[], None], rows: list[dict]) -> list[dict]:
    """Every task's expert kernel as the candidate: ``check`` on every workload (several tasks at
    once: correctness does not time anything), or ``bench`` on the first workload (one at a time)."""

    def one(t) -> dict:  # noqa: ANN001
        workloads = [] if command == "check" else [t.workloads()[0].name]
        task, wall = judge(t.expert_path, t.slug, command, workloads, timing=FAST, timeout_s=540)
        flagged = [f for w in task.workloads for f in w.findings] + [f.message for f in task.findings]
        return {"task": t.slug, "command": command, "status": task.status, "verdict": task.verdict,
                "code": task.error_code, "reason": task.reason[:600], "findings": flagged[:5],
                "wall_s": round(wall, 1), "ok": task.status == "correct" and task.verdict == "clean",
                "speedup": {w.name: round(w.speedup.get("candidate", 0.0), 3) for w in task.workloads if w.speedup},
                "host_over_device": {w.name: round(w.timings["candidate"].host_over_device, 3)
                                     for w in task.workloads if "candidate" in w.timings},
                "round_trip_us": {w.name: round_trip_us(w.timings) for w in task.workloads if w.timings}}

    tasks = [t for t in load_tasks().tasks if not only or t.slug in only]

    def done(t) -> None:  # noqa: ANN001
        rows.append(one(t))
        save()  # a call cut off at its time limit still leaves the rows it finished

    if command == "check":
        with cf.ThreadPoolExecutor(max_workers=jobs) as pool:
            list(pool.map(done, tasks))
    else:
        for t in tasks:
            done(t)
    return rows


def overhead_rows(workload: str, repeats: int) -> list[dict]:
    kernel = get_task(TASK).expert_path
    settings = [
        ("every protection", "auto", {}),
        ("no bubblewrap", "off", {}),
        ("no bubblewrap, no fresh inputs, no checked timed calls, no judge flush", "off",
         {"fresh_inputs": 0, "check_probability": 0.0, "max_checks": 0, "judge_flush": 0}),
    ]
    rows = []
    saved = os.environ.get("D2K_SANDBOX")
    try:
        for _ in range(repeats):
            for label, mode, extra in settings:
                os.environ["D2K_SANDBOX"] = mode
                task, wall = judge(kernel, TASK, "bench", [workload], timing={**FAST, **extra})
                w = task.workloads[0] if task.workloads else None
                rows.append({"setting": label, "status": task.status, "wall_s": round(wall, 2),
                             "baseline_ms": w.timings["baseline"].median_ms if w and w.timings else None,
                             "candidate_ms": w.timings["candidate"].median_ms if w and w.timings else None,
                             "checked_calls": w.timings["candidate"].checked_calls if w and w.timings else None})
    finally:
        if saved is None:
            os.environ.pop("D2K_SANDBOX", None)
        else:
            os.environ["D2K_SANDBOX"] = saved
    return rows


def markdown(report: dict) -> str:
    lines = ["# Anti-cheat run on the GPU", "",
             f"Command: `bash scripts/device_anticheat.sh --part {report['part']}"
             + (f" --cheats {report['cheats_only']}" if report.get("cheats_only") else "")
             + f"` ({report['when']}, {report['gpu']}).",
             "",
             "Timing overrides of every judged run: "
             + ", ".join(f"{k}={v}" for k, v in sorted(report.get("timing", {}).items()))
             + (f"; pre-call hold {report['timing_effective']['spin_us']:g} µs" if "timing_effective" in report else "")
             + " (the full settings are in the JSON's timing_effective).",
             "",
             f"Sandbox: {report['sandbox']}"]
    if report.get("cheats"):
        lines += ["", "## Cheat corpus (tests/evaluator/cheats/)", "",
                  "| cheat | command | caught | code | verdict | reason | wall s |", "|---|---|---|---|---|---|---|"]
    for r in report.get("cheats", []):
        lines.append(f"| {r['cheat']} | {r['command']} | {'yes' if r['caught'] else '**NO**'} | {r['code']} | "
                     f"{r['verdict']} | {r['reason'][:160].replace('|', '/')} | {r['wall_s']} |")
    for part, title in (("experts_check", "Expert kernels: check, every workload"),
                        ("experts_bench", "Expert kernels: bench, first workload, short budget")):
        if not report.get(part):
            continue
        lines += ["", f"## {title}", "",
                  "| task | status | verdict | speedup | host/device | round trip µs (1st/2nd half) "
                  "| findings / reason | wall s |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in report[part]:
            note = "; ".join(r["findings"])[:200] or r["reason"][:200] or "-"
            trips = "; ".join(f"{w}: {v}" for w, v in r.get("round_trip_us", {}).items() if v) or "-"
            lines.append(f"| {r['task']} | {r['status']} | {r['verdict']} | {r['speedup'] or '-'} | "
                         f"{r['host_over_device'] or '-'} | {trips} | {note.replace('|', '/')} | {r['wall_s']} |")
    if report.get("overhead"):
        lines += ["", f"## Overhead: one task ({TASK}, expert as candidate, workload {report['overhead_workload']})",
                  "", "| setting | status | task wall s | baseline median ms | candidate median ms | checked calls |",
                  "|---|---|---|---|---|---|"]
    for r in report.get("overhead", []):
        lines.append(f"| {r['setting']} | {r['status']} | {r['wall_s']} | {r['baseline_ms']} | {r['candidate_ms']} | "
                     f"{r['checked_calls']} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--jobs", type=int, default=4, help="correctness-only cheats judged at once")
    parser.add_argument("--workload", default="W3", help="the silu-and-mul workload the cheats run on")
    parser.add_argument("--repeats", type=int, default=2, help="rounds of the overhead comparison")
    parser.add_argument("--part", choices=("cheats", "experts-check", "experts-bench"), required=True,
                        help="cheats: the corpus and the overhead; experts-check: every expert kernel, check on "
                             "every workload; experts-bench: every expert kernel, bench on its first workload")
    parser.add_argument("--tasks", default="", help="experts only: a comma list of task slugs (default: all)")
    parser.add_argument("--cheats", default="", help="cheats only: a comma list of cheat files (default: the "
                        "whole corpus); with a list, the overhead comparison is left out")
    parser.add_argument("--timing", action="append", default=[], metavar="KEY=NUMBER",
                        help="a TimingConfig override for every judged run, e.g. spin_us=300 (repeatable)")
    args = parser.parse_args()
    FAST.update(timing_overrides(args.timing))
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    ok, why = sandbox.probe()
    report: dict = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "part": args.part,
                    "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU",
                    "sandbox": (f"bubblewrap works, namespaces {','.join(sandbox.namespaces())}" if ok
                                else f"bubblewrap UNUSABLE: {why}"),
                    "overhead_workload": args.workload, "timing": dict(FAST), "cheats_only": args.cheats,
                    "timing_effective": TimingConfig.from_dict(FAST).record()}
    stem = f"anti-cheat-{args.part}"
    lock = threading.Lock()

    def save() -> None:
        with lock:
            (args.out / f"{stem}.json").write_text(json.dumps(report, indent=2) + "\n")
            (args.out / f"{stem}.md").write_text(markdown(report))

    print(report["sandbox"], flush=True)
    t0 = time.perf_counter()
    only = [s for s in args.tasks.split(",") if s]
    if args.part == "cheats":
        chosen = [n for n in args.cheats.split(",") if n] or list(EXPECTED)
        unknown = sorted(set(chosen) - set(EXPECTED))
        if unknown:
            raise SystemExit(f"not in the corpus: {', '.join(unknown)}")
        untimed = [n for n in chosen if n not in TIMING_CHEATS]
        with cf.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            rows = list(pool.map(lambda n: cheat_row(n, args.workload), untimed))
        rows += [cheat_row(n, args.workload) for n in sorted(TIMING_CHEATS) if n in chosen]
        report["cheats"] = sorted(rows, key=lambda r: r["cheat"])
        save()
        print(f"cheats: {sum(r['caught'] for r in rows)}/{len(rows)} caught ({time.perf_counter() - t0:.0f} s)",
              flush=True)
        if not args.cheats:
            report["overhead"] = overhead_rows(args.workload, args.repeats)
    else:
        part = args.part.replace("-", "_")
        report[part] = []
        expert_rows(args.part.split("-")[1], args.jobs, only, save, report[part])
        print(f"{args.part}: {sum(r['ok'] for r in report[part])}/{len(report[part])} clean "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)
    save()
    stem = f"anti-cheat-{args.part}"
    print(markdown(report))
    failed = [r["cheat"] for r in report.get("cheats", []) if not r["caught"]]
    failed += [r["task"] for part in ("experts_check", "experts_bench") for r in report.get(part, []) if not r["ok"]]
    print("NOT CAUGHT / NOT CLEAN: " + (", ".join(failed) or "none"), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
