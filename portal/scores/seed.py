"""Synthetic published submissions, for the leaderboard's tests and its load benchmark.

Each seeded submission is complete down to the engine's per-workload JSON (valid
:class:`evaluator.result.WorkloadResult`), is published through the real state machine's
publication service for small counts, and is scored by the one scoring path
(:func:`portal.scores.services.record_scores`), so what the board shows for seeded data is what
it would show for real data. Randomness is seeded: the same call builds the same data.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from evaluator.result import Timing, TrialResult
from evaluator.result import WorkloadResult as EngineWorkload
from leaderboard.models import Task
from portal.scores.services import record_scores
from portal.submissions.constants import Status
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
from portal.teams.models import Team

CONDITIONS = ("none", "L1", "L1+L2", "L1+L2+L3")


@dataclass(frozen=True)
class SeedSpec:
    submissions: int = 20
    hardware: str = "h200"
    teams: int = 3
    models: int = 4
    seed: int = 0
    tasks: tuple[str, ...] = ()  # default: every live task


def _timing(ms: float) -> Timing:
    return Timing(median_ms=ms, q1_ms=ms * 0.99, q3_ms=ms * 1.01, mean_ms=ms, min_ms=ms * 0.98, count=50,
                  rel_stderr=0.004, host_over_device=1.05, compile_s=1.0)


def _workload(rng: random.Random, w, skill: float, correct: bool) -> EngineWorkload:  # noqa: ANN001 - a Workload row
    base = max(0.005, rng.lognormvariate(math.log(0.5), 1.0))
    sol = base / rng.uniform(3.0, 12.0)
    speed = min(base / sol * 0.95, max(0.05, rng.lognormvariate(math.log(skill), 0.35)))
    cand = base / speed
    return EngineWorkload(
        name=w.name, smoke=False, model=w.model, params=w.params, flops=w.flops, bytes=w.bytes, correct=correct,
        trials=[TrialResult(trial=i, seed=1000 + i, passed=correct, rule="" if correct else "tolerance")
                for i in range(3)],
        timings={"baseline": _timing(base), "candidate": _timing(cand)} if correct else {},
        speedup={"candidate": base / cand} if correct else {}, sol_ms=sol,
        sol_fraction={"candidate": sol / cand} if correct else {}, stop_reason="converged" if correct else "")


@transaction.atomic
def seed(spec: SeedSpec, publish: bool = True) -> list[Submission]:
    rng = random.Random(spec.seed)
    user_model = get_user_model()
    owner, _ = user_model.objects.get_or_create(username="seed-owner")
    teams = [Team.objects.get_or_create(name=f"Seed team {i}", defaults={"slug": f"seed-team-{i}"})[0]
             for i in range(spec.teams)]
    models = [AgentModel.objects.get_or_create(name=f"seed-model-{i}", provider="seed", version="1")[0]
              for i in range(spec.models)]
    harness, _ = Harness.objects.get_or_create(name="seed-harness", version="1")
    blob = hashlib.sha256(f"seed-{spec.seed}".encode()).hexdigest()
    bundle, _ = Bundle.objects.get_or_create(sha256=blob, defaults={"size": 0, "kind": "zip",
                                                                   "storage_name": f"seed/{blob}.zip"})
    tasks = list(Task.objects.filter(retired=False).prefetch_related("workloads").order_by("task_id"))
    if spec.tasks:
        tasks = [t for t in tasks if t.slug in spec.tasks]
    now = timezone.now()
    made = []
    for n in range(spec.submissions):
        k = spec.seed + n  # batches continue the pattern (seed_leaderboard passes the running count)
        team, model = teams[k % len(teams)], models[(k // len(teams)) % len(models)]
        condition = CONDITIONS[(k // (len(teams) * len(models))) % len(CONDITIONS)]
        skill = 0.8 * (1.25 ** CONDITIONS.index(condition)) * (1 + 0.3 * models.index(model))
        sub = Submission.objects.create(team=team, submitted_by=owner, model=model, harness=harness,
                                        guidance=condition, budget=350, hardware=spec.hardware, bundle=bundle,
                                        filename="seed.zip", status=Status.PUBLISHED if publish else Status.EVALUATED)
        attempt = EvaluationAttempt.objects.create(submission=sub, number=1, status=sub.status,
                                                   queue=f"gpu.{spec.hardware}", requested_by_label="seed",
                                                   mode="gpu", engine_version="seed")
        SubmissionTask.objects.bulk_create([
            SubmissionTask(submission=sub, task=task, position=pos, kernel_path=f"{task.slug}/kernel.py",
                           kernel_source="# seeded\n", turns_used=rng.randint(20, 350))
            for pos, task in enumerate(tasks)])
        verdicts = [rng.random() < 0.55 + 0.1 * CONDITIONS.index(condition) for _ in tasks]
        results = TaskResult.objects.bulk_create([
            TaskResult(attempt=attempt, task=task, status="correct" if ok else "incorrect", verdict="clean")
            for task, ok in zip(tasks, verdicts, strict=True)])
        workload_rows = []
        for task, tr, correct in zip(tasks, results, verdicts, strict=True):
            for i, w in enumerate(x for x in task.workloads.all() if not x.smoke):
                ew = _workload(rng, w, skill, correct)
                workload_rows.append(WorkloadResult(
                    task_result=tr, name=w.name, smoke=False, position=i, correct=correct, params=w.params,
                    baseline_ms=ew.timings["baseline"].median_ms if correct else None,
                    candidate_ms=ew.timings["candidate"].median_ms if correct else None,
                    speedup=ew.speedup.get("candidate"), sol_fraction=ew.sol_fraction.get("candidate"),
                    data=ew.model_dump(mode="json")))
        WorkloadResult.objects.bulk_create(workload_rows)
        sub.current_attempt = attempt
        if publish:
            sub.published_attempt = attempt
            sub.published_at = now - timedelta(minutes=spec.submissions - n)
        sub.save()
        if publish:
            record_scores(sub)
        made.append(sub)
    return made
