"""End to end with a real worker on real Redis and PostgreSQL: an expert kernel uploaded through
the API goes received → validated → queued → running → evaluated, is judged by the engine in
Triton's interpreter, survives a duplicate delivery, and is published by a moderator."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from evaluator.runner import gpu_present
from portal.audit.models import AuditLog
from portal.submissions.models import EvaluationAttempt, Submission, TaskResult, WorkerBeacon, WorkloadResult
from portal.submissions.tasks import evaluate_submission_task
from portal.teams.services import token_create
from tests.portal.factories import expert_bundle, make_team, make_user

pytestmark = [pytest.mark.integration, pytest.mark.interpreter, pytest.mark.timeout(600)]


def status_of(pk: int) -> str:
    return Submission.objects.values_list("status", flat=True).get(pk=pk)


def test_upload_evaluate_moderate_publish(transactional_db, catalogue, media, portal_worker):
    team, owner = make_team("Alpha")
    moderator = make_user("mod", moderator=True)
    client = APIClient(HTTP_HOST="localhost")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(team, name='ci', actor=owner).secret}")
    worker = portal_worker()

    response = client.post("/api/v1/submissions/", {"bundle": SimpleUploadedFile("b.zip", expert_bundle())},
                           format="multipart", HTTP_IDEMPOTENCY_KEY="lifecycle-1")
    assert response.status_code == 201, response.json()
    pk = response.json()["id"]
    # A duplicate delivery of the same (submission, attempt), as a broker redelivery would make.
    evaluate_submission_task.apply_async(args=[pk, 1], queue="cpu.interpret")

    worker.wait_for("the evaluation", lambda: status_of(pk) not in ("queued", "running"), timeout_s=300)
    assert status_of(pk) == "evaluated", EvaluationAttempt.objects.get(submission_id=pk).reason
    worker.wait_for("the duplicate delivery to be skipped", lambda: "skipped: finished" in worker.log(), 60)

    attempt = EvaluationAttempt.objects.get(submission_id=pk)
    assert attempt.mode == "interpreter" and attempt.fingerprint["triton"] and attempt.claim == ""
    assert attempt.progress.get("task_count") == 1
    result = TaskResult.objects.get(attempt=attempt)
    assert result.status == "correct" and result.task.slug == "silu-and-mul"
    assert WorkloadResult.objects.filter(task_result=result, smoke=True, correct=True).count() == 3
    assert TaskResult.objects.count() == 1 and WorkloadResult.objects.count() == 3
    assert WorkerBeacon.objects.filter(hostname=worker.name).exists()

    anon = APIClient(HTTP_HOST="localhost")
    assert anon.get(f"/api/v1/submissions/{pk}/").status_code == 404  # not public before approval
    mod = APIClient(HTTP_HOST="localhost")
    mod.force_login(moderator)
    assert [s["id"] for s in mod.get("/api/v1/moderation/queue/").json()["results"]] == [pk]
    decided = mod.post(f"/api/v1/submissions/{pk}/decisions/", {"decision": "approve", "reason": "clean"},
                       format="json")
    assert decided.status_code == 200 and decided.json()["status"] == "published"

    public = anon.get(f"/api/v1/submissions/{pk}/").json()
    assert public["public"] and public["status"] == "published"
    results = anon.get(f"/api/v1/submissions/{pk}/results/").json()
    assert results[0]["status"] == "correct" and results[0]["score"]["correct"] is False  # untimed: not scored
    assert anon.get(f"/api/v1/submissions/{pk}/logs/").status_code in (401, 403, 404)

    trail = list(AuditLog.objects.filter(submission_id=pk, action="submission.transition")
                 .values_list("from_status", "to_status", "actor_label"))
    assert [(f, t) for f, t, _ in trail] == [("", "received"), ("received", "validated"), ("validated", "queued"),
                                             ("queued", "running"), ("running", "evaluated"),
                                             ("evaluated", "published")]
    assert trail[3][2].startswith("system:worker") and trail[-1][2] == "mod"

    evaluate_submission_task.apply_async(args=[pk, 1], queue="cpu.interpret")  # redelivered after the fact
    worker.wait_for("the late duplicate", lambda: worker.log().count("skipped: finished") >= 2, 60)
    assert status_of(pk) == "published" and TaskResult.objects.count() == 1 and WorkloadResult.objects.count() == 3


def test_worker_effective_configuration_for_long_jobs(transactional_db, catalogue, media, portal_worker):
    """The worker's own view of its configuration, asked over the broker."""
    from portal.celery import app

    worker = portal_worker()
    replies = app.control.inspect(destination=[worker.name], timeout=10).conf(with_defaults=True)
    assert replies and worker.name in replies, worker.log()
    conf = replies[worker.name]
    assert conf["task_acks_late"] is True and conf["task_reject_on_worker_lost"] is True
    assert conf["worker_prefetch_multiplier"] == 1
    assert conf["task_soft_time_limit"] < conf["task_time_limit"]
    assert conf["broker_transport_options"]["visibility_timeout"] > conf["task_time_limit"]
    assert "reap-stale-runs" in conf["beat_schedule"]
    registered = app.control.inspect(destination=[worker.name], timeout=10).registered()[worker.name]
    assert "portal.submissions.tasks.evaluate_submission_task" in registered
    assert "portal.submissions.tasks.reap_stale_runs_task" in registered


@pytest.mark.skipif(gpu_present(), reason="needs a machine without a GPU")
def test_infrastructure_errors_are_retried_then_shown_and_use_no_quota(transactional_db, catalogue, media,
                                                                       portal_worker):
    """A GPU submission reaching a worker without a GPU is our fault: requeued, retried, then ``error``."""
    team, owner = make_team("Alpha", daily_quota=1)
    worker = portal_worker("gpu.h200,web", D2K_INFRA_RETRIES="1")
    client = APIClient(HTTP_HOST="localhost")
    client.force_login(owner)
    response = client.post("/api/v1/submissions/", {"bundle": SimpleUploadedFile("b.zip", expert_bundle()),
                                                     "hardware": "h200"}, format="multipart")
    assert response.status_code == 201, response.json()
    pk = response.json()["id"]
    worker.wait_for("the error", lambda: status_of(pk) == "error", timeout_s=120)
    attempt = EvaluationAttempt.objects.get(submission_id=pk)
    assert attempt.infra_retries == 1 and attempt.error_code == "portal:infra:wrong-hardware"
    trail = list(AuditLog.objects.filter(submission_id=pk, action="submission.transition")
                 .values_list("to_status", flat=True))
    assert trail == ["received", "validated", "queued", "running", "queued", "running", "error"]
    # The error was ours: it does not count against the team's daily quota of one.
    again = client.post("/api/v1/submissions/", {"bundle": SimpleUploadedFile("b.zip", expert_bundle(guidance="L1")),
                                                  "hardware": "cpu-interpret"}, format="multipart")
    assert again.status_code == 201, again.json()


def test_a_rerun_on_another_node_is_handed_back_by_the_node_it_avoids(transactional_db, catalogue, media,
                                                                       portal_worker):
    """A moderator asks for a re-run on another node than the first attempt's. The only worker is
    that node: it hands the attempt back to the queue D2K_OTHER_NODE_TRIES times, then runs it
    (no other node took it) and the audit log says so."""
    from portal.moderation.services import do_moderate
    from portal.submissions.actions import check_create_submission

    team, owner = make_team("Alpha")
    worker = portal_worker(D2K_OTHER_NODE_TRIES="2", D2K_OTHER_NODE_WAIT_S="0")
    sub, _ = check_create_submission(team=team, user=owner, blob=expert_bundle(), filename="b.zip")
    worker.wait_for("the first attempt", lambda: status_of(sub.pk) not in ("queued", "running"), timeout_s=300)
    assert status_of(sub.pk) == "evaluated"
    assert EvaluationAttempt.objects.get(submission=sub, number=1).worker == worker.name

    do_moderate(Submission.objects.get(pk=sub.pk), moderator=make_user("mod", moderator=True), decision="rerun",
                reason="check it on another GPU", other_node=True)
    second = EvaluationAttempt.objects.get(submission=sub, number=2)
    assert second.avoid_worker == worker.name
    worker.wait_for("the second attempt", lambda: status_of(sub.pk) not in ("queued", "running"), timeout_s=300)
    assert status_of(sub.pk) == "evaluated" and worker.log().count("handed back") == 2
    note = AuditLog.objects.get(submission_id=sub.pk, action="attempt.node")
    assert "no other node took attempt 2 after 2 hand-backs" in note.reason
    assert EvaluationAttempt.objects.get(pk=second.pk).worker == worker.name
