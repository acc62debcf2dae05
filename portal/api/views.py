"""The REST API under ``/api/v1/``: tasks, submissions (with uploads), results, logs, tokens,
published results and moderation. Per-object rules come from
:mod:`portal.submissions.permissions`; an object the caller may not see is a 404."""

from __future__ import annotations

from django.conf import settings
from django.db.models import Q, QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle

from evaluator.bundle_problems import BundleInvalid
from leaderboard import selectors as task_selectors
from leaderboard.models import Task
from portal.api import serializers as s
from portal.api.errors import ApiError
from portal.api.filters import SubmissionFilter
from portal.api.pagination import CreatedCursorPagination, QueueCursorPagination
from portal.api.schema import ERROR
from portal.api.viewer import acting_team, may_moderate, viewer_of
from portal.moderation.evidence import moderation_queue
from portal.moderation.services import do_moderate
from portal.submissions import actions, selectors
from portal.submissions.models import Submission
from portal.submissions.quotas import QuotaExceeded
from portal.teams.models import ApiToken
from portal.teams.selectors import team_tokens
from portal.teams.services import TokenError, token_create, token_revoke


class TaskViewSet(viewsets.ReadOnlyModelViewSet):
    """The task catalogue: spec, workloads, guidance. Public."""

    permission_classes = [AllowAny]
    lookup_field = "slug"
    lookup_value_regex = r"[-a-zA-Z0-9_]+"  # a slug, as the pages' <slug:...>: a NUL never reaches the query
    pagination_class = None

    def get_queryset(self) -> QuerySet[Task]:
        return task_selectors.task_list() if self.action == "list" else Task.objects.prefetch_related("workloads")

    def get_serializer_class(self):  # noqa: ANN201
        return s.TaskListSerializer if self.action == "list" else s.TaskDetailSerializer


IDEMPOTENCY = OpenApiParameter("Idempotency-Key", str, OpenApiParameter.HEADER, required=False,
                               description="repeat a create safely: the same key and bytes return the first result")


class SubmissionViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Submissions the caller may see: their team's, and every published one."""

    serializer_class = s.SubmissionSerializer
    filterset_class = SubmissionFilter
    pagination_class = CreatedCursorPagination
    permission_classes = [AllowAny]

    def get_permissions(self):  # noqa: ANN201
        if self.action in ("list", "retrieve", "results", "judge"):
            return [AllowAny()]
        return [IsAuthenticated()]

    def get_queryset(self) -> QuerySet[Submission]:
        viewer = viewer_of(self.request)
        qs = selectors.with_result_counts(selectors.submissions_base().prefetch_related("tasks__task"))
        if viewer.moderator:
            return qs
        return qs.filter(Q(published_attempt__isnull=False) | Q(team_id__in=viewer.team_ids))

    def get_serializer_context(self) -> dict:
        return {**super().get_serializer_context(), **viewer_of(self.request).context()}

    def _private(self, sub: Submission) -> bool:
        viewer = viewer_of(self.request)
        return viewer.moderator or sub.team_id in viewer.team_ids

    def _own(self, sub: Submission) -> None:
        if sub.team_id not in viewer_of(self.request).team_ids:
            raise ApiError("no such submission", code="not_found", status_code=404)

    @extend_schema(request={"multipart/form-data": s.SubmissionCreateSerializer}, parameters=[IDEMPOTENCY],
                   responses={201: s.SubmissionSerializer, 200: s.SubmissionSerializer, 409: ERROR, 413: ERROR,
                              429: ERROR})
    def create(self, request: Request) -> Response:
        """Upload a bundle, or one kernel file with its fields; validated before anything is stored, then queued."""
        form = s.SubmissionCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        team = acting_team(request, form.validated_data.get("team"))
        upload = form.validated_data["bundle"]
        if upload.size > _max_upload():
            raise ApiError(f"{upload.name}: is {upload.size:,} bytes; the limit is {_max_upload():,}",
                           code="invalid_bundle", details=[{"file": upload.name, "rule": "upload-size",
                                                            "message": "too large"}], status_code=413)
        try:
            sub, created = actions.check_create_submission(
                team=team, user=request.user, blob=form.bundle_blob(), filename=upload.name,
                hardware=form.validated_data.get("hardware"), idempotency_key=request.headers.get("Idempotency-Key", ""))
        except BundleInvalid as exc:
            raise ApiError("the bundle was refused: " + "; ".join(str(p) for p in exc.problems[:5]),
                           code="invalid_bundle", details=[p.as_dict() for p in exc.problems]) from None
        except QuotaExceeded as exc:
            raise ApiError(str(exc), code=f"quota_{exc.kind}", status_code=429,
                           details={"limit": exc.limit, "retry_after": exc.retry_after_s},
                           headers={"Retry-After": str(exc.retry_after_s)}) from None
        except actions.IdempotencyConflict as exc:
            raise ApiError(str(exc), code="idempotency_conflict", status_code=409) from None
        sub = selectors.submission_get(sub.pk)
        data = s.SubmissionSerializer(sub, context=self.get_serializer_context()).data
        return Response(data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    @extend_schema(request=s.ReasonSerializer, responses={200: s.SubmissionSerializer, 409: ERROR})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        sub = self.get_object()
        self._own(sub)
        reason = _reason(request)
        try:
            actions.do_cancel(sub, user=request.user, reason=str(reason))
        except actions.InvalidTransition as exc:
            raise ApiError(str(exc), code="invalid_transition", status_code=409) from None
        return Response(s.SubmissionSerializer(selectors.submission_get(sub.pk),
                                               context=self.get_serializer_context()).data)

    @extend_schema(request=s.ReasonSerializer, responses={200: s.SubmissionSerializer, 409: ERROR, 429: ERROR})
    @action(detail=True, methods=["post"])
    def rerun(self, request: Request, pk: str | None = None) -> Response:
        sub = self.get_object()
        self._own(sub)
        reason = _reason(request)
        try:
            actions.do_rerun(sub, user=request.user, reason=str(reason))
        except actions.InvalidTransition as exc:
            raise ApiError(str(exc), code="invalid_transition", status_code=409) from None
        except QuotaExceeded as exc:
            raise ApiError(str(exc), code=f"quota_{exc.kind}", status_code=429,
                           headers={"Retry-After": str(exc.retry_after_s)}) from None
        return Response(s.SubmissionSerializer(selectors.submission_get(sub.pk),
                                               context=self.get_serializer_context()).data)

    @extend_schema(responses=s.TaskResultSerializer(many=True))
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def results(self, request: Request, pk: str | None = None) -> Response:
        """Per-task and per-workload results of the attempt the caller may see."""
        sub = self.get_object()
        attempt = sub.current_attempt if self._private(sub) else sub.published_attempt
        return Response(s.TaskResultSerializer(selectors.attempt_results(attempt), many=True).data)

    @extend_schema(responses=s.JudgeScoreSerializer(many=True))
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def judge(self, request: Request, pk: str | None = None) -> Response:
        """The LLM judge's scores: a design-only submission's designs, a published one's kernels."""
        sub = self.get_object()
        return Response(s.JudgeScoreSerializer(selectors.judge_scores(sub, private=self._private(sub)),
                                               many=True).data)

    @extend_schema(responses=s.TaskLogSerializer(many=True))
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def logs(self, request: Request, pk: str | None = None) -> Response:
        """The engine's output tails (capped), for the team and moderators only."""
        sub = self.get_object()
        if not self._private(sub):
            raise ApiError("no such submission", code="not_found", status_code=404)
        return Response(s.TaskLogSerializer(selectors.attempt_results(sub.current_attempt), many=True).data)

    @extend_schema(request=s.DecisionSerializer, responses={200: s.SubmissionSerializer, 409: ERROR})
    @action(detail=True, methods=["post"])
    def decisions(self, request: Request, pk: str | None = None) -> Response:
        """Moderators: approve, reject (reason required) or request a re-run."""
        if not may_moderate(request):
            raise ApiError("only moderators, signed in, may decide on submissions", code="permission_denied", status_code=403)
        sub = self.get_object()
        form = s.DecisionSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            do_moderate(sub, moderator=request.user, decision=form.validated_data["decision"],
                        reason=form.validated_data.get("reason", ""), other_node=form.validated_data["other_node"])
        except actions.InvalidTransition as exc:
            raise ApiError(str(exc), code="invalid_transition", status_code=409) from None
        return Response(s.SubmissionSerializer(selectors.submission_get(sub.pk),
                                               context=self.get_serializer_context()).data)


def _reason(request: Request) -> str:
    """A cancel's or re-run's optional ``reason``, validated like any field: a NUL character or
    more than 4,000 characters is a 400 (it was a database error, a 500, for a NUL)."""
    form = s.ReasonSerializer(data=request.data if hasattr(request.data, "get") else {})
    form.is_valid(raise_exception=True)
    return form.validated_data.get("reason", "")


def _max_upload() -> int:
    return settings.D2K_UPLOAD_MAX_BYTES


class ModerationQueueView(generics.ListAPIView):
    """Moderators: evaluated submissions waiting for a decision, oldest first, a page at a time."""

    serializer_class = s.SubmissionSerializer
    pagination_class = QueueCursorPagination

    def get_queryset(self) -> QuerySet[Submission]:
        if getattr(self, "swagger_fake_view", False):
            return Submission.objects.none()
        if not may_moderate(self.request):
            raise ApiError("only moderators, signed in, may see the moderation queue", code="permission_denied", status_code=403)
        return moderation_queue().prefetch_related("tasks__task")

    def get_serializer_context(self) -> dict:
        return {**super().get_serializer_context(), **viewer_of(self.request).context()}


class TokenViewSet(mixins.ListModelMixin, mixins.CreateModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """The acting team's API tokens: list, create (the secret is in this one response), revoke."""

    serializer_class = s.TokenSerializer
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "tokens"
    pagination_class = CreatedCursorPagination

    def get_queryset(self) -> QuerySet[ApiToken]:
        if getattr(self, "swagger_fake_view", False):
            return ApiToken.objects.none()
        return team_tokens(acting_team(self.request, self.request.query_params.get("team")))

    @extend_schema(request=s.TokenCreateSerializer, responses={201: s.TokenSerializer})
    def create(self, request: Request) -> Response:
        form = s.TokenCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        team = acting_team(request, form.validated_data.get("team"))
        try:
            maker = request.auth if isinstance(request.auth, ApiToken) else None
            issued = token_create(team, name=form.validated_data["name"], actor=request.user,
                                  days=form.validated_data.get("days"),
                                  not_after=maker.expires_at if maker else None)
        except TokenError as exc:
            raise ApiError(str(exc), code="invalid_token_request") from None
        return Response({**s.TokenSerializer(issued.token).data, "token": issued.secret}, status=status.HTTP_201_CREATED)

    def destroy(self, request: Request, pk: str | None = None) -> Response:
        token = self.get_object()  # DRF's lookup: a malformed id is a 404, not a ValueError
        token_revoke(token, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
