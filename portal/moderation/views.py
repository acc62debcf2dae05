"""The moderation queue and the decision page; every view requires ``moderation.moderate``."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from portal.moderation.evidence import attempt_variance, moderation_queue, submission_evidence
from portal.moderation.models import Decision
from portal.moderation.permissions import MODERATE_PERMISSION
from portal.moderation.services import do_moderate
from portal.paging import page_of
from portal.submissions import actions, selectors
from portal.submissions.forms import ReasonForm

moderator_required = permission_required(MODERATE_PERMISSION, raise_exception=True)


@login_required
@moderator_required
def queue(request: HttpRequest) -> HttpResponse:
    return render(request, "moderation/queue.html", {"submissions": page_of(request, moderation_queue())})


@login_required
@moderator_required
def review(request: HttpRequest, pk: int) -> HttpResponse:
    sub = selectors.submission_get(pk)
    if sub is None:
        raise Http404("no such submission")
    results = selectors.attempt_results(sub.current_attempt)
    return render(request, "moderation/review.html", {
        "sub": sub, "attempt": sub.current_attempt, "results": results, "private": True,
        "scores": {r.pk: selectors.task_score(r) for r in results},
        "judge_scores": selectors.judge_scores(sub),
        "evidence": submission_evidence(sub), "variance": attempt_variance(sub),
        "attempts": selectors.attempts_of(sub), "form": ReasonForm(), "decisions": Decision,
    })


@login_required
@moderator_required
@require_POST
def decide(request: HttpRequest, pk: int, decision: str) -> HttpResponse:
    sub = selectors.submission_get(pk)
    if sub is None or decision not in Decision.values:
        raise Http404("no such submission")
    form = ReasonForm(request.POST)
    reason = form.cleaned_data["reason"] if form.is_valid() else ""
    try:
        do_moderate(sub, moderator=request.user, decision=decision, reason=reason,
                    other_node=decision == Decision.RERUN and request.POST.get("node") == "other")
    except actions.InvalidTransition as exc:
        messages.error(request, str(exc))
        return redirect("moderation:review", pk=sub.pk)
    messages.success(request, f"Submission #{sub.pk}: {Decision(decision).label}.")
    return redirect("moderation:queue")
