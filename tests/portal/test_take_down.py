"""A moderator takes a published result down: rejecting a published submission, or the re-run of
one, removes it from the board, the API and the public pages in the same transaction, and the team
reads why. Until then, a re-run of a published submission leaves the published attempt public.
"""

from __future__ import annotations

import pytest

from portal.audit.models import AuditLog
from portal.moderation.services import do_moderate
from portal.scores.models import SubmissionScore, TaskScore
from portal.submissions import actions
from portal.submissions.constants import Status
from portal.submissions.models import Submission
from tests.portal.factories import expert_bundle, make_team, make_user
from tests.portal.test_portal_pages import client_as, evaluated
from tests.portal.test_state_machine import engine_result, finish_correct

pytestmark = pytest.mark.django_db

REASON = "the kernel caches its output by input pointer"


@pytest.fixture
def published(catalogue, media, django_capture_on_commit_callbacks):
    team, user = make_team("Alpha")
    sub, _ = actions.check_create_submission(team=team, user=user, blob=expert_bundle(), filename="b.zip")
    mod = make_user("mod", moderator=True)
    with django_capture_on_commit_callbacks(execute=True):
        do_moderate(evaluated(sub), moderator=mod, decision="approve")
    return Submission.objects.get(pk=sub.pk), user, mod


def _public(sub: Submission) -> dict[str, object]:
    """What an anonymous visitor sees of the submission, on every public surface."""
    anon = client_as()
    return {
        "page": anon.get(f"/submissions/{sub.pk}/").status_code,
        "api": anon.get(f"/api/v1/submissions/{sub.pk}/").status_code,
        "runs": f'id="submission-{sub.pk}"' in anon.get("/runs/").content.decode(),
        # The board reads these rows (cpu-interpret runs are untimed, so that profile has no board page).
        "scores": SubmissionScore.objects.filter(submission=sub).exists() or TaskScore.objects.filter(submission=sub).exists(),
    }


def test_a_published_result_is_public_everywhere(published):
    sub, _, _ = published
    assert _public(sub) == {"page": 200, "api": 200, "runs": True, "scores": True}


def test_a_moderator_takes_a_published_result_down(published, django_capture_on_commit_callbacks):
    sub, owner, mod = published
    with django_capture_on_commit_callbacks(execute=True):
        do_moderate(sub, moderator=mod, decision="reject", reason=REASON)
    sub = Submission.objects.get(pk=sub.pk)
    assert sub.status == Status.REJECTED and sub.published_attempt is None and sub.published_at is None
    assert _public(sub) == {"page": 404, "api": 404, "runs": False, "scores": False}
    own = client_as(owner).get(f"/submissions/{sub.pk}/").content.decode()
    assert REASON in own and "rejected" in own
    row = AuditLog.objects.filter(submission_id=sub.pk, to_status=Status.REJECTED).get()
    assert row.data["unpublished_attempt"] == 1 and row.reason == REASON


def test_taking_down_makes_the_cached_board_stale(published, django_capture_on_commit_callbacks):
    from portal.scores.services import new_board_generation

    sub, _, mod = published
    with django_capture_on_commit_callbacks() as callbacks:
        do_moderate(sub, moderator=mod, decision="reject", reason=REASON)
    assert new_board_generation in callbacks


def test_taking_down_needs_a_reason(published):
    sub, _, mod = published
    with pytest.raises(actions.InvalidTransition):
        do_moderate(sub, moderator=mod, decision="reject", reason="  ")
    assert Submission.objects.get(pk=sub.pk).status == Status.PUBLISHED


def test_a_rerun_keeps_the_published_attempt_public_until_its_own_verdict(published, django_capture_on_commit_callbacks):
    sub, _, mod = published
    do_moderate(sub, moderator=mod, decision="rerun", reason="check the timing again")
    sub = Submission.objects.get(pk=sub.pk)
    assert sub.status == Status.QUEUED and _public(sub) == {"page": 200, "api": 200, "runs": True, "scores": True}
    review = client_as(mod).get(f"/moderation/{sub.pk}/").content.decode()
    assert "Attempt 1 is published and stays public" in review
    claim = actions.do_start_evaluation(sub.pk, 2, worker="w")
    attempt = sub.attempts.get(number=2)
    actions.do_record_task_result(attempt.pk, claim, engine_result())
    finish_correct(attempt.pk, claim)
    with django_capture_on_commit_callbacks(execute=True):
        do_moderate(Submission.objects.get(pk=sub.pk), moderator=mod, decision="reject", reason=REASON)
    sub = Submission.objects.get(pk=sub.pk)
    assert sub.published_attempt is None
    assert _public(sub) == {"page": 404, "api": 404, "runs": False, "scores": False}
    assert dict(sub.attempts.values_list("number", "status")) == {1: Status.REJECTED, 2: Status.REJECTED}


def test_the_review_page_offers_the_take_down(published):
    sub, _, mod = published
    html = client_as(mod).get(f"/moderation/{sub.pk}/").content.decode()
    assert "Take down (reject)" in html
    response = client_as(mod).post(f"/moderation/{sub.pk}/reject/", {"reason": REASON})
    assert response.status_code == 302
    assert Submission.objects.get(pk=sub.pk).status == Status.REJECTED


def test_a_rerun_on_another_node_names_the_node_to_avoid(published, client):
    """The re-run avoids the worker the latest earlier attempt ran on; with no such worker there is
    no "other" node and the request is refused. The API takes the same choice."""
    sub, _, mod = published
    sub.attempts.update(worker="")
    with pytest.raises(actions.InvalidTransition, match="no earlier attempt ran on a node"):
        do_moderate(sub, moderator=mod, decision="rerun", other_node=True)
    sub.attempts.filter(number=1).update(worker="gpu3@node-a")
    from rest_framework.test import APIClient

    api = APIClient(HTTP_HOST="localhost")
    api.force_login(mod)
    response = api.post(f"/api/v1/submissions/{sub.pk}/decisions/", {"decision": "rerun", "other_node": True},
                        format="json")
    assert response.status_code == 200, response.json()
    attempt = sub.attempts.get(number=2)
    assert attempt.avoid_worker == "gpu3@node-a" and attempt.status == Status.QUEUED
    row = AuditLog.objects.filter(submission_id=sub.pk, to_status=Status.QUEUED).latest("pk")
    assert row.data["avoid_worker"] == "gpu3@node-a"
    review = client_as(mod).get(f"/moderation/{sub.pk}/").content.decode()
    assert "asked not to run on gpu3@node-a" in review
