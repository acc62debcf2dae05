"""The suite summary of a results page: targets per workload and the geometric means of the suite.

``docs/results/<profile>.md`` ends with this (issue 5): correctness over the tasks, the
geometric-mean expert speedup over eager and over torch.compile, the geometric-mean SOL fraction,
and every workload that misses a target, with the bound that applies to it. Whether a workload
is compute- or memory-bound is read off its roofline (the larger of FLOPs / peak and bytes /
bandwidth), so the 40% / 60% targets follow the same numbers the SOL fraction uses. Task speedups
go through :mod:`evaluator.scoring`, the one implementation of the geometric means.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from evaluator.hardware import HardwareProfile, int8_at_fp8_rate, set_sol
from evaluator.protocol import timed_choices_of
from evaluator.result import HardwareProfileRecord, RunResult, TaskResult, WorkloadResult
from evaluator.score_result import score_task_result
from evaluator.scoring import geomean
from tasks.registry import Task

COMPUTE_TARGET = 0.40  # of the measured peak rate of the workload's dtype
MEMORY_TARGET = 0.60  # of the measured bandwidth


@dataclass(frozen=True)
class WorkloadVerdict:
    task: str
    workload: str
    bound: str  # "compute" | "memory" | "latency" | "unknown"
    misses: tuple[str, ...]


def bound_of(hardware: HardwareProfileRecord, w: WorkloadResult, dtype: str) -> str:
    """"compute" or "memory" by the workload's roofline under ``hardware``'s ceilings: the ones its
    SOL fraction was computed with, so the target it is held to and that fraction agree."""
    bw = hardware.memory_bandwidth_gbs * 1e9
    peak = hardware.peak_tflops.get(dtype, 0.0) * 1e12
    if bw <= 0:
        return "unknown"
    t_mem = w.bytes / bw
    t_math = w.flops / peak if peak > 0 else 0.0
    return "compute" if t_math > t_mem else "memory"


def verdicts(result: RunResult, dtypes: dict[str, str], latency: frozenset[str] = frozenset(),
             hardware_of: Mapping[str, HardwareProfileRecord] | None = None) -> list[WorkloadVerdict]:
    """Targets per workload: correct, faster than eager, not slower than compile, SOL fraction by bound.

    ``dtypes`` maps ``task/workload`` to the roofline compute dtype (from the task tree);
    ``latency`` names the tasks whose roofline says ``bound = "latency"``: speedup targets only.
    ``hardware_of`` gives a merged page's task the ceilings of the run it came from (its SOL
    fractions' own); a task it does not name takes ``result``'s. A workload near the ridge point
    would otherwise change its bound, and its target, with a later run of another task.
    """
    hardware_of = hardware_of or {}
    out = []
    for t in result.tasks:
        for w in t.workloads:
            if w.smoke:
                continue
            misses = []
            if not w.correct:
                misses.append("incorrect")
            cand, base, comp = (w.timings.get(p) for p in ("candidate", "baseline", "compile"))
            if cand and base and cand.median_ms >= base.median_ms:
                misses.append(f"not faster than eager ({base.median_ms / cand.median_ms:.2f}x)")
            if cand and comp and cand.median_ms > comp.median_ms * 1.02:
                misses.append(f"slower than torch.compile ({comp.median_ms / cand.median_ms:.2f}x)")
            bound = ("latency" if t.slug in latency else
                     bound_of(hardware_of.get(t.slug, result.hardware), w, dtypes.get(f"{t.slug}/{w.name}", "")))
            sol = w.sol_fraction.get("candidate")
            target = COMPUTE_TARGET if bound == "compute" else MEMORY_TARGET
            if sol is not None and bound in ("compute", "memory") and sol < target:
                # One decimal where whole percents would round a miss up to its target.
                shown = f"{sol:.0%}" if round(sol * 100) < round(target * 100) else f"{sol:.1%}"
                misses.append(f"{shown} of SOL, target {target:.0%} ({bound}-bound)")
            out.append(WorkloadVerdict(t.slug, w.name, bound, tuple(misses)))
    return out


def _compile_ratio(t: TaskResult) -> float | None:
    ratios = [w.timings["compile"].median_ms / w.timings["candidate"].median_ms for w in t.workloads
              if not w.smoke and "compile" in w.timings and "candidate" in w.timings]
    return geomean(ratios) if ratios else None


#: Two timings of one kernel in one run whose medians and minima both differ by more than this
#: fraction have settled on different code paths, not on noise: a tuner's pick or the kernel's own
#: timed choice, made once per process (attn-backward W1 on the H100: 1,988 against 2,547 µs).
SAME_KERNEL_SPREAD = 0.10


def same_kernel_spread(result: RunResult) -> list[tuple[str, str, float, float, float, float]]:
    """(task, workload, expert median, candidate median, expert minimum, candidate minimum), in µs,
    for each workload where a run of the experts as candidates timed the one kernel twice and the
    two processes settled apart (``SAME_KERNEL_SPREAD``). Empty for any other candidate."""
    if not result.candidate.is_expert:
        return []
    rows = []
    for t in result.tasks:
        for w in t.workloads:
            a, b = w.timings.get("expert"), w.timings.get("candidate")
            if a is None or b is None or min(a.median_ms, b.median_ms, a.min_ms, b.min_ms) <= 0:
                continue
            apart = (max(a.median_ms, b.median_ms) > (1 + SAME_KERNEL_SPREAD) * min(a.median_ms, b.median_ms)
                     and max(a.min_ms, b.min_ms) > (1 + SAME_KERNEL_SPREAD) * min(a.min_ms, b.min_ms))
            if apart:
                rows.append((t.slug, w.name, a.median_ms * 1e3, b.median_ms * 1e3, a.min_ms * 1e3, b.min_ms * 1e3))
    return rows


def table_cell(text: str) -> str:
    """Text a kernel reported, safe in one Markdown table cell: no pipes, no line breaks."""
    return " ".join(text.replace("|", "/").split())


def timed_choices(result: RunResult) -> list[tuple[str, str, str]]:
    """(task, what was chosen, the pick) for every ``TIMED_CHOICES`` entry the candidate's worker
    reported (``evaluator.worker.Worker.autotune`` names them ``choice <key>``)."""
    return [(t.slug, what, pick) for t in result.tasks for what, pick in timed_choices_of(t.autotune)]


def summary(result: RunResult, dtypes: dict[str, str], all_slugs: tuple[str, ...] = (),
            latency: frozenset[str] = frozenset(),
            hardware_of: Mapping[str, HardwareProfileRecord] | None = None) -> str:
    """Markdown: the suite's correctness and geometric means, then the misses, the providers
    left untimed and the tasks of the tree (``all_slugs``, which also sets the suite's size)
    with no result yet. ``hardware_of`` is as for :func:`verdicts`."""
    scores = {t.slug: score_task_result(t) for t in result.tasks}
    correct = [s for s in scores.values() if s.correct]
    n = len(all_slugs) or len(result.tasks)
    speedups = [s.speedup for s in correct if s.speedup]
    vs_compile = [r for t in result.tasks if scores[t.slug].correct for r in [_compile_ratio(t)] if r]
    sols = [s.sol_fraction for s in correct if s.sol_fraction]
    n_workloads = sum(1 for t in result.tasks for w in t.workloads if not w.smoke)
    lines = [
        "## Suite summary",
        "",
        f"- **Correctness:** {len(correct)}/{n} tasks "
        f"({sum(1 for t in result.tasks for w in t.workloads if w.correct and not w.smoke)}/{n_workloads} workloads).",
        f"- **Expert speedup over eager** (geometric mean over tasks of each task's geometric mean over "
        f"workloads): {geomean(speedups):.2f}x" if speedups else "- **Expert speedup over eager:** -",
        f"- **Expert speedup over torch.compile** (same means): {geomean(vs_compile):.2f}x"
        if vs_compile else "- **Expert speedup over torch.compile:** -",
        f"- **SOL fraction** (geometric mean over tasks): {geomean(sols):.1%}" if sols else "- **SOL fraction:** -",
        "",
    ]
    misses = [v for v in verdicts(result, dtypes, latency, hardware_of) if v.misses]
    if misses:
        lines += ["### Workloads that miss a target", "", "| task | workload | bound | misses |", "|---|---|---|---|"]
        lines += [f"| {v.task} | {v.workload} | {v.bound} | {'; '.join(v.misses)} |" for v in misses]
    else:
        lines.append("Every workload meets every target.")
    untimed = [(t.slug, w.name, p, why) for t in result.tasks for w in t.workloads for p, why in w.untimed.items()]
    if untimed:
        lines += ["", "### Providers left untimed", "", "| task | workload | provider | why |", "|---|---|---|---|"]
        lines += [f"| {s} | {w} | {p} | {why[:300].replace('|', '/')} |" for s, w, p, why in untimed]
    chosen = timed_choices(result)
    if chosen:
        lines += ["", "### Choices the kernels made by timing", "",
                  "What the candidate's process picked on a shape's first call, as its module's "
                  "`TIMED_CHOICES` reported it (docs/bundle-format.md), with the times that decided it. "
                  "Its autotuners' picks per shape are in the JSON (`autotune`).", "",
                  "| task | choice | picked |", "|---|---|---|"]
        lines += [f"| {s} | {table_cell(k)} | {table_cell(v)} |" for s, k, v in chosen]
    spread = same_kernel_spread(result)
    if spread:
        lines += ["", "### The same expert, timed twice, settled apart", "",
                  f"The candidate and expert columns run one kernel in two processes. Here their medians "
                  f"and their minima differ by more than {SAME_KERNEL_SPREAD:.0%}: each process made a "
                  "timed choice of its own (a tuner's configuration, or the kernel's pick between "
                  "strategies), and they chose differently. A row's speed then depends on that "
                  "choice, so read it as a range.", "",
                  "| task | workload | expert µs | candidate µs | expert min µs | candidate min µs |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {s} | {w} | {a:,.1f} | {b:,.1f} | {c:,.1f} | {d:,.1f} |" for s, w, a, b, c, d in spread]
    missing = [s for s in all_slugs if s not in scores]
    if missing:
        lines += ["", f"### Tasks with no result on this page ({len(missing)})", "", ", ".join(missing)]
    failed = [t for t in result.tasks if not scores[t.slug].correct]
    if failed:
        lines += ["", "### Tasks that failed", ""]
        lines += [f"- {t.slug}: {t.status} {t.error_code} {t.reason[:300]}".rstrip() for t in failed]
    return "\n".join(lines) + "\n"


def reroof(result: RunResult, tasks: Iterable[Task]) -> list[str]:
    """Re-express a stored result against the tasks' current roofline formulas, in place.

    A formula fixed after a device call (a FLOP count that was not a lower bound, say) would
    otherwise leave the results page and the site quoting SOL fractions the engine no longer
    computes; both call this on every stored result they read. Times are the
    measured ones; only flops, bytes and SOL are redone, with the ceilings the run recorded (under
    today's rule for int8, :func:`evaluator.hardware.int8_at_fp8_rate`) and the engine's own
    :func:`evaluator.hardware.set_sol`. Returns one line per workload changed.
    """
    by_slug = {t.slug: t for t in tasks}
    stored = HardwareProfile.from_record(result.hardware)
    profile = int8_at_fp8_rate(stored)
    if profile != stored:
        result.hardware = profile.record()
    changed = []
    for tr in result.tasks:
        task = by_slug.get(tr.slug)
        if task is None:
            continue
        for wr in tr.workloads:
            line = reroof_workload(wr, task, stored)
            if line:
                changed.append(f"{tr.slug} {line}")
    return changed


def reroof_workload(wr: WorkloadResult, task: Task, stored: HardwareProfile) -> str:
    """One workload of :func:`reroof`, in place, against ``stored`` (the ceilings its run recorded);
    the portal calls it on every stored workload of a published submission when the catalogue
    changes. Returns what changed visibly, or "" (nothing, or nothing a reader would see)."""
    profile = int8_at_fp8_rate(stored)
    flops, nbytes = task.roofline(wr.params)
    dtype = task.compute_dtype(wr.params)
    same_ceiling = profile.peak_flops(dtype) == stored.peak_flops(dtype)
    if not wr.timings or ((flops, nbytes) == (wr.flops, wr.bytes) and same_ceiling):
        return ""
    old = wr.sol_fraction.get("candidate")
    wr.flops, wr.bytes = flops, nbytes
    set_sol(wr, profile, dtype)
    new = wr.sol_fraction.get("candidate")
    if old is not None and new is not None and f"{old:.1%}" == f"{new:.1%}":
        return ""  # no visible change: a ceiling its SOL does not use (memory-bound), say
    return f"{wr.name}: candidate SOL {old:.1%} -> {new:.1%}" if old and new else f"{wr.name}: roofline re-evaluated"
