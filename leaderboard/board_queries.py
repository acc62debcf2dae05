"""Reads of the leaderboard: stored scores of published submissions plus the reference rows.

Only published results exist in :mod:`portal.scores` (rows are written at publication and removed
when a result stops being public), so nothing here can leak an unpublished result. The reference
rows (eager, torch.compile, expert) are scored from the profile's imported reference runs, merged
task by task (:func:`reference_suite`), through :func:`evaluator.score_result.score_run`, the same
code as every other row.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from django.core.cache import cache
from django.db.models import F, QuerySet

from evaluator.result import RunResult
from evaluator.result_merge import merge_runs, sources
from evaluator.score_result import measured, score_run
from evaluator.scoring import SubmissionScore as Scored
from evaluator.scoring import TaskScore as Score
from evaluator.scoring import eager_reference, submission_score
from leaderboard import board
from leaderboard.models import ReferenceRun, Task
from portal.scores.models import ALL, SubmissionScore, TaskScore

T = TypeVar("T")

SORTS = {
    "score": "-performance_score", "correct": "-correct_count", "date": "-published_at", "model": "model_name",
    # Fields a row may lack (no correct task: no geomean or SOL; not judged; no turns) go last
    # either way: PostgreSQL puts NULLs first when descending, SQLite last; both follow this.
    "geomean": F("geomean_correct").desc(nulls_last=True), "sol": F("mean_sol_fraction").desc(nulls_last=True),
    "turns": F("turns_used").asc(nulls_last=True),
    "design": F("design_score").desc(nulls_last=True), "implementation": F("implementation_score").desc(nulls_last=True),
}
#: The sort of a board shown without one: design-only submissions have judge scores, not timings.
DEFAULT_SORT = {"kernel": "score", "design": "design"}


@dataclass(frozen=True)
class Filters:
    hardware: str
    scope: str = ALL  # "all" or a task category
    guidance: str = ""
    model: str = ""
    sort: str = "score"
    mode: str = "kernel"  # design-only submissions have judge scores, not timings: their own board
    task: str = ""  # a task slug: the board of that task's results (scope and sort do not apply)
    current_guidance: bool = False  # pairs only: compare over the tasks whose guided run read the current text


@dataclass(frozen=True)
class ReferenceRow:
    name: str  # "PyTorch eager" | "torch.compile" | "expert kernels"
    score: Scored
    run: ReferenceRun | None


UNTIMED_PROFILES = frozenset({"cpu-interpret"})  # correctness only: no speedups, no board


BOARD_CACHE_S = 60  # published results reach the board's menus, charts and pairs within a minute


def cached(name: str, key: object, compute: Callable[[], T]) -> T:
    """``compute()``, cached for ``BOARD_CACHE_S`` under the current board generation.

    Publication bumps the generation (:func:`portal.scores.services.record_scores`), so a shared
    cache drops every entry at once; a per-process one serves the old value at most ``BOARD_CACHE_S``.
    ``key`` is what the value depends on besides the published data (the filters).
    """
    digest = hashlib.sha256(repr(key).encode()).hexdigest()[:32]
    return cache.get_or_set(f"board:{name}:{cache.get('board:generation', 0)}:{digest}", compute, BOARD_CACHE_S)


def hardware_profiles() -> list[str]:
    """Profiles with published results or reference runs; untimed ones never make a board.

    A DISTINCT over every stored score is the slowest read of the page at 10,000 submissions and
    changes only when a new profile appears, so it is cached briefly.
    """
    def compute() -> list[str]:
        found = set(SubmissionScore.objects.values_list("hardware", flat=True).distinct())
        found |= set(ReferenceRun.objects.values_list("hardware", flat=True).distinct())
        return sorted(found - UNTIMED_PROFILES)

    return cache.get_or_set("board:profiles", compute, BOARD_CACHE_S)


def categories() -> list[str]:
    return sorted(set(Task.objects.filter(retired=False).values_list("category", flat=True)))


def suite(scope: str = ALL) -> list[str]:
    qs = Task.objects.filter(retired=False).order_by("task_id")
    if scope != ALL:
        qs = qs.filter(category=scope)
    return list(qs.values_list("slug", flat=True))


def rows(f: Filters) -> QuerySet[SubmissionScore]:
    """The board: the latest published submission of every group, filtered and sorted."""
    qs = SubmissionScore.objects.filter(hardware=f.hardware, scope=f.scope, is_latest=True, mode=f.mode)
    if f.guidance:
        qs = qs.filter(guidance=f.guidance)
    if f.model:
        qs = qs.filter(model_name__icontains=f.model)
    order = SORTS.get(f.sort, SORTS["score"])
    return qs.order_by(order, "-performance_score", "submission_id")  # every shown field is on the row


@dataclass(frozen=True)
class ReferenceSuite:
    """A profile's imported reference runs read as one suite: per task, the latest run that has it."""

    result: RunResult
    latest: ReferenceRun  # the newest run (its date is the rows' date)
    #: Task slug -> the imported run its merged result comes from (evaluator.result_merge.sources):
    #: the task page shows that run's times, so it and the board read the same run.
    source: dict[str, ReferenceRun] = field(default_factory=dict)


def reference_suite(hardware: str) -> ReferenceSuite | None:
    """The merged reference result of ``hardware`` (evaluator/result_merge.py), or None.

    The references are measured over several device calls, each imported as its own run, often
    of a few tasks. Scoring only the newest run made the "expert kernels" row a one-task suite.
    Cached like the board: the runs change only on import.
    """
    def compute() -> ReferenceSuite | None:
        runs = list(ReferenceRun.objects.filter(hardware=hardware).order_by("started_at", "pk"))
        if not runs:
            return None
        results = [RunResult.model_validate(r.result_json) for r in runs]
        run_of = {id(result): run for result, run in zip(results, runs, strict=True)}
        source = {slug: run_of[id(result)] for slug, result in sources(results).items()}
        return ReferenceSuite(merge_runs(results, suite(ALL)), runs[-1], source)

    return cached("reference-suite", hardware, compute)


def board_references(f: Filters) -> list[ReferenceRow]:
    """The reference rows of a board: timings, so a board of judged design documents has none."""
    return reference_rows(f.hardware, f.scope) if f.mode == "kernel" else []


def reference_rows(hardware: str, scope: str = ALL) -> list[ReferenceRow]:
    slugs = suite(scope)
    out = [ReferenceRow("PyTorch eager", eager_reference(slugs), None)] if slugs else []
    ref = reference_suite(hardware)
    if ref is None or not slugs:
        return out
    for provider, name in REFERENCE_PROVIDERS:
        scores = {slug: s for slug, s in provider_scores(ref, provider).items() if slug in slugs}
        suite_slugs = slugs
        if provider != "candidate":  # the tasks it was measured on; the row says when that is fewer
            suite_slugs = [slug for slug in slugs if slug in scores]
            if len(suite_slugs) < len(slugs):
                name = f"{name} ({len(suite_slugs)} of {len(slugs)} tasks timed)"
        if scores and any(s.correct for s in scores.values()):
            out.append(ReferenceRow(name, submission_score(scores, suite_slugs), ref.latest))
    return out


#: The timed reference providers of a board, with the names their rows carry.
REFERENCE_PROVIDERS = (("compile", "torch.compile"), ("candidate", "expert kernels"))


def provider_scores(ref: ReferenceSuite, provider: str) -> dict[str, Score]:
    """Slug -> ``provider``'s task score in the reference suite. For torch.compile, only the tasks
    the runs measured it on: a run that never asked for torch.compile says nothing about it, so
    such a task is left out rather than counted as torch.compile failing (its own failures on
    the baseline do count, with their reason)."""
    scores = score_run(ref.result, provider)
    if provider == "candidate":
        return scores
    timed = {t.slug for t in ref.result.tasks if measured(t, provider)}
    return {slug: s for slug, s in scores.items() if slug in timed}


@dataclass(frozen=True)
class TaskRow:
    """One line of a task's board: who (a group's latest published submission, or a reference) and
    how it did on the task. ``correct`` is None when the submission did not attempt the task."""

    name: str
    row: SubmissionScore | None  # None for a reference row
    correct: bool | None
    speedup: float | None
    sol_fraction: float | None
    published: object = None  # a datetime (a reference: its run's start)


def task_rows(f: Filters) -> list[TaskRow]:
    """The board of one task: the latest published submission of every group (the board's
    guidance and model filters apply) with its stored score on ``f.task``; correct results by
    speedup, then failed ones, then groups that did not attempt it."""
    subs = list(rows(Filters(hardware=f.hardware, guidance=f.guidance, model=f.model)))
    stored = {t.submission_id: t for t in TaskScore.objects.filter(task__slug=f.task,
                                                                   submission_id__in=[s.submission_id for s in subs])}
    out = []
    for s in subs:
        t = stored.get(s.submission_id)
        out.append(TaskRow(s.model_name, s, t.correct if t else None, t.speedup if t else None,
                           t.sol_fraction if t else None, s.published_at))

    def order(r: TaskRow) -> tuple[int, float, int]:
        rank = 0 if r.correct else 1 if r.correct is False else 2
        return rank, -(r.speedup or 0.0), r.row.submission_id if r.row else 0

    return sorted(out, key=order)


def task_reference_rows(hardware: str, slug: str) -> list[TaskRow]:
    """Eager (1x by definition), torch.compile and the expert on one task, from the reference run."""
    out = [TaskRow("PyTorch eager", None, True, 1.0, None)]
    ref = reference_suite(hardware)
    if ref is None:
        return out
    for provider, name in REFERENCE_PROVIDERS:
        s = provider_scores(ref, provider).get(slug)
        if s is not None:
            out.append(TaskRow(name, None, s.correct, s.speedup, s.sol_fraction,
                               ref.latest.started_at if ref.latest else None))
    return out


def expert_speedups(hardware: str) -> dict[str, float]:
    """Task slug -> the expert's S on this profile (for the paired scatter)."""
    ref = reference_suite(hardware)
    if ref is None:
        return {}
    scores = provider_scores(ref, "candidate")
    return {slug: s.speedup for slug, s in scores.items() if s.speedup}


def entries(hardware: str, mode: str = "kernel", submission_ids: Sequence[int] | None = None) -> list[board.Entry]:
    """Latest published submissions of the profile as :class:`leaderboard.board.Entry`, with task scores.

    ``submission_ids`` restricts them (a page of pairs); task scores are fetched for those only.
    """
    qs = SubmissionScore.objects.filter(hardware=hardware, scope=ALL, is_latest=True, mode=mode)
    if submission_ids is not None:
        qs = qs.filter(submission_id__in=list(submission_ids))
    subs = list(qs)
    by_sub: dict[int, dict[str, Score]] = {s.submission_id: {} for s in subs}
    # The slug only: joining whole task rows (spec, guidance texts) made this the page's slowest query.
    for sid, slug, correct, speedup, sol, findings in TaskScore.objects.filter(submission_id__in=by_sub).values_list(
            "submission_id", "task__slug", "correct", "speedup", "sol_fraction", "findings"):
        by_sub[sid][slug] = Score(correct, speedup, sol, tuple(findings))
    return [board.Entry(key=str(s.submission_id), team=s.team_name, model=s.model_name, harness=s.harness_name,
                        condition=s.guidance, budget=s.budget, hardware=s.hardware, tasks=by_sub[s.submission_id],
                        date=s.published_at.isoformat(), turns_used=s.turns_used, design_score=s.design_score,
                        implementation_score=s.implementation_score) for s in subs]


def task_categories() -> dict[str, str]:
    return dict(Task.objects.values_list("slug", "category"))


def task_labels(slugs: Sequence[str]) -> dict[str, str]:
    return {slug: f"{tid} {slug}" for slug, tid in Task.objects.filter(slug__in=slugs).values_list("slug", "task_id")}


#: Groups (team, model, harness, budget) of pairs on one page of the paired view or the API.
PAIR_GROUPS_PER_PAGE = 20


@dataclass(frozen=True)
class PairPage:
    submission_ids: list[int]  # the latest run of every condition of the page's groups
    groups: int  # groups with an unguided run and at least one guided one, on every page
    offset: int
    limit: int


def pair_page(hardware: str, model: str = "", limit: int = PAIR_GROUPS_PER_PAGE, offset: int = 0) -> PairPage:
    """One page of the groups that can form (unguided, guided) pairs, newest first, found from
    stored fields only: the submission ids of their conditions' latest runs.

    Pairing needs each side's task set, read from the stored task scores' task ids in one query
    over the candidate groups; the bootstrap then runs only for the page shown.
    """
    qs = SubmissionScore.objects.filter(hardware=hardware, scope=ALL, is_latest=True, mode="kernel")
    if model:
        qs = qs.filter(model_name__icontains=model)
    rows = list(qs.values_list("submission_id", "team_name", "model_name", "harness_name", "budget", "guidance",
                               "published_at"))
    groups: dict[tuple[object, ...], dict[str, tuple[int, object]]] = {}
    for sid, team, model_name, harness, budget, guidance, published in rows:
        groups.setdefault((team, model_name, harness, budget), {})[guidance] = (sid, published)
    candidates = [(g, by) for g, by in groups.items() if "none" in by and len(by) > 1]
    candidates.sort(key=lambda gb: (max(p for _, p in gb[1].values()), gb[0]), reverse=True)
    ids = [sid for _, by in candidates[offset:offset + limit] for sid, _ in by.values()]
    return PairPage(submission_ids=ids, groups=len(candidates), offset=offset, limit=limit)
