"""The public leaderboard pages: the board per hardware profile, its exports, and the paired view.

Server-rendered tables that work without JavaScript; the Plotly charts are built on the server
(:mod:`leaderboard.charts`) and drawn by plotly.js from our own static files.
"""

from __future__ import annotations

import csv
import io
import math
from typing import Any

from django.conf import settings
from django.core.exceptions import BadRequest
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from evaluator.score_result import score_run
from evaluator.scoring import FAILURE_PENALTY_SPEEDUP
from leaderboard import board, board_queries, charts
from leaderboard.guidance_versions import GuidanceState, states_of_runs
from portal.scores.models import ALL, SubmissionScore

GUIDANCE = ("none", "L1", "L1+L2", "L1+L2+L3")


def default_profile(profiles: list[str]) -> str:
    """The board shown without a choice: the benchmark's card (``D2K_BOARD_HARDWARE``) whenever it
    has rows, else the first profile that has any. Alphabetical order alone would open on the
    H100's reference runs."""
    if settings.D2K_BOARD_HARDWARE in profiles or not profiles:
        return settings.D2K_BOARD_HARDWARE
    return profiles[0]


def filters_from(request: HttpRequest) -> board_queries.Filters:
    """The board's filters; unknown choices fall back to the defaults. A NUL character is refused
    (400: Django's ``BadRequest``), since PostgreSQL text cannot hold one and the query would fail."""
    for name, values in request.GET.lists():
        if any("\x00" in v for v in values):
            raise BadRequest(f"{name}: a NUL character is not allowed")
    hardware = request.GET.get("hardware") or default_profile(board_queries.hardware_profiles())
    mode = "design" if request.GET.get("mode") == "design" else "kernel"
    if hardware in board_queries.UNTIMED_PROFILES and mode == "kernel":  # a judged design has no timings
        # Runs there prove correctness and take no times, so every score would be the failure
        # penalty: a board of them would say a correct kernel failed.
        raise Http404(f"{hardware} runs are correctness-only (no timings), so it has no leaderboard; "
                      "a submission's page shows its results")
    scope = request.GET.get("category") or ALL
    if scope != ALL and scope not in board_queries.categories():
        scope = ALL
    guidance = request.GET.get("guidance", "")
    task = request.GET.get("task", "")
    sort = request.GET.get("sort", "")
    return board_queries.Filters(hardware=hardware, scope=scope,
                                 current_guidance=request.GET.get("guidance_version") == "current",
                                 guidance=guidance if guidance in GUIDANCE else "",
                                 model=request.GET.get("model", "")[:100],
                                 sort=sort if sort in board_queries.SORTS else board_queries.DEFAULT_SORT[mode],
                                 mode=mode, task=task if task and mode == "kernel" and task in board_queries.suite(ALL) else "")


def row_dict(s: SubmissionScore) -> dict[str, Any]:
    """One row as exported (CSV, JSON, API): the stored scores, nothing recomputed."""
    return {
        "submission": s.submission_id, "team": s.team_name, "model": s.model_name, "harness": s.harness_name,
        "guidance": s.guidance, "mode": s.mode, "budget": s.budget, "hardware": s.hardware, "scope": s.scope,
        "performance_score": s.performance_score, "correctness_rate": s.correctness_rate,
        "suite_correctness_rate": s.suite_correctness_rate, "correct": s.correct_count, "attempted": s.attempted,
        "suite_size": s.suite_size, "geomean_speedup_correct": s.geomean_correct,
        **{f"fast_{p}": v for p, v in s.fast_p.items()}, "mean_sol_fraction": s.mean_sol_fraction,
        "design_score": s.design_score, "implementation_score": s.implementation_score,
        "turns_used": s.turns_used, "published_at": s.published_at.isoformat(), "reference": False,
    }


def reference_dict(r: board_queries.ReferenceRow, f: board_queries.Filters) -> dict[str, Any]:
    sc = r.score
    return {"submission": None, "team": "", "model": r.name, "harness": "", "guidance": "reference", "mode": "kernel",
            "budget": None, "hardware": f.hardware, "scope": f.scope, "performance_score": sc.performance_score,
            "correctness_rate": sc.correctness_rate, "suite_correctness_rate": sc.suite_correctness_rate,
            "correct": sc.correct_count, "attempted": sc.attempted, "suite_size": sc.suite_size,
            "geomean_speedup_correct": sc.geomean_correct, **{f"fast_{p}": v for p, v in sc.fast_p.items()},
            "mean_sol_fraction": sc.mean_sol_fraction, "design_score": None, "implementation_score": None,
            "turns_used": None, "published_at": r.run.started_at.isoformat() if r.run else None, "reference": True}


def _task_choices() -> list[tuple[str, str]]:
    """(slug, "T01 slug") of every task, in catalogue order: the board's task filter."""
    slugs = board_queries.suite(ALL)
    labels = board_queries.task_labels(slugs)
    return [(slug, labels.get(slug, slug)) for slug in slugs]


def task_row_dict(r: board_queries.TaskRow, f: board_queries.Filters) -> dict[str, Any]:
    """One line of a task's board as exported: who, and the stored result on the task."""
    s = r.row
    return {"submission": s.submission_id if s else None, "team": s.team_name if s else "",
            "model": r.name, "harness": s.harness_name if s else "", "guidance": s.guidance if s else "reference",
            "budget": s.budget if s else None, "hardware": f.hardware, "task": f.task,
            "status": "not attempted" if r.correct is None else "correct" if r.correct else "failed",
            "speedup": r.speedup, "sol_fraction": r.sol_fraction, "turns_used": s.turns_used if s else None,
            "published_at": r.published.isoformat() if r.published else None, "reference": s is None}


def task_board(f: board_queries.Filters) -> tuple[list[board_queries.TaskRow], list[board_queries.TaskRow]]:
    """(reference rows, rows) of a task's board, cached like the board."""
    return board_queries.cached("task-rows", f, lambda: (board_queries.task_reference_rows(f.hardware, f.task),
                                                        board_queries.task_rows(f)))


def board_data(f: board_queries.Filters) -> list[dict[str, Any]]:
    """Every row (exports and the API), cached like the charts: at 10,000 published submissions
    the ~5,000 rows took ~0.8 s of CPU per request to read, for data that changes at publication."""
    if f.task:
        refs, found = task_board(f)
        return [task_row_dict(r, f) for r in (*refs, *found)]
    return board_queries.cached("rows", f, lambda: [reference_dict(r, f) for r in board_queries.board_references(f)]
                                + [row_dict(s) for s in board_queries.rows(f)])


TABLE_ROWS = 100  # rows shown on the page; CSV, JSON and the API carry every row
CHART_ROWS = 20


def _board_charts(f: board_queries.Filters, rows: list[SubmissionScore]) -> dict[str, Any]:
    """The board's charts, built from the top rows only (the page must stay fast at 10,000 submissions)."""
    top = rows[:CHART_ROWS]
    out: dict[str, Any] = {}
    bars = [charts.ScoreBar(r.model_name, r.guidance, r.performance_score) for r in top]
    if bars:
        out["scores"] = charts.score_bars(bars)
    ids = [r.submission_id for r in top]
    cats = [charts.CategoryCount(f"{r.model_name} · {r.guidance}", r.scope, r.correct_count, r.suite_size)
            for r in SubmissionScore.objects.filter(submission_id__in=ids).exclude(scope=ALL)
            .order_by("model_name", "guidance", "scope")]
    if cats:
        out["categories"] = charts.correctness_by_category(cats)
    labels = board_queries.task_labels(board_queries.suite(ALL))
    sol_rows = [charts.SolPoint(e.label, labels.get(slug, slug), s.sol_fraction)
                for e in board_queries.entries(f.hardware, submission_ids=ids[:5]) for slug, s in e.tasks.items()]
    ref = board_queries.reference_suite(f.hardware)
    if ref is not None:
        for slug, s in score_run(ref.result, "candidate").items():
            sol_rows.append(charts.SolPoint("expert kernels", labels.get(slug, slug), s.sol_fraction))
    if sol_rows:
        out["sol"] = charts.sol_per_task(sol_rows)
    judged = [charts.JudgePoint(f"{r.model_name} · {r.guidance}", "suite", r.design_score, r.implementation_score)
              for r in rows[:TABLE_ROWS] if r.design_score is not None and r.implementation_score is not None]
    if judged:
        out["judge"] = charts.design_vs_implementation(judged)
    return out


def leaderboard(request: HttpRequest) -> HttpResponse:
    f = filters_from(request)
    fmt = request.GET.get("format", "")
    if fmt == "json":
        return JsonResponse({"hardware": f.hardware, "scope": f.scope, "penalty_speedup": FAILURE_PENALTY_SPEEDUP,
                             "rows": board_data(f)})
    if fmt == "csv":
        data = board_data(f)
        buf = io.StringIO()
        if data:
            writer = csv.DictWriter(buf, fieldnames=list(data[0]))
            writer.writeheader()
            writer.writerows(data)
        resp = HttpResponse(buf.getvalue(), content_type="text/csv; charset=utf-8")
        resp["Content-Disposition"] = f'attachment; filename="d2k-leaderboard-{f.hardware}-{f.scope}.csv"'
        return resp
    form = {"f": f, "table_rows": TABLE_ROWS, "profiles": board_queries.hardware_profiles() or [f.hardware],
            "categories": board_queries.categories(), "tasks": _task_choices(), "guidance_choices": GUIDANCE,
            "sorts": list(board_queries.SORTS), "penalty": FAILURE_PENALTY_SPEEDUP}
    if f.task:
        refs, found = task_board(f)
        return render(request, "leaderboard/board.html", {
            **form, "task_rows": found[:TABLE_ROWS], "task_references": refs, "total_rows": len(found), "charts": {}})
    qs = board_queries.rows(f)
    rows = list(qs[:TABLE_ROWS])
    return render(request, "leaderboard/board.html", {
        **form, "rows": rows, "total_rows": qs.count(), "references": board_queries.board_references(f),
        "charts": board_queries.cached("charts", f, lambda: _board_charts(f, rows))})


def pairs(request: HttpRequest) -> HttpResponse:
    """The paired view. Its bootstrap and 21 charts take about a second to build and change only
    at publication, so they are cached like the board's charts."""
    f = filters_from(request)
    try:
        number = max(1, int(request.GET.get("page", "1")))
    except ValueError:
        number = 1
    per_page = board_queries.PAIR_GROUPS_PER_PAGE
    offset = (number - 1) * per_page
    views = board_queries.cached("pairs", (f.hardware, f.model, f.current_guidance, offset, per_page),
                                 lambda: _pairs_views(f, offset, per_page))
    pages = max(1, math.ceil(views["groups"] / per_page))
    context = {"f": f, "profiles": board_queries.hardware_profiles() or [f.hardware], "penalty": FAILURE_PENALTY_SPEEDUP,
               "page": number, "pages": pages, **views}
    return render(request, "leaderboard/pairs.html", context)


PAIR_BOOTSTRAP = 5000  # resamples per pair's interval: one page of pairs in about a second


def page_pairs(f: board_queries.Filters, offset: int = 0, limit: int = board_queries.PAIR_GROUPS_PER_PAGE
               ) -> tuple[list[board.Entry], list[board.Pair], int, dict[int, dict[str, GuidanceState]]]:
    """One page of the profile's pairs, newest groups first, with their paired comparisons; their
    entries; how many groups can pair in all; and, per guided run and task, which guidance
    version its agent read.

    With ``f.current_guidance`` each pair is compared over the tasks whose guided run read the
    current version only, and a pair with none of those is left out (so a page may hold fewer
    pairs than its groups give)."""
    found = board_queries.pair_page(f.hardware, f.model, limit=limit, offset=offset)
    entries = board_queries.entries(f.hardware, submission_ids=found.submission_ids)
    pairs = board.pairs(entries, n_boot=PAIR_BOOTSTRAP)
    given = states_of_runs(int(p.guided.key) for p in pairs)
    if f.current_guidance:
        kept = (board.restrict(p, [slug for slug, state in given.get(int(p.guided.key), {}).items()
                                   if state.status == "current"], n_boot=PAIR_BOOTSTRAP) for p in pairs)
        pairs = [p for p in kept if p is not None]
    return entries, pairs, found.groups, given


def _pairs_views(f: board_queries.Filters, offset: int, limit: int) -> dict[str, Any]:
    entries, found, groups, given = page_pairs(f, offset, limit)
    labels = board_queries.task_labels(board_queries.suite(ALL))
    experts = {labels.get(k, k): v for k, v in board_queries.expert_speedups(f.hardware).items()}
    views = []
    for i, p in enumerate(found):
        tasks = []
        states = given.get(int(p.guided.key), {})
        for slug in p.suite:
            u, g = p.unguided.tasks.get(slug), p.guided.tasks.get(slug)
            tasks.append({"slug": slug, "label": labels.get(slug, slug), "unguided": u.speedup if u else None,
                          "guided": g.speedup if g else None, "ratio": p.comparison.per_task_ratios[slug],
                          "guidance": states.get(slug)})
        points = [charts.PairPoint(t["label"], "all workloads", t["unguided"], t["guided"]) for t in tasks]
        scatter = charts.paired_scatter(points, {t["label"]: experts[t["label"]] for t in tasks if t["label"] in experts},
                                        f"{p.guided.model}: {p.unguided.condition} vs {p.guided.condition}")
        views.append({"pair": p, "tasks": tasks, "chart_id": f"pair-{i}", "chart": scatter,
                      "log_ratio": math.log(p.comparison.score_ratio),
                      "not_current": sum(1 for t in tasks if t["guidance"] and t["guidance"].status != "current")})
    curves = board.ablations(entries, board_queries.suite(ALL))
    return {"pairs": views, "ablation": charts.ablation(curves) if curves else None, "groups": groups}
