"""Reads for the task pages: every query the views make lives here, counted by tests."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import Count, F, Prefetch, Q, QuerySet, Window
from django.db.models.functions import RowNumber

from evaluator.protocol import timed_choices_of
from evaluator.result import TaskResult as EngineTaskResult
from leaderboard.board_queries import UNTIMED_PROFILES, reference_suite
from leaderboard.models import ReferenceRun, ReferenceTiming, Task, Workload


def task_list(*, include_retired: bool = False) -> QuerySet[Task]:
    """Tasks ordered by id, each annotated with ``workload_count`` (full-size workloads only)."""
    qs = Task.objects.annotate(workload_count=Count("workloads", filter=Q(workloads__smoke=False)))
    if not include_retired:
        qs = qs.filter(retired=False)
    return qs.order_by("task_id", "slug")


def task_detail(slug: str) -> Task | None:
    """One task (retired ones too: old links keep working) with its workloads in file order."""
    return (
        Task.objects.filter(slug=slug)
        .prefetch_related(Prefetch("workloads", queryset=Workload.objects.order_by("smoke", "position")))
        .first()
    )


@dataclass(frozen=True)
class ReferenceRow:
    workload: Workload
    eager: ReferenceTiming | None
    compile: ReferenceTiming | None
    expert: ReferenceTiming | None

    @property
    def sol_us(self) -> float | None:
        """SOL time of the workload on the run's profile, recovered from the expert's fraction."""
        e = self.expert
        return e.sol_fraction * e.median_ms * 1e3 if e and e.sol_fraction else None

    @property
    def expert_vs_compile(self) -> float | None:
        if self.expert and self.compile and self.expert.median_ms > 0:
            return self.compile.median_ms / self.expert.median_ms
        return None


@dataclass(frozen=True)
class ReferenceProfile:
    run: ReferenceRun
    rows: list[ReferenceRow]
    #: What the expert chose by timing on this card, (what, the pick): its ``TIMED_CHOICES``.
    choices: list[tuple[str, str]] = field(default_factory=list)
    #: Set when the run holds the task without timings: why, in the engine's words.
    untimed: str = ""


def reference_times(task: Task) -> list[ReferenceProfile]:
    """Per timed hardware profile, the eager / compile / expert times of ``task`` in the reference
    run the board reads for it: the latest imported run that has the task
    (:attr:`leaderboard.board_queries.ReferenceSuite.source`, cached with the board). A task that
    run holds without timings (it failed, or a deadline cut it) shows that, with its reason, and
    not an older run's times, which the board no longer scores."""
    profiles = sorted(set(ReferenceRun.objects.values_list("hardware", flat=True).distinct()) - UNTIMED_PROFILES,
                      key=lambda h: (h != settings.D2K_BOARD_HARDWARE, h))  # the benchmark's card first
    latest: dict[str, ReferenceRun] = {}
    merged: dict[str, EngineTaskResult] = {}  # the task as that run holds it, parsed with the suite
    for hw in profiles:
        ref = reference_suite(hw)
        if ref is not None and task.slug in ref.source:
            latest[hw] = ref.source[task.slug]
            merged[hw] = next(t for t in ref.result.tasks if t.slug == task.slug)
    if not latest:
        return []
    timings = (ReferenceTiming.objects.filter(run__in=list(latest.values()), workload__task=task)
               .select_related("workload").order_by("workload__position"))
    grouped: dict[int, dict[int, dict[str, ReferenceTiming]]] = {}
    workloads: dict[int, Workload] = {}
    for t in timings:
        grouped.setdefault(t.run_id, {}).setdefault(t.workload_id, {})[t.provider] = t
        workloads[t.workload_id] = t.workload
    out = []
    for hw, run in latest.items():
        by_w = grouped.get(run.pk, {})
        rows = [ReferenceRow(workloads[wid], p.get("eager"), p.get("compile"), p.get("expert"))
                for wid, p in sorted(by_w.items(), key=lambda kv: workloads[kv[0]].position)]
        held = merged[hw]
        why = (held.reason or held.error_code).strip()
        out.append(ReferenceProfile(run, rows, timed_choices_of(held.autotune),
                                    "" if rows else f"{held.status}: {why}" if why else held.status))
    return out


def best_published_kernels(task: Task, limit: int = 5) -> dict[str, list]:
    """Per hardware profile, the fastest correct published kernels for ``task`` (latest run of each group).

    Read from the scores stored at publication, so only public results appear. The top ``limit``
    per profile are picked in the database (a window function): loading every correct score of the
    task to keep five made this page's cost grow with the number of published submissions.
    """
    from portal.scores.models import SubmissionScore
    from portal.scores.models import TaskScore as StoredTaskScore

    latest = SubmissionScore.objects.filter(scope="all", is_latest=True, mode="kernel").values("submission_id")
    order = [F("speedup").desc(), F("submission_id")]
    rows = (StoredTaskScore.objects.filter(task=task, correct=True, submission_id__in=latest)
            .annotate(rank=Window(RowNumber(), partition_by=[F("submission__hardware")], order_by=order))
            .filter(rank__lte=limit)
            .select_related("submission__model", "submission__team").order_by("submission__hardware", *order))
    out: dict[str, list] = {}
    for r in rows:
        out.setdefault(r.submission.hardware, []).append(r)
    return out
