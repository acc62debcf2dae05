"""Server-rendered submission pages: submit, list, detail with live progress, kernel, transcript.

Permission checks go through :mod:`portal.submissions.permissions`; a submission the user may not
see is a 404 (its existence is not revealed). The detail page polls a small HTML fragment with
``static/js/poll.js``; without JavaScript a meta refresh does the same while the run is active.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect, render
from django.utils.safestring import mark_safe
from markdown_it import MarkdownIt

from evaluator.bundle_problems import BundleInvalid
from leaderboard.guidance_versions import guidance_state, published_versions
from portal.paging import page_of
from portal.submissions import actions, permissions, selectors
from portal.submissions.forms import ReasonForm, SubmitForm
from portal.submissions.highlight import highlight_python
from portal.submissions.quotas import QuotaExceeded
from portal.submissions.storage import blob_read
from portal.submissions.transcripts import event_matches, transcript_events
from portal.submissions.validation import single_kernel_bundle
from portal.teams.selectors import teams_of


@login_required
def submit(request: HttpRequest) -> HttpResponse:
    teams = teams_of(request.user)
    form = SubmitForm(request.POST or None, request.FILES or None, teams=teams)
    problems: list = []
    status = 200
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        upload = data["upload"]
        blob = upload.read()
        if form.is_single_kernel:
            blob = single_kernel_bundle(blob, slug=data["task"], model=data["model"], provider=data["provider"],
                                        harness=data["harness"], guidance=data["guidance"], budget=data["budget"],
                                        guidance_sha256=data["guidance_sha256"])
        try:
            sub, _ = actions.check_create_submission(team=data["team"], user=request.user, blob=blob,
                                                     filename=upload.name, hardware=data["hardware"])
        except BundleInvalid as exc:
            problems, status = exc.problems, 400
        except QuotaExceeded as exc:
            form.add_error(None, f"{exc}; try again in {exc.retry_after_s} s")
            status = 429
        else:
            messages.success(request, f"Submission #{sub.pk} is queued.")
            return redirect("submissions:detail", pk=sub.pk)
    elif request.method == "POST":
        status = 400
    return render(request, "submissions/submit.html", {"form": form, "problems": problems, "has_team": teams.exists()},
                  status=status)


@login_required
def mine(request: HttpRequest) -> HttpResponse:
    page = page_of(request, selectors.submissions_of_teams(request.user))
    return render(request, "submissions/list.html", {"submissions": page, "page": page, "title": "Your submissions"})


def published(request: HttpRequest) -> HttpResponse:
    page = page_of(request, selectors.published_newest_first())
    return render(request, "submissions/list.html",
                  {"submissions": page, "page": page, "title": "Published runs", "public": True})


def _visible(request: HttpRequest, pk: int):  # noqa: ANN202
    sub = selectors.submission_get(pk)
    if sub is None or not permissions.can_see(request.user, sub):
        raise Http404("no such submission")
    return sub


def _context(request: HttpRequest, sub) -> dict:  # noqa: ANN001
    private = permissions.can_see_private(request.user, sub)
    attempt = sub.current_attempt if private else sub.published_attempt
    results = selectors.attempt_results(attempt)
    entries = list(sub.tasks.all())
    versions = published_versions(t.task for t in entries)
    return {
        "sub": sub, "private": private, "attempt": attempt, "results": results, "entries": entries,
        "guidance_states": {t.pk: guidance_state(t.task, sub.guidance, t.guidance_sha256, versions) for t in entries},
        "scores": {r.pk: selectors.task_score(r) for r in results},
        "judges": selectors.judge_scores_by_task(selectors.judge_scores(sub, private=private)),
        "attempts": selectors.attempts_of(sub) if private else [],
        "can_act": permissions.can_act(request.user, sub),
        "cancellable": sub.status in actions.TEAM_CANCELLABLE,
        "rerunnable": sub.status in actions.TEAM_RERUNNABLE,
        # Outsiders see the published attempt, which never changes: nothing to poll.
        "progress": selectors.progress_of(sub) if private else {"final": True},
        "reason_form": ReasonForm(),
    }


def detail(request: HttpRequest, pk: int) -> HttpResponse:
    sub = _visible(request, pk)
    return render(request, "submissions/detail.html", _context(request, sub))


def progress(request: HttpRequest, pk: int) -> HttpResponse:
    """The live part of the detail page, polled while the run is active."""
    sub = _visible(request, pk)
    return render(request, "submissions/_live.html", _context(request, sub))


def kernel(request: HttpRequest, pk: int, slug: str) -> HttpResponse:
    sub = _visible(request, pk)
    task = next((t for t in sub.tasks.all() if t.task.slug == slug), None)
    if task is None or not task.kernel_source:
        raise Http404("no such kernel")
    return render(request, "submissions/kernel.html",
                  {"sub": sub, "task": task, "code": highlight_python(task.kernel_source)})


def design(request: HttpRequest, pk: int, slug: str) -> HttpResponse:
    """A design-only submission's document, rendered as Markdown with raw HTML off (escaped)."""
    sub = _visible(request, pk)
    task = next((t for t in sub.tasks.all() if t.task.slug == slug), None)
    if task is None or not task.design_source:
        raise Http404("no such design document")
    body = mark_safe(MarkdownIt("commonmark", {"html": False}).enable("table").render(task.design_source))  # noqa: S308
    return render(request, "submissions/design.html", {"sub": sub, "task": task, "body": body})


def transcript(request: HttpRequest, pk: int, slug: str) -> HttpResponse:
    sub = _visible(request, pk)
    task = next((t for t in sub.tasks.all() if t.task.slug == slug), None)
    if task is None or not task.transcript_storage_name:
        raise Http404("no transcript")
    parsed = transcript_events(blob_read(task.transcript_storage_name))
    query = request.GET.get("q", "").strip()[:200]
    turns: dict[int, list] = {}
    for event in parsed.events:
        turns.setdefault(event.turn, []).append((event, bool(query) and event_matches(event, query)))
    shown = [(n, events) for n, events in sorted(turns.items()) if not query or any(hit for _, hit in events)]
    return render(request, "submissions/transcript.html",
                  {"sub": sub, "task": task, "t": parsed, "turns": shown, "query": query, "turn_count": len(turns)})


@login_required
def act(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    sub = _visible(request, pk)
    if not permissions.can_act(request.user, sub):
        raise Http404("no such submission")
    form = ReasonForm(request.POST)
    reason = form.cleaned_data["reason"] if form.is_valid() else ""
    try:
        if action == "cancel":
            actions.do_cancel(sub, user=request.user, reason=reason)
            messages.success(request, "Cancelled.")
        else:
            attempt = actions.do_rerun(sub, user=request.user, reason=reason)
            messages.success(request, f"Attempt {attempt.number} is queued.")
    except actions.InvalidTransition as exc:
        messages.error(request, str(exc))
    except QuotaExceeded as exc:
        messages.error(request, f"{exc}; try again in {exc.retry_after_s} s")
    return redirect("submissions:detail", pk=sub.pk)


def bundle_format(request: HttpRequest) -> HttpResponse:
    """``docs/bundle-format.md`` rendered (markdown-it with raw HTML off, so nothing is injected)."""
    text = (settings.BASE_DIR / "docs" / "bundle-format.md").read_text(encoding="utf-8")
    body = mark_safe(MarkdownIt("commonmark", {"html": False}).enable("table").render(text))  # noqa: S308
    return render(request, "submissions/bundle_format.html", {"body": body})
