"""Published scores recomputed against today's catalogue: its roofline formulas and its suite.

A published submission's score rows are written at publication (:func:`record_scores`). Two later
changes would leave them behind while the reference rows beside them follow: a roofline formula
fixed in a task (the stored SOL time, and so the clamp on the speedup and the SOL column, is the
old formula's) and a task added to or retired from the suite (the Performance Score's suite size
and its penalties are the old suite's). Both are redone here: each stored workload of a published
attempt is re-expressed with :func:`evaluator.suite_report.reroof_workload` against the ceilings
its run recorded (times are never touched), then every score row is rewritten. ``sync_tasks``
runs it after a sync that changed the catalogue; ``manage.py rescore`` runs it by hand.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import transaction

from evaluator.hardware import HardwareProfile
from evaluator.result import HardwareProfileRecord
from evaluator.result import WorkloadResult as EngineWorkload
from evaluator.suite_report import reroof_workload
from portal.scores.services import record_scores
from portal.submissions.models import Submission, WorkloadResult
from tasks.registry import Task as TaskSpec


@dataclass
class RescoreReport:
    submissions: int = 0
    workloads_changed: list[str] = field(default_factory=list)


def reroof_attempt_rows(submission: Submission, tasks: dict[str, TaskSpec]) -> list[str]:
    """Re-express the stored workloads of the published attempt with today's formulas, in place."""
    attempt = submission.published_attempt
    if attempt is None or not attempt.hardware_record:
        return []
    stored = HardwareProfile.from_record(HardwareProfileRecord.model_validate(attempt.hardware_record))
    changed = []
    rows = WorkloadResult.objects.filter(task_result__attempt=attempt).select_related("task_result__task")
    for row in rows:
        spec = tasks.get(row.task_result.task.slug)
        if spec is None or not row.data:
            continue
        engine = EngineWorkload.model_validate(row.data)
        line = reroof_workload(engine, spec, stored)
        if not line and (engine.flops, engine.bytes) == (row.data.get("flops"), row.data.get("bytes")):
            continue
        row.data = engine.model_dump(mode="json")
        row.sol_fraction = engine.sol_fraction.get("candidate")
        row.save(update_fields=["data", "sol_fraction"])
        if line:
            changed.append(f"#{submission.pk} {row.task_result.task.slug} {line}")
    return changed


def rescore_published(tasks: Iterable[TaskSpec]) -> RescoreReport:
    """Every published submission's workloads re-rooflined and its score rows rewritten."""
    by_slug = {t.slug: t for t in tasks}
    report = RescoreReport()
    published = (Submission.objects.filter(published_attempt__isnull=False, published_at__isnull=False)
                 .select_related("published_attempt", "team", "model", "harness").order_by("published_at", "pk"))
    for sub in published:
        with transaction.atomic():
            report.workloads_changed += reroof_attempt_rows(sub, by_slug)
            record_scores(sub)
        report.submissions += 1
    return report
