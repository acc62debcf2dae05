"""The state machine without a worker: claims, duplicate deliveries, takeover, the reaper, cancel,
re-runs as new attempts, refused transitions, quotas under concurrency, the append-only audit log."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from evaluator.hardware import PROFILES
from evaluator.result import Candidate, RunResult, TrialResult, WorkloadResult
from evaluator.result import TaskResult as EngineTaskResult
from evaluator.runner import _local_fingerprint
from portal.audit.models import AppendOnlyError, AuditLog
from portal.moderation.models import ModerationDecision
from portal.moderation.services import do_moderate
from portal.submissions import actions
from portal.submissions.actions import InvalidTransition, check_create_submission
from portal.submissions.constants import Status
from portal.submissions.models import EvaluationAttempt, Submission, TaskResult
from portal.submissions.quotas import QuotaExceeded
from tests.portal.factories import expert_bundle, make_team, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def submission(catalogue, media):
    team, user = make_team("Alpha")
    sub, _ = check_create_submission(team=team, user=user, blob=expert_bundle(), filename="b.zip")
    return sub


def engine_result(slug: str = "silu-and-mul", status: str = "correct", code: str = "") -> EngineTaskResult:
    trial = TrialResult(trial=0, seed=1, passed=status == "correct")
    workloads = [WorkloadResult(name=f"S{i}", smoke=True, params={"T": i}, flops=1.0, bytes=1.0,
                                correct=status == "correct", trials=[trial]) for i in (1, 2)]
    return EngineTaskResult(slug=slug, status=status, error_code=code, workloads=workloads)


def test_a_second_delivery_does_nothing_while_the_first_runs(submission):
    claim = actions.do_start_evaluation(submission.pk, 1, worker="w1")
    assert claim and Submission.objects.get(pk=submission.pk).status == Status.RUNNING
    assert actions.do_start_evaluation(submission.pk, 1, worker="w2") is None
    attempt = EvaluationAttempt.objects.get(submission=submission)
    assert actions.do_record_task_result(attempt.pk, claim, engine_result())
    assert actions.do_record_task_result(attempt.pk, claim, engine_result())  # the same result again: an update
    assert not actions.do_record_task_result(attempt.pk, "someone-else", engine_result())
    assert TaskResult.objects.count() == 1 and TaskResult.objects.get().workloads.count() == 2


def test_a_stale_delivery_is_taken_over_and_loses_its_claim(submission, settings):
    first = actions.do_start_evaluation(submission.pk, 1, worker="w1")
    attempt = EvaluationAttempt.objects.get(submission=submission)
    actions.do_record_task_result(attempt.pk, first, engine_result())
    EvaluationAttempt.objects.filter(pk=attempt.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    second = actions.do_start_evaluation(submission.pk, 1, worker="w2")
    assert second and second != first
    assert TaskResult.objects.count() == 0  # partial results of the lost delivery are cleared
    assert not actions.do_heartbeat(attempt.pk, first, {}) and actions.do_heartbeat(attempt.pk, second, {"x": 1})
    assert AuditLog.objects.filter(action="attempt.takeover").count() == 1


def test_the_reaper_requeues_then_gives_up_with_error(submission, settings):
    settings.D2K_INFRA_RETRIES = 1
    attempt = EvaluationAttempt.objects.get(submission=submission)
    for expected in (Status.QUEUED, Status.ERROR):
        assert actions.do_start_evaluation(submission.pk, 1, worker="w1")
        EvaluationAttempt.objects.filter(pk=attempt.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
        assert actions.do_reap_stale_runs() == [(attempt.pk, expected)]
        assert Submission.objects.get(pk=submission.pk).status == expected
    attempt.refresh_from_db()
    assert attempt.infra_retries == 1 and attempt.error_code == "portal:infra:heartbeat-lost"
    assert actions.do_reap_stale_runs() == []
    trail = list(AuditLog.objects.filter(submission_id=submission.pk).values_list("to_status", "actor_label"))
    assert trail[-3:] == [("queued", "system:reaper"), ("running", "system:worker w1"), ("error", "system:reaper")]


def run(*tasks: EngineTaskResult) -> RunResult:
    """An interpreter run's result holding ``tasks``."""
    return RunResult(engine_version="t", command="check", mode="interpreter", timing_taken=False, started_at="",
                     finished_at="", smoke=True, candidate=Candidate(path="-", sha256=""),
                     hardware=PROFILES["cpu-interpret"].record(), fingerprint=_local_fingerprint(), tasks=list(tasks))


def test_finish_decides_evaluated_failed_or_retry(submission, settings):
    attempt = EvaluationAttempt.objects.get(submission=submission)
    claim = actions.do_start_evaluation(submission.pk, 1, worker="w")
    assert actions.do_finish_evaluation(attempt.pk, claim, run(engine_result(code="eval:infra:error", status="error"))) \
        == Status.QUEUED
    claim = actions.do_start_evaluation(submission.pk, 1, worker="w")
    assert actions.do_finish_evaluation(attempt.pk, claim, run(engine_result(status="incorrect",
                                                                             code="eval:user:wrong-answer"))) == Status.FAILED
    attempt.refresh_from_db()
    assert attempt.error_code == "eval:user:wrong-answer" and "silu-and-mul" in attempt.reason


def test_cancel_rerun_and_refused_moves(submission):
    team_user = submission.submitted_by
    with pytest.raises(InvalidTransition):
        actions.do_rerun(submission, user=team_user)  # queued: nothing to re-run yet
    actions.do_cancel(submission, user=team_user, reason="wrong file")
    with pytest.raises(InvalidTransition):
        actions.do_cancel(submission, user=team_user)
    attempt = actions.do_rerun(submission, user=team_user, reason="right file")
    assert attempt.number == 2 and EvaluationAttempt.objects.filter(submission=submission).count() == 2
    assert EvaluationAttempt.objects.get(submission=submission, number=1).status == Status.CANCELLED
    assert actions.do_start_evaluation(submission.pk, 1, worker="w") is None  # the old attempt never runs again
    with pytest.raises(InvalidTransition):
        actions._transition(Submission.objects.get(pk=submission.pk), Status.PUBLISHED, actor=actions.Actor())


def test_only_moderators_decide_and_a_rejection_needs_a_reason(submission):
    from django.core.exceptions import PermissionDenied

    claim = actions.do_start_evaluation(submission.pk, 1, worker="w")
    attempt = EvaluationAttempt.objects.get(submission=submission)
    actions.do_record_task_result(attempt.pk, claim, engine_result())
    finish_correct(attempt.pk, claim)
    with pytest.raises(PermissionDenied):
        do_moderate(submission, moderator=submission.submitted_by, decision="approve")
    mod = make_user("mod", moderator=True)
    with pytest.raises(InvalidTransition):
        do_moderate(submission, moderator=mod, decision="reject", reason=" ")
    do_moderate(submission, moderator=mod, decision="rerun", reason="noisy node")
    sub = Submission.objects.get(pk=submission.pk)
    assert sub.status == Status.QUEUED and sub.current_attempt.number == 2 and not sub.is_public
    assert ModerationDecision.objects.get().decision == "rerun"


def finish_correct(attempt_id: int, claim: str) -> None:
    assert actions.do_finish_evaluation(attempt_id, claim, run(engine_result())) == Status.EVALUATED


def test_audit_rows_cannot_be_changed(submission):
    row = AuditLog.objects.filter(submission_id=submission.pk).first()
    row.reason = "rewritten"
    with pytest.raises(AppendOnlyError):
        row.save()
    with pytest.raises(AppendOnlyError):
        row.delete()
    with pytest.raises(AppendOnlyError):
        AuditLog.objects.filter(pk=row.pk).update(reason="x")
    with pytest.raises(AppendOnlyError):
        AuditLog.objects.all().delete()


@pytest.mark.django_db(transaction=True)
def test_quotas_hold_under_concurrent_submits(catalogue, media):
    """Eight threads submit at once against a concurrency quota of three: exactly three get in."""
    team, user = make_team("Busy", concurrent_quota=3, daily_quota=100)
    outcomes: list[str] = []
    barrier = threading.Barrier(8)

    def submit(i: int) -> None:
        try:
            barrier.wait()
            check_create_submission(team=team, user=user, blob=expert_bundle(notes=f"run {i}"), filename="b.zip")
            outcomes.append("ok")
        except QuotaExceeded as exc:
            outcomes.append(exc.kind)
        except Exception as exc:  # any other outcome is a failure the assertion below names
            outcomes.append(f"error: {exc!r}")
        finally:
            connection.close()

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(outcomes) == ["concurrent"] * 5 + ["ok"] * 3
    assert Submission.objects.filter(team=team).count() == 3


def test_an_attempt_cannot_be_moved_outside_the_machine(submission):
    """An attempt's status goes through the same machine as its submission's: a failed attempt
    cannot be published or rejected, and the refusal writes nothing."""
    attempt = EvaluationAttempt.objects.get(submission=submission)
    EvaluationAttempt.objects.filter(pk=attempt.pk).update(status=Status.FAILED)
    attempt.refresh_from_db()
    for to in (Status.PUBLISHED, Status.REJECTED):
        with pytest.raises(InvalidTransition, match=f"attempt 1 cannot go from failed to {to}"):
            actions._set_attempt_status(attempt, to)
        assert EvaluationAttempt.objects.get(pk=attempt.pk).status == Status.FAILED
    actions._set_attempt_status(attempt, Status.QUEUED)  # a re-run's move is in the machine
    assert EvaluationAttempt.objects.get(pk=attempt.pk).status == Status.QUEUED
