"""Human-readable views of a :class:`RunResult`: the terminal table and a Markdown page."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from evaluator.result import RunResult, TaskResult, WorkloadResult
from evaluator.score_result import score_run
from evaluator.scoring import FAILURE_PENALTY_SPEEDUP, submission_score

PROVIDER_ORDER = ("baseline", "compile", "expert", "candidate", "candidate-again")


def _providers(result: RunResult) -> list[str]:
    seen = {p for t in result.tasks for w in t.workloads for p in w.timings}
    return [p for p in PROVIDER_ORDER if p in seen] + sorted(seen - set(PROVIDER_ORDER))


def _fmt_ms(w: WorkloadResult, p: str) -> str:
    t = w.timings.get(p)
    return f"{t.median_ms * 1e3:,.1f}" if t else "-"


def terminal_table(result: RunResult) -> Table:
    providers = _providers(result) if result.timing_taken else []
    table = Table(title=f"{result.command} · {result.mode} · {result.hardware.name}", show_lines=False)
    for col in ("task", "workload", "correct"):
        table.add_column(col)
    for p in providers:
        table.add_column(f"{p} µs", justify="right")
    if providers:
        table.add_column("speedup", justify="right")
        table.add_column("SOL", justify="right")
        table.add_column("±", justify="right")
    for t in result.tasks:
        if not t.workloads:
            table.add_row(t.slug, "-", f"[red]{t.status}[/red]: {t.reason[:80]}")
            continue
        if _stopped_part_way(t):
            table.add_row(t.slug, "(rest)", f"[red]{t.status}[/red]: {t.reason[:80]}")
        for w in t.workloads:
            mark = "[green]yes[/green]" if w.correct else "[red]no[/red]"
            row = [t.slug, w.name, mark]
            row += [_fmt_ms(w, p) for p in providers]
            if providers:
                cand = w.timings.get("candidate")
                row.append(f"{w.speedup['candidate']:.2f}x" if "candidate" in w.speedup else "-")
                row.append(f"{w.sol_fraction['candidate']:.0%}" if "candidate" in w.sol_fraction else "-")
                row.append(f"{cand.rel_stderr:.2%}" if cand else "-")
            table.add_row(*row)
    return table


def score_lines(result: RunResult) -> list[str]:
    """The task speedups S and the Performance Score as the board computes them
    (:mod:`evaluator.score_result`, SCORING.md): a workload's speedup capped at the speed of light,
    a failed task at the penalty, the score over the tasks of this run (the board's is over the
    whole suite, where a task not submitted also counts at the penalty)."""
    if not result.timing_taken or not any("candidate" in w.timings for t in result.tasks for w in t.workloads):
        return []
    scores = score_run(result)
    lines = []
    for slug, sc in scores.items():
        if sc.correct and sc.speedup is not None:
            sol = f", SOL {sc.sol_fraction:.0%}" if sc.sol_fraction is not None else ""
            lines.append(f"{slug}: S = {sc.speedup:.2f}x{sol}")
        else:
            why = sc.findings[0] if sc.findings else "failed"
            lines.append(f"{slug}: failed, counts {FAILURE_PENALTY_SPEEDUP}x ({why})")
    total = submission_score(scores, list(scores))
    lines.append(f"Performance Score over these {total.suite_size} task(s): {total.performance_score:.3f} "
                 f"({total.correct_count} correct)")
    return lines


def print_result(result: RunResult, console: Console) -> None:
    console.print(terminal_table(result))
    for line in score_lines(result):
        console.print(line, soft_wrap=True, markup=False)
    for t in result.tasks:
        if t.status != "correct":
            console.print(f"[red]{t.slug}: {t.status} ({t.error_code})[/red] {t.reason}", soft_wrap=True)
        for f in t.findings:
            line = f" (line {f.line})" if f.line else ""
            console.print(f"[yellow]{t.slug}: finding[/yellow] {f.kind}{line}: {f.message}")
        for w in t.workloads:
            for f in w.findings:
                console.print(f"[yellow]{t.slug}/{w.name}:[/yellow] {f}")
    if result.note:
        console.print(f"[bold]{result.note}[/bold]", soft_wrap=True)


def ceilings_line(result: RunResult) -> str:
    """The ceilings a run's SOL fractions rest on, as a page's header words them."""
    hw = result.hardware
    return f"{hw.memory_bandwidth_gbs:,.0f} GB/s, " + ", ".join(f"{k} {v:g} TFLOP/s" for k, v in hw.peak_tflops.items())


def hold_line(result: RunResult) -> str:
    """How the run's calls were held before timing (docs/engine.md, the pre-call hold): short
    calls read slower without it, so a page must say which rows had it."""
    if not result.timing_taken:
        return "No timing was taken."
    if not result.timing:
        return "Timed before results recorded their timing settings, so without the pre-call hold."
    spin = float(result.timing.get("spin_us", 0.0))
    if spin > 0 and result.mode == "gpu":
        return f"Every timed call was preceded by a {spin:g} µs hold of every SM (the pre-call hold)."
    return "Timed without the pre-call hold."


def markdown(result: RunResult, command: str) -> str:
    """The ``docs/results/<profile>.md`` page: per workload times, speedups, SOL and spread."""
    fp = result.fingerprint
    providers = _providers(result)
    lines = [
        f"# Measured on {fp.gpu_name or result.hardware.name}",
        "",
        f"Command: `{command}`",
        "",
        f"Engine {result.engine_version}, torch {fp.torch}, triton {fp.triton}, CUDA {fp.cuda}, driver "
        f"{fp.driver}, {fp.sm_count} SMs, started {result.started_at}. SM clock at start/end: "
        f"{fp.clocks_start.get('clocks.sm', '?')}/{fp.clocks_end.get('clocks.sm', '?')} MHz. Ceilings used for "
        f"SOL (profile `{result.hardware.name}`): {ceilings_line(result)} ({result.hardware.provenance}). "
        f"{hold_line(result)}",
        "",
        "Times are medians of device-event timings in µs (L2 flushed before every call, inputs rotated, "
        "providers interleaved); speedup is eager baseline / provider; SOL is the speed-of-light time over "
        "the median; ± is the standard error of the candidate's mean relative to its median.",
        "",
    ]
    head = ["task", "workload", "correct", *[f"{p} µs" for p in providers], "speedup vs eager",
            "speedup vs compile", "SOL fraction", "±", "n", "stop"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for t in result.tasks:
        if not t.workloads:
            lines.append(f"| {t.slug} | - | {t.status}: {t.reason[:100]} |")
        elif _stopped_part_way(t):
            lines.append(f"| {t.slug} | (rest) | {t.status}: {t.reason[:300]} |")
        for w in t.workloads:
            cand = w.timings.get("candidate")
            comp = w.timings.get("compile")
            vs_compile = f"{comp.median_ms / cand.median_ms:.2f}x" if cand and comp else "-"
            row = [t.slug, w.name, "yes" if w.correct else "**no**", *[_fmt_ms(w, p) for p in providers],
                   f"{w.speedup['candidate']:.2f}x" if "candidate" in w.speedup else "-", vs_compile,
                   f"{w.sol_fraction['candidate']:.1%}" if "candidate" in w.sol_fraction else "-",
                   f"{cand.rel_stderr:.2%}" if cand else "-", str(cand.count) if cand else "-", w.stop_reason or "-"]
            lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    lines += _peak_memory(result, providers)
    return "\n".join(lines)


def _peak_memory(result: RunResult, providers: list[str]) -> list[str]:
    """Peak device memory per provider, for the tasks that measure it (``peak_memory = true``, e.g.
    fused-linear-cross-entropy, where not materializing the logits is the point of the kernel)."""
    rows = [(t, w) for t in result.tasks for w in t.workloads
            if any(tm.peak_mem_bytes is not None for tm in w.timings.values())]
    if not rows:
        return []
    head = ["task", "workload", *[f"{p} MiB" for p in providers]]
    lines = ["Peak device memory above the inputs, per call (MiB):", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for t, w in rows:
        cells = [f"{w.timings[p].peak_mem_bytes / 2**20:,.1f}"
                 if p in w.timings and w.timings[p].peak_mem_bytes is not None else "-" for p in providers]
        lines.append("| " + " | ".join([t.slug, w.name, *cells]) + " |")
    return [*lines, ""]


def _stopped_part_way(t: TaskResult) -> bool:
    """A task that failed as a whole (timeout, crash, error) after some workloads were judged: the
    rows of those are kept, and this row says the task itself did not finish."""
    return bool(t.workloads) and t.status not in ("correct", "incorrect")
