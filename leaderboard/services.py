"""Every write to ``Task`` and ``Workload`` rows happens here.

``task_sync`` mirrors a validated task tree into the database in one durable transaction:
it writes only what differs (a second run changes nothing), deletes workloads that left a
task, and retires tasks that left the tree instead of deleting them, because results will
point at them. ``task_record_verification`` stores what the engine said about an expert kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from leaderboard.constants import ENGINE_STATUSES, VerificationStatus
from leaderboard.models import GuidanceVersion, Task, Workload
from leaderboard.tree import task_fields, task_workloads
from tasks.guidance import guided_versions
from tasks.registry import LoadReport, Problem


class TaskTreeInvalid(Exception):
    """The tree has problems; nothing was written."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__(f"{len(problems)} problem(s) in the task tree")


@dataclass
class SyncResult:
    """What a sync changed, by slug (tasks) and by ``slug/name`` (workloads)."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    workloads_created: list[str] = field(default_factory=list)
    workloads_updated: list[str] = field(default_factory=list)
    workloads_deleted: list[str] = field(default_factory=list)
    verification_queued: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any((self.created, self.updated, self.retired, self.restored, self.workloads_created,
                    self.workloads_updated, self.workloads_deleted, self.verification_queued))


def _differs(row: Any, values: dict[str, Any]) -> list[str]:
    return [name for name, value in values.items() if getattr(row, name) != value]


def _sync_workloads(task: Task, wanted: dict[tuple[bool, str], dict[str, Any]], result: SyncResult) -> bool:
    existing = {(w.smoke, w.name): w for w in task.workloads.all()}
    changed = False
    for key in sorted(set(existing) - set(wanted)):
        existing[key].delete()
        result.workloads_deleted.append(f"{task.slug}/{key[1]}")
        changed = True
    for (smoke, name), values in wanted.items():
        row = existing.get((smoke, name))
        if row is None:
            Workload.objects.create(task=task, smoke=smoke, name=name, **values)
            result.workloads_created.append(f"{task.slug}/{name}")
            changed = True
            continue
        fields = _differs(row, values)
        if fields:
            for name_ in fields:
                setattr(row, name_, values[name_])
            row.save(update_fields=fields)
            result.workloads_updated.append(f"{task.slug}/{name}")
            changed = True
    return changed


def keep_guidance_versions(task: Task, now: Any) -> None:
    """Record the guidance each condition gives ``task`` now as a version, unless it is one already
    (idempotent): a run states the digest of what its agent read, and the site must still show
    that text after the guidance files change."""
    for condition, digest, text in guided_versions(task.guidance):
        GuidanceVersion.objects.get_or_create(task=task, condition=condition, sha256=digest,
                                              defaults={"text": text, "first_synced_at": now})


@transaction.atomic(durable=True)
def task_sync(report: LoadReport, *, queue_verification: bool = False) -> SyncResult:
    """Mirror ``report`` into the database; refuses (writing nothing) if it has problems.

    With ``queue_verification`` every task in the tree is marked queued and its expert kernel is
    sent to the ``cpu.interpret`` queue once the transaction commits, so a worker never reads
    rows that might still roll back.
    """
    if report.problems:
        raise TaskTreeInvalid(report.problems)
    now = timezone.now()
    result = SyncResult()
    rows = {t.slug: t for t in Task.objects.select_for_update().all()}
    for loaded in report.tasks:
        values = task_fields(loaded)
        row = rows.get(loaded.slug)
        if row is None:
            row = Task.objects.create(slug=loaded.slug, synced_at=now, **values)
            result.created.append(row.slug)
            _sync_workloads(row, task_workloads(loaded), result)
            keep_guidance_versions(row, now)
            continue
        fields = _differs(row, values)
        if row.retired:
            row.retired, row.retired_at = False, None
            fields += ["retired", "retired_at"]
            result.restored.append(row.slug)
        workloads_changed = _sync_workloads(row, task_workloads(loaded), result)
        if fields or workloads_changed:
            for name in fields:
                if name in values:
                    setattr(row, name, values[name])
            row.synced_at = now
            row.save(update_fields=[*fields, "synced_at"])
            keep_guidance_versions(row, now)
            result.updated.append(row.slug)
        else:
            result.unchanged.append(row.slug)
    in_tree = {t.slug for t in report.tasks}
    for slug, row in sorted(rows.items()):
        if slug not in in_tree and not row.retired:
            row.retired, row.retired_at, row.synced_at = True, now, now
            row.save(update_fields=["retired", "retired_at", "synced_at"])
            result.retired.append(slug)
    if queue_verification:
        for slug in sorted(in_tree):
            _queue_verification(slug)
            result.verification_queued.append(slug)
    return result


def _queue_verification(slug: str) -> None:
    from leaderboard.tasks import verify_reference_task  # the task module imports this one

    Task.objects.filter(slug=slug).update(verification_status=VerificationStatus.QUEUED)
    transaction.on_commit(lambda: verify_reference_task.delay(slug))


@dataclass(frozen=True)
class VerificationOutcome:
    """What one engine run said about a task's expert kernel."""

    status: str
    mode: str = ""
    reason: str = ""
    content_sha256: str = ""


@transaction.atomic(durable=True)
def task_record_verification(slug: str, outcome: VerificationOutcome) -> Task | None:
    """Store the outcome on the task row; ``None`` when the task no longer exists.

    Writing is keyed by slug and overwrites, so a redelivered task records the same thing twice
    without creating anything.
    """
    row = Task.objects.select_for_update().filter(slug=slug).first()
    if row is None:
        return None
    status = outcome.status if outcome.status in ENGINE_STATUSES else VerificationStatus.ERROR
    reason = outcome.reason if status == outcome.status else f"unknown engine status {outcome.status!r}: {outcome.reason}"
    row.verification_status = status
    row.verification_mode = outcome.mode[:16]
    row.verification_reason = reason
    row.verification_at = timezone.now()
    row.verification_sha256 = outcome.content_sha256
    row.save(update_fields=["verification_status", "verification_mode", "verification_reason",
                            "verification_at", "verification_sha256"])
    return row
