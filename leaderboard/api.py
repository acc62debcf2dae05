"""``/api/v1/leaderboard/`` and ``/api/v1/pairs/``: the same data as the pages, for harnesses and notebooks."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluator.scoring import FAILURE_PENALTY_SPEEDUP
from leaderboard import board_queries
from leaderboard.board_views import GUIDANCE, board_data, filters_from, page_pairs

FILTERS = [
    OpenApiParameter("hardware", str, description="hardware profile, e.g. h200"),
    OpenApiParameter("category", str, description="'all' or a task category"),
    OpenApiParameter("guidance", str, enum=list(GUIDANCE)),
    OpenApiParameter("model", str, description="substring of the model name"),
    OpenApiParameter("sort", str, enum=list(board_queries.SORTS),
                     description="default: 'score' for kernels, 'design' for design documents"),
    OpenApiParameter("mode", str, enum=["kernel", "design"],
                     description="timed kernels (default) or judged design documents"),
    OpenApiParameter("task", str, description="a task slug: each group's latest result on that task "
                                              "(status, speedup, SOL fraction) instead of the suite's scores"),
]


GUIDANCE_VERSION = OpenApiParameter(
    "guidance_version", str, enum=["current"],
    description="'current': compare each pair over the tasks whose guided run read the current guidance version "
                "only, leaving out pairs with none")


MAX_PAGE = 1000
#: Rows per page when ``limit`` is not given. Every row by default was megabytes of JSON and about
#: a second of the server's time at 10,000 published submissions (docs/results/load.md), for any
#: anonymous caller; a page of 100 holds the reference rows and the top of any board.
DEFAULT_PAGE = 100


class PageParams(serializers.Serializer):
    """Paging of the board, in the board's order (reference rows first)."""

    limit = serializers.IntegerField(min_value=1, max_value=MAX_PAGE, default=DEFAULT_PAGE,
                                     help_text=f"rows per page (1-{MAX_PAGE}, default {DEFAULT_PAGE})")
    offset = serializers.IntegerField(min_value=0, default=0, help_text="skip this many rows first")


def _page_link(request: Request, offset: int, limit: int) -> str:
    """This request's URL with ``offset`` and ``limit`` replaced, absolute, as DRF's own pagers give."""
    query = request.query_params.copy()
    query["offset"], query["limit"] = str(offset), str(limit)
    return request.build_absolute_uri(f"{request.path}?{query.urlencode()}")


class LeaderboardView(APIView):
    permission_classes = [AllowAny]

    @extend_schema(parameters=[*FILTERS, PageParams], responses={200: OpenApiTypes.OBJECT},
                   summary="Leaderboard rows of a hardware profile (published results and reference rows)")
    def get(self, request: Request) -> Response:
        """A page of the board (``limit``, default 100, and ``offset``); ``count`` is the total and
        ``next``/``previous`` are the neighbouring pages' URLs, or null."""
        f = filters_from(request._request)
        paging = PageParams(data=request.query_params)
        paging.is_valid(raise_exception=True)  # a 400 with the field's message, in the API's error body
        limit, offset = paging.validated_data["limit"], paging.validated_data["offset"]
        rows = board_data(f)
        nxt = _page_link(request, offset + limit, limit) if offset + limit < len(rows) else None
        prev = _page_link(request, max(offset - limit, 0), limit) if offset > 0 else None
        return Response({"hardware": f.hardware, "scope": f.scope, "penalty_speedup": FAILURE_PENALTY_SPEEDUP,
                         "count": len(rows), "offset": offset, "limit": limit, "next": nxt, "previous": prev,
                         "rows": rows[offset:offset + limit]})


#: Groups of pairs per API page: each pair costs a bootstrap of the paired comparison.
MAX_PAIR_GROUPS = 50


class PairPageParams(serializers.Serializer):
    """Paging of the pairs by group (team, model, harness, budget), newest group first."""

    limit = serializers.IntegerField(min_value=1, max_value=MAX_PAIR_GROUPS, default=board_queries.PAIR_GROUPS_PER_PAGE,
                                     help_text=f"groups per page (1-{MAX_PAIR_GROUPS}); a group gives one pair "
                                               "per guided condition")
    offset = serializers.IntegerField(min_value=0, default=0, help_text="skip this many groups first")


class PairsView(APIView):
    permission_classes = [AllowAny]

    @extend_schema(parameters=[FILTERS[0], FILTERS[3], GUIDANCE_VERSION, PairPageParams],
                   responses={200: OpenApiTypes.OBJECT},
                   summary="The guided/unguided pairs of a hardware profile with their paired comparisons, "
                           "a page of groups at a time")
    def get(self, request: Request) -> Response:
        """``groups`` counts every group that can pair; page through them with ``limit``/``offset``."""
        f = filters_from(request._request)
        paging = PairPageParams(data=request.query_params)
        paging.is_valid(raise_exception=True)
        limit, offset = paging.validated_data["limit"], paging.validated_data["offset"]
        groups, out = board_queries.cached("pairs-api", (f.hardware, f.model, f.current_guidance, limit, offset),
                                           lambda: _pairs_rows(f, limit, offset))
        return Response({"hardware": f.hardware, "groups": groups, "offset": offset, "limit": limit,
                         "guidance_version": "current" if f.current_guidance else "any", "pairs": out})


def _pairs_rows(f: board_queries.Filters, limit: int, offset: int) -> tuple[int, list[dict[str, object]]]:
    out = []
    _, found, groups, given = page_pairs(f, offset=offset, limit=limit)
    for p in found:
        c = p.comparison
        states = given.get(int(p.guided.key), {})
        out.append({"unguided": int(p.unguided.key), "guided": int(p.guided.key), "model": p.guided.model,
                    "team": p.guided.team, "conditions": [p.unguided.condition, p.guided.condition],
                    "score_ratio": c.score_ratio, "ci": [c.ci_low, c.ci_high], "confidence": c.confidence,
                    "wilcoxon_p": c.wilcoxon_p, "sign_test_p": c.sign_test_p, "verdict": c.verdict,
                    "per_task_ratios": c.per_task_ratios,
                    "guided_guidance": {slug: states[slug].status for slug in c.per_task_ratios if slug in states}})
    return groups, out
