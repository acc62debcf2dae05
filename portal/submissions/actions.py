"""The submission state machine: every status change happens here, and each one is audited.

``received → validated → queued → running → evaluated → published | rejected``; ``failed`` is the
submission's fault (compile error, wrong results, timeout), ``error`` is ours (retried up to
``D2K_INFRA_RETRIES`` times, then shown; it uses no quota), ``cancelled`` is a team's or a
moderator's decision. A re-run adds an :class:`EvaluationAttempt` and never overwrites one.

:data:`ALLOWED` is the whole machine; :func:`_transition` is the only code that assigns a
submission's status (an attempt's goes through :func:`_set_attempt_status`, checked against the
same machine) and it writes the audit row (who, when, from, to, why) in the same transaction. The public
functions are ``check_*`` (validate, then act) and ``do_*`` (act); views, the API, the Celery
tasks and the moderation service call them and nothing else.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone

from agents.judge import JudgeResult
from evaluator.bundle_problems import BundleInvalid, Problem
from evaluator.result import RunResult
from evaluator.result import TaskResult as EngineTaskResult
from leaderboard.models import Task
from portal.audit.services import audit_record
from portal.scores.models import JudgeScore
from portal.scores.services import record_scores, remove_scores
from portal.scores.tasks import queue_judging
from portal.submissions.constants import (
    ATTEMPT_FINAL_STATUSES,
    INFRA_LOST,
    Status,
)
from portal.submissions.dispatch import dispatch_on_commit, queue_for
from portal.submissions.models import (
    AgentModel,
    Bundle,
    EvaluationAttempt,
    Harness,
    Submission,
    SubmissionTask,
    TaskResult,
    WorkloadResult,
)
from portal.submissions.quotas import quota_check_locked
from portal.submissions.storage import BlobWriter
from portal.submissions.validation import KnownTask, ValidatedBundle, check_bundle
from portal.teams.models import Team

S = Status
ALLOWED: dict[str, frozenset[str]] = {
    S.RECEIVED: frozenset({S.VALIDATED}),
    S.VALIDATED: frozenset({S.QUEUED}),
    S.QUEUED: frozenset({S.RUNNING, S.CANCELLED, S.ERROR}),
    S.RUNNING: frozenset({S.EVALUATED, S.FAILED, S.ERROR, S.QUEUED, S.CANCELLED}),
    S.EVALUATED: frozenset({S.PUBLISHED, S.REJECTED, S.QUEUED, S.CANCELLED}),
    S.PUBLISHED: frozenset({S.QUEUED, S.REJECTED}),  # rejected: taken down by a moderator
    S.REJECTED: frozenset({S.QUEUED}),
    S.FAILED: frozenset({S.QUEUED}),
    S.ERROR: frozenset({S.QUEUED}),
    S.CANCELLED: frozenset({S.QUEUED}),
}
#: From where a team may cancel its own submission, and re-run it (moderators may re-run more).
TEAM_CANCELLABLE = frozenset({S.QUEUED, S.RUNNING, S.EVALUATED})
TEAM_RERUNNABLE = frozenset({S.FAILED, S.ERROR, S.CANCELLED})
MODERATOR_RERUNNABLE = frozenset({S.EVALUATED, S.PUBLISHED, S.REJECTED, S.FAILED, S.ERROR, S.CANCELLED})


class InvalidTransition(Exception):
    """The move is not in :data:`ALLOWED` (or not allowed to this actor); nothing was written."""

    def __init__(self, frm: str, to: str, why: str = ""):
        self.frm, self.to = frm, to
        super().__init__(why or f"a submission cannot go from {frm} to {to}")


class IdempotencyConflict(Exception):
    """The Idempotency-Key was used before with a different request."""


@dataclass(frozen=True)
class Actor:
    """Who causes a transition: a user, or a named system component (worker, reaper)."""

    user: AbstractBaseUser | None = None
    system: str = "system"

    @property
    def label(self) -> str:
        return self.user.get_username() if self.user is not None else f"system:{self.system}"


def _transition(sub: Submission, to: str, *, actor: Actor, reason: str = "", attempt: EvaluationAttempt | None = None,
                data: dict[str, Any] | None = None) -> None:
    """The one assignment of ``status``; the caller holds the submission's row lock."""
    frm = sub.status
    if to not in ALLOWED[frm]:
        raise InvalidTransition(frm, to)
    sub.status = to
    sub.save(update_fields=["status", "updated_at"])
    if attempt is not None:
        _set_attempt_status(attempt, to)
    audit_record("submission.transition", sub, actor=actor.user, system=actor.label, from_status=frm, to_status=to,
                 reason=reason, submission_id=sub.pk,
                 data={**(data or {}), **({"attempt": attempt.number} if attempt is not None else {})})


def _set_attempt_status(attempt: EvaluationAttempt, to: str) -> None:
    """An attempt's status follows its submission's moves through :data:`ALLOWED`; the only other
    caller is :func:`do_reject`, which takes down an attempt published before a re-run (its move is
    recorded in the submission's audit row). A move outside the machine raises, writing nothing."""
    if attempt.status != to and to not in ALLOWED.get(attempt.status, frozenset()):
        raise InvalidTransition(attempt.status, to, f"attempt {attempt.number} cannot go from {attempt.status} to {to}")
    attempt.status = to
    attempt.save(update_fields=["status"])


def _locked(submission_id: int) -> Submission:
    return Submission.objects.select_for_update().get(pk=submission_id)


def _new_attempt(sub: Submission, *, actor: Actor, reason: str, hardware: str | None = None,
                 avoid_worker: str = "", team_rerun: bool = False) -> EvaluationAttempt:
    number = (sub.attempts.order_by("-number").values_list("number", flat=True).first() or 0) + 1
    if hardware and hardware != sub.hardware:
        raise InvalidTransition(sub.status, S.QUEUED, "a re-run on another hardware profile is a new submission")
    attempt = EvaluationAttempt.objects.create(submission=sub, number=number, status=S.QUEUED,
                                               queue=queue_for(sub.hardware, sub.mode), requested_by_label=actor.label,
                                               request_reason=reason, avoid_worker=avoid_worker,
                                               team_rerun=team_rerun)
    sub.current_attempt = attempt
    sub.save(update_fields=["current_attempt", "updated_at"])
    return attempt


# --- creation -----------------------------------------------------------------------------------

def known_tasks() -> dict[str, KnownTask]:
    rows = Task.objects.filter(retired=False).values_list("slug", "spec_json")
    return {slug: KnownTask(slug, list((spec or {}).get("forbidden", {}).get("python", []))) for slug, spec in rows}


def request_digest(blob: bytes, hardware: str | None) -> str:
    return hashlib.sha256(blob + b"\0" + (hardware or "").encode()).hexdigest()


def _replay(team: Team, key: str, digest: str) -> Submission | None:
    if not key:
        return None
    existing = Submission.objects.filter(team=team, idempotency_key=key).first()
    if existing is not None and existing.request_sha256 != digest:
        raise IdempotencyConflict(f"Idempotency-Key {key!r} was used for a different upload")
    return existing


def _files_present(sub: Submission) -> bool:
    names = [sub.bundle.storage_name, *sub.tasks.exclude(transcript_storage_name="")
             .values_list("transcript_storage_name", flat=True)]
    return all(default_storage.exists(name) for name in names)


def check_create_submission(*, team: Team, user: AbstractBaseUser, blob: bytes, filename: str,
                            hardware: str | None = None, idempotency_key: str = "") -> tuple[Submission, bool]:
    """Validate an upload, store it and queue it; returns (submission, created).

    A repeated ``idempotency_key`` with the same bytes returns the first submission (created is
    False); with other bytes it raises :class:`IdempotencyConflict`. Validation problems raise
    :class:`BundleInvalid`; quotas raise :class:`~portal.submissions.quotas.QuotaExceeded`. In every
    refusal no row and no file is left behind.

    A replay whose files are missing goes the whole way again and stores them: when the database
    link fails during COMMIT, the commit may have succeeded while this side, seeing an error,
    removed the files it had just written; the client's retry with the same key repairs that.
    """
    key = idempotency_key.strip()[:200]
    digest = request_digest(blob, hardware)
    replay = _replay(team, key, digest)
    if replay is not None and _files_present(replay):
        return replay, False
    validated = check_bundle(blob, filename, known_tasks=known_tasks(), hardware=hardware)
    with BlobWriter() as blobs:
        bundle_name, _ = blobs.put("bundles", validated.blob, "zip" if validated.kind == "zip" else "tar.gz")
        transcripts = {t.slug: blobs.put("transcripts", t.transcript, "jsonl") for t in validated.tasks if t.transcript}
        return _do_create(team=team, user=user, validated=validated, filename=filename, bundle_name=bundle_name,
                          transcripts=transcripts, key=key, digest=digest)


@transaction.atomic(durable=True)
def _do_create(*, team: Team, user: AbstractBaseUser, validated: ValidatedBundle, filename: str, bundle_name: str,
               transcripts: dict[str, tuple[str, str]], key: str, digest: str) -> tuple[Submission, bool]:
    team = Team.objects.select_for_update().get(pk=team.pk)  # serializes this team's submits: quotas, keys
    replay = _replay(team, key, digest)
    if replay is not None:
        return replay, False
    quota_check_locked(team)
    m = validated.manifest
    tasks = {t.slug: t for t in Task.objects.filter(slug__in=[v.slug for v in validated.tasks], retired=False)}
    missing = [v.slug for v in validated.tasks if v.slug not in tasks]
    if missing:  # retired between validation and now
        raise BundleInvalid([Problem("submission.toml", "unknown-task", f"tasks: no task {s!r}") for s in missing])
    model, _ = AgentModel.objects.get_or_create(name=m.model, provider=m.provider, version=m.model_version)
    harness, _ = Harness.objects.get_or_create(name=m.harness, version=m.harness_version)
    bundle, _ = Bundle.objects.get_or_create(sha256=validated.sha256, defaults={
        "size": len(validated.blob), "kind": validated.kind, "storage_name": bundle_name})
    sub = Submission.objects.create(team=team, submitted_by=user, model=model, harness=harness, guidance=m.guidance,
                                    mode=m.mode, budget=m.budget, hardware=validated.hardware, bundle=bundle,
                                    filename=filename[:200], notes=m.notes, status=S.RECEIVED,
                                    idempotency_key=key, request_sha256=digest)
    actor = Actor(user=user)
    audit_record("submission.transition", sub, actor=user, from_status="", to_status=S.RECEIVED,
                 reason=f"uploaded {filename}", submission_id=sub.pk, data={"bundle": validated.sha256})
    SubmissionTask.objects.bulk_create([
        SubmissionTask(submission=sub, task=tasks[v.slug], position=i, kernel_path=v.kernel_path,
                       kernel_source=v.kernel_source,
                       kernel_sha256=hashlib.sha256(v.kernel_source.encode()).hexdigest() if v.kernel_source else "",
                       design_path=v.design_path, design_source=v.design_source, transcript_path=v.transcript_path,
                       transcript_storage_name=transcripts.get(v.slug, ("", ""))[0],
                       transcript_sha256=transcripts.get(v.slug, ("", ""))[1], turns_used=v.turns_used,
                       guidance_sha256=v.guidance_sha256)
        for i, v in enumerate(validated.tasks)])
    _transition(sub, S.VALIDATED, actor=actor, reason=f"{len(validated.tasks)} task(s) passed validation")
    attempt = _new_attempt(sub, actor=actor, reason="first evaluation")
    _transition(sub, S.QUEUED, actor=actor, attempt=attempt, reason=f"sent to {attempt.queue}")
    dispatch_on_commit(sub.pk, attempt.number, attempt.queue)
    return sub, True


# --- team and moderator actions ------------------------------------------------------------------

@transaction.atomic
def do_cancel(submission: Submission, *, user: AbstractBaseUser, reason: str = "", by_moderator: bool = False
              ) -> Submission:
    sub = _locked(submission.pk)
    if not by_moderator and sub.status not in TEAM_CANCELLABLE:
        raise InvalidTransition(sub.status, S.CANCELLED, f"a {sub.status} submission cannot be cancelled")
    attempt = sub.current_attempt
    _transition(sub, S.CANCELLED, actor=Actor(user=user), attempt=attempt, reason=reason or "cancelled")
    if attempt is not None:
        EvaluationAttempt.objects.filter(pk=attempt.pk).update(claim="", finished_at=timezone.now())
    return sub


@transaction.atomic
def do_rerun(submission: Submission, *, user: AbstractBaseUser, reason: str = "", by_moderator: bool = False,
             hardware: str | None = None, other_node: bool = False) -> EvaluationAttempt:
    """Queue a new attempt. A team's re-run counts against its concurrency quota. With
    ``other_node`` (moderators) the attempt avoids the worker the latest earlier attempt ran on: a
    worker that receives it hands it back to the queue for another (portal.submissions.tasks)."""
    sub = _locked(submission.pk)
    allowed = MODERATOR_RERUNNABLE if by_moderator else TEAM_RERUNNABLE
    if sub.status not in allowed:
        raise InvalidTransition(sub.status, S.QUEUED, f"a {sub.status} submission cannot be re-run"
                                + ("" if by_moderator else " by its team"))
    if not by_moderator:
        quota_check_locked(Team.objects.select_for_update().get(pk=sub.team_id))
    avoid = ""
    if other_node:
        avoid = sub.attempts.exclude(worker="").order_by("-number").values_list("worker", flat=True).first() or ""
        if not avoid:
            raise InvalidTransition(sub.status, S.QUEUED, "no earlier attempt ran on a node, so there is no other node")
    actor = Actor(user=user)
    attempt = _new_attempt(sub, actor=actor, reason=reason or "re-run", hardware=hardware, avoid_worker=avoid,
                           team_rerun=not by_moderator)
    _transition(sub, S.QUEUED, actor=actor, attempt=attempt, reason=reason or "re-run requested",
                data={"rerun": True, **({"avoid_worker": avoid} if avoid else {})})
    dispatch_on_commit(sub.pk, attempt.number, attempt.queue)
    return attempt


@transaction.atomic
def do_publish(submission: Submission, *, user: AbstractBaseUser, reason: str = "") -> Submission:
    sub = _locked(submission.pk)
    attempt = sub.current_attempt
    _transition(sub, S.PUBLISHED, actor=Actor(user=user), attempt=attempt, reason=reason or "approved")
    sub.published_attempt, sub.published_at = attempt, timezone.now()
    sub.save(update_fields=["published_attempt", "published_at", "updated_at"])
    record_scores(sub)  # the leaderboard's rows, in the same transaction
    queue_judging(sub)  # the LLM judge, after the commit, if one is configured
    return sub


@transaction.atomic
def do_reject(submission: Submission, *, user: AbstractBaseUser, reason: str) -> Submission:
    """Reject the current attempt. A submission with a published attempt (published now, or
    published before a re-run whose attempt is rejected here) is taken down with it: it leaves the
    board and the public pages in the same transaction, so a result found to cheat after its
    publication does not stay public."""
    if not reason.strip():
        raise InvalidTransition(submission.status, S.REJECTED, "a rejection needs a reason the team can read")
    sub = _locked(submission.pk)
    published = sub.published_attempt
    taken_down = published.number if published is not None else None
    _transition(sub, S.REJECTED, actor=Actor(user=user), attempt=sub.current_attempt, reason=reason,
                data={"unpublished_attempt": taken_down} if taken_down is not None else None)
    if published is not None:
        if published.pk != sub.current_attempt_id:  # published before a re-run: rejected with it
            _set_attempt_status(published, S.REJECTED)
        sub.published_attempt, sub.published_at = None, None
        sub.save(update_fields=["published_attempt", "published_at", "updated_at"])
        remove_scores(sub)
    return sub


# --- the worker's side -------------------------------------------------------------------------

def _heartbeat_is_fresh(attempt: EvaluationAttempt, now) -> bool:  # noqa: ANN001
    stale = timedelta(seconds=settings.D2K_HEARTBEAT_STALE_S)
    return attempt.heartbeat_at is not None and now - attempt.heartbeat_at < stale


def _holder_is_gone(attempt: EvaluationAttempt, now, delivery: str, redelivered: bool) -> bool:  # noqa: ANN001
    """Whether the delivery holding a running attempt has certainly stopped.

    Either its heartbeat is stale, or this is a redelivery of the very message that made the
    claim: the broker hands an unacknowledged message out again only when its worker was lost
    (reject-on-worker-lost requeues it at once) or after the visibility timeout, which exceeds the
    hard time limit. Waiting for the heartbeat to go stale in that case would only delay the run.
    """
    same_message = redelivered and bool(delivery) and attempt.delivery == delivery
    return same_message or not _heartbeat_is_fresh(attempt, now)


@transaction.atomic(durable=True)
def do_start_evaluation(submission_id: int, number: int, *, worker: str, delivery: str = "",
                        redelivered: bool = False) -> str | None:
    """Claim the attempt for this delivery; ``None`` means another delivery owns it or it is over.

    ``delivery`` is the broker message's id and ``redelivered`` the broker's flag. A duplicate
    delivery of a finished attempt, or of one another worker is running, does nothing. A delivery
    that finds the attempt running but its holder gone (:func:`_holder_is_gone`) takes it over.
    Partial results of an earlier delivery are deleted, so results are written once per delivery
    that owns the claim.
    """
    sub = Submission.objects.select_for_update().filter(pk=submission_id).first()
    if sub is None:
        return None
    attempt = EvaluationAttempt.objects.select_for_update().filter(submission=sub, number=number).first()
    now = timezone.now()
    if attempt is None or sub.current_attempt_id != attempt.pk or attempt.status in ATTEMPT_FINAL_STATUSES:
        return None
    if attempt.status == S.RUNNING and not _holder_is_gone(attempt, now, delivery, redelivered):
        return None
    claim = uuid.uuid4().hex
    TaskResult.objects.filter(attempt=attempt).delete()
    takeover = attempt.status == S.RUNNING
    stale = takeover and not _heartbeat_is_fresh(attempt, now)
    attempt.claim, attempt.worker, attempt.started_at, attempt.heartbeat_at = claim, worker[:200], now, now
    attempt.delivery, attempt.progress = delivery[:64], {}
    attempt.save(update_fields=["claim", "worker", "started_at", "heartbeat_at", "delivery", "progress"])
    if takeover:
        audit_record("attempt.takeover", attempt, system=f"system:worker {worker}", submission_id=sub.pk,
                     reason="the previous delivery's heartbeat was stale" if stale
                     else "the message was redelivered: the worker that held it was lost")
    else:
        _transition(sub, S.RUNNING, actor=Actor(system=f"worker {worker}"), attempt=attempt, reason=f"on {worker}")
    return claim


def do_heartbeat(attempt_id: int, claim: str, progress: dict[str, Any]) -> bool:
    """Record a sign of life and the progress; ``False`` tells the worker it lost the attempt."""
    return EvaluationAttempt.objects.filter(pk=attempt_id, claim=claim, status=S.RUNNING).update(
        heartbeat_at=timezone.now(), progress=progress) == 1


def _owned(attempt_id: int, claim: str) -> EvaluationAttempt | None:
    return EvaluationAttempt.objects.select_for_update().filter(pk=attempt_id, claim=claim, status=S.RUNNING).first()


@transaction.atomic(durable=True)
def do_record_task_result(attempt_id: int, claim: str, result: EngineTaskResult) -> bool:
    """Store one task's result as it arrives, keyed (attempt, task) and (task result, workload)."""
    attempt = _owned(attempt_id, claim)
    if attempt is None:
        return False
    task = Task.objects.get(slug=result.slug)
    row, _ = TaskResult.objects.update_or_create(attempt=attempt, task=task, defaults={
        "status": result.status, "error_code": result.error_code, "reason": result.reason[:20000],
        "verdict": result.verdict, "findings": [f.model_dump() for f in result.findings],
        "aten_ops": result.aten_ops, "autotune": result.autotune, "wall_s": result.wall_s,
        "stdout_tail": result.stdout_tail, "stderr_tail": result.stderr_tail})
    for position, w in enumerate(result.workloads):
        base, cand = w.timings.get("baseline"), w.timings.get("candidate")
        WorkloadResult.objects.update_or_create(task_result=row, smoke=w.smoke, name=w.name, defaults={
            "position": position, "correct": w.correct, "params": w.params,
            "baseline_ms": base.median_ms if base else None, "candidate_ms": cand.median_ms if cand else None,
            "speedup": w.speedup.get("candidate"), "sol_fraction": w.sol_fraction.get("candidate"),
            "rel_stderr": cand.rel_stderr if cand else None, "data": w.model_dump(mode="json")})
    EvaluationAttempt.objects.filter(pk=attempt.pk).update(heartbeat_at=timezone.now())
    return True


@transaction.atomic(durable=True)
def do_record_judge_score(attempt_id: int, claim: str, slug: str, result: JudgeResult) -> bool:
    """Store the judge's score of one task in the leaderboard's table (``portal.scores``), keyed
    (task, kind, judge model, prompt version, attempt): a redelivery overwrites, a re-run adds its
    own, and judging the published submission later finds it and pays nothing twice."""
    attempt = _owned(attempt_id, claim)
    if attempt is None:
        return False
    task = SubmissionTask.objects.get(submission_id=attempt.submission_id, task__slug=slug)
    JudgeScore.objects.update_or_create(
        submission_task=task, kind=result.kind, judge_model=result.judge_model, prompt_version=result.prompt_version,
        attempt=attempt, defaults={"score": result.score, "levels": result.levels, "items": result.items,
                                   "raw_answers": result.raw_answers, "attempts": result.attempts})
    EvaluationAttempt.objects.filter(pk=attempt.pk).update(heartbeat_at=timezone.now())
    return True


@transaction.atomic(durable=True)
def do_finish_judging(attempt_id: int, claim: str) -> str | None:
    """Close a design-only attempt once every task has its score: ``evaluated``."""
    attempt = _owned(attempt_id, claim)
    if attempt is None:
        return None
    judged = JudgeScore.objects.filter(attempt=attempt, kind="design").count()
    attempt.finished_at, attempt.claim, attempt.mode = timezone.now(), "", "judge"
    attempt.save(update_fields=["finished_at", "claim", "mode"])
    sub = _locked(attempt.submission_id)
    _transition(sub, S.EVALUATED, actor=Actor(system="worker"), attempt=attempt,
                reason=f"{judged} design document(s) judged")
    return S.EVALUATED


def _is_infra(result: EngineTaskResult) -> bool:
    return result.error_code.startswith(("eval:infra:", "portal:infra:"))


@transaction.atomic(durable=True)
def do_finish_evaluation(attempt_id: int, claim: str, run: RunResult) -> str | None:
    """Close the attempt: ``evaluated`` if any task is correct, ``failed`` if none is, or an
    infrastructure error (retried) if the engine failed on our side for any task."""
    attempt = _owned(attempt_id, claim)
    if attempt is None:
        return None
    infra = [t for t in run.tasks if _is_infra(t)]
    if infra:
        first = infra[0]
        return _infra_failure(attempt, first.error_code, f"{first.slug}: {first.reason}", system="worker")
    correct = [t.slug for t in run.tasks if t.status == "correct"]
    failures = [f"{t.slug}: {t.error_code or t.status}" for t in run.tasks if t.status != "correct"]
    attempt.mode, attempt.engine_version = run.mode, run.engine_version
    attempt.fingerprint = run.fingerprint.model_dump(mode="json")
    attempt.hardware_record = run.hardware.model_dump(mode="json")
    attempt.seed_schedule = run.seed_schedule
    attempt.finished_at, attempt.claim = timezone.now(), ""
    attempt.reason = "; ".join(failures)[:20000]
    attempt.error_code = "" if correct else (run.tasks[0].error_code if run.tasks else "")
    attempt.save(update_fields=["mode", "engine_version", "fingerprint", "hardware_record", "seed_schedule",
                                "finished_at", "claim", "reason", "error_code"])
    sub = _locked(attempt.submission_id)
    to = S.EVALUATED if correct else S.FAILED
    why = f"{len(correct)}/{len(run.tasks)} task(s) correct" + (f"; {attempt.reason}" if failures else "")
    _transition(sub, to, actor=Actor(system="worker"), attempt=attempt, reason=why[:4000])
    return to


def _infra_failure(attempt: EvaluationAttempt, code: str, reason: str, *, system: str) -> str:
    """Requeue the attempt (up to the retry limit) or record ``error``; the caller holds its lock."""
    sub = _locked(attempt.submission_id)
    attempt.claim, attempt.error_code, attempt.reason = "", code, reason[:20000]
    if attempt.infra_retries < settings.D2K_INFRA_RETRIES:
        attempt.infra_retries += 1
        attempt.save(update_fields=["claim", "error_code", "reason", "infra_retries"])
        _transition(sub, S.QUEUED, actor=Actor(system=system), attempt=attempt,
                    reason=f"{code}: {reason} (retry {attempt.infra_retries} of {settings.D2K_INFRA_RETRIES})"[:4000])
        dispatch_on_commit(sub.pk, attempt.number, attempt.queue)
        return S.QUEUED
    attempt.finished_at = timezone.now()
    attempt.save(update_fields=["claim", "error_code", "reason", "finished_at"])
    _transition(sub, S.ERROR, actor=Actor(system=system), attempt=attempt, reason=f"{code}: {reason}"[:4000])
    return S.ERROR


@transaction.atomic(durable=True)
def do_record_infra_error(attempt_id: int, claim: str | None, code: str, reason: str, *, system: str = "worker"
                          ) -> str | None:
    """The worker (or the engine) failed on our side: retry, or give up with ``error``."""
    qs = EvaluationAttempt.objects.select_for_update().filter(pk=attempt_id, status=S.RUNNING)
    attempt = (qs.filter(claim=claim) if claim is not None else qs).first()
    if attempt is None:
        return None
    return _infra_failure(attempt, code, reason, system=system)


def do_reap_stale_runs() -> list[tuple[int, str]]:
    """Requeue or fail every running attempt whose heartbeat is stale; one transaction per attempt."""
    cutoff = timezone.now() - timedelta(seconds=settings.D2K_HEARTBEAT_STALE_S)
    stale = list(EvaluationAttempt.objects.filter(status=S.RUNNING, heartbeat_at__lt=cutoff).values_list("pk", flat=True))
    done = []
    for pk in stale:
        with transaction.atomic(durable=True):
            attempt = (EvaluationAttempt.objects.select_for_update(skip_locked=True)
                       .filter(pk=pk, status=S.RUNNING, heartbeat_at__lt=cutoff).first())
            if attempt is None:
                continue
            silent = int((timezone.now() - attempt.heartbeat_at).total_seconds())
            done.append((pk, _infra_failure(attempt, INFRA_LOST, f"no heartbeat from {attempt.worker or 'the worker'} "
                                                                 f"for {silent} s", system="reaper")))
    return done
