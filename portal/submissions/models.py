"""What a team sent, and every attempt at judging it.

``Submission`` is one agent run under one condition. ``SubmissionTask`` is one task of it (the
kernel, the optional transcript and the turns used). ``EvaluationAttempt`` is one run of the
engine over the whole submission: a re-run adds an attempt and never overwrites an old one.
``TaskResult`` and ``WorkloadResult`` hold what the engine reported, one row per (attempt, task)
and per (task result, workload), which is what makes a redelivered Celery task harmless.

No code outside :mod:`portal.submissions.actions` assigns a ``status``.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from leaderboard.models import Task
from portal.submissions.constants import DEFAULT_BUDGET, Guidance, Mode, Status
from portal.teams.models import Team


class AgentModel(models.Model):
    """A language model as an entity: the leaderboard groups rows by it."""

    name = models.CharField(max_length=120)
    provider = models.CharField(max_length=80)
    version = models.CharField(max_length=80, blank=True)

    class Meta:
        ordering = ["name", "provider", "version"]
        constraints = [models.UniqueConstraint(fields=["name", "provider", "version"], name="unique_agent_model")]

    def __str__(self) -> str:
        return f"{self.name}{f' ({self.version})' if self.version else ''} · {self.provider}"


class Harness(models.Model):
    name = models.CharField(max_length=120)
    version = models.CharField(max_length=80, blank=True)

    class Meta:
        ordering = ["name", "version"]
        constraints = [models.UniqueConstraint(fields=["name", "version"], name="unique_harness")]

    def __str__(self) -> str:
        return f"{self.name} {self.version}".strip()


class Bundle(models.Model):
    """An uploaded archive, stored once per content (``bundles/<sha256[:2]>/<sha256>.<ext>``)."""

    sha256 = models.CharField(max_length=64, unique=True)
    size = models.PositiveBigIntegerField()
    kind = models.CharField(max_length=8, help_text="zip or tar.gz")
    storage_name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.sha256[:12]}.{self.kind}"


class Submission(models.Model):
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="submissions")
    submitted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    model = models.ForeignKey(AgentModel, on_delete=models.PROTECT, related_name="submissions")
    harness = models.ForeignKey(Harness, on_delete=models.PROTECT, related_name="submissions")
    guidance = models.CharField(max_length=12, choices=Guidance.choices)
    mode = models.CharField(max_length=8, choices=Mode.choices, default=Mode.KERNEL)
    budget = models.PositiveIntegerField(default=DEFAULT_BUDGET, help_text="turn budget per task")
    hardware = models.CharField(max_length=32, help_text="hardware profile, e.g. h200 or cpu-interpret")
    bundle = models.ForeignKey(Bundle, on_delete=models.PROTECT, related_name="submissions")
    filename = models.CharField(max_length=200, help_text="the name the upload had")
    notes = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RECEIVED, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    idempotency_key = models.CharField(max_length=200, blank=True)
    request_sha256 = models.CharField(max_length=64, blank=True, help_text="what the idempotent request carried")
    current_attempt = models.ForeignKey("EvaluationAttempt", null=True, blank=True, on_delete=models.SET_NULL,
                                        related_name="+")
    published_attempt = models.ForeignKey("EvaluationAttempt", null=True, blank=True, on_delete=models.SET_NULL,
                                          related_name="+", help_text="the latest approved attempt: what is public")
    published_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["team", "idempotency_key"], condition=~models.Q(idempotency_key=""),
                                    name="unique_idempotency_key_per_team"),
        ]
        indexes = [models.Index(fields=["hardware", "status"]), models.Index(fields=["team", "created_at"])]

    def __str__(self) -> str:
        return f"#{self.pk} {self.team} {self.model.name} {self.guidance} ({self.status})"

    @property
    def is_public(self) -> bool:
        return self.published_attempt_id is not None


class SubmissionTask(models.Model):
    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="tasks")
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="+")
    position = models.PositiveIntegerField()
    kernel_path = models.CharField(max_length=200, blank=True, help_text="path inside the bundle")
    kernel_source = models.TextField(blank=True)
    kernel_sha256 = models.CharField(max_length=64, blank=True)
    design_path = models.CharField(max_length=200, blank=True)
    design_source = models.TextField(blank=True)
    transcript_path = models.CharField(max_length=200, blank=True, help_text="path inside the bundle")
    transcript_storage_name = models.CharField(max_length=200, blank=True)
    transcript_sha256 = models.CharField(max_length=64, blank=True)
    turns_used = models.PositiveIntegerField(null=True, blank=True)
    guidance_sha256 = models.CharField(
        max_length=64, blank=True,
        help_text="the digest of the guidance text the run says its agent was given (tasks.guidance); blank: not stated")

    class Meta:
        ordering = ["submission", "position"]
        constraints = [models.UniqueConstraint(fields=["submission", "task"], name="unique_task_per_submission")]

    def __str__(self) -> str:
        return f"{self.submission_id}/{self.task.slug}"


class EvaluationAttempt(models.Model):
    """One engine run over the submission; ``claim`` names the delivery that may write its results."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    queue = models.CharField(max_length=40)
    requested_by_label = models.CharField(max_length=150, help_text="who asked for this attempt")
    request_reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True, db_index=True)
    worker = models.CharField(max_length=200, blank=True)
    avoid_worker = models.CharField(max_length=200, blank=True,
                                    help_text="a re-run asked for on another node: the worker it should not run on")
    claim = models.CharField(max_length=32, blank=True)
    delivery = models.CharField(max_length=64, blank=True,
                                help_text="the broker message (Celery task id) whose delivery holds the claim")
    infra_retries = models.PositiveIntegerField(default=0)
    team_rerun = models.BooleanField(default=False, help_text="a re-run the team asked for: it uses the daily quota")
    progress = models.JSONField(default=dict, blank=True,
                                help_text="{task_index, task_count, task, workload_done, workload_total, phase}")
    mode = models.CharField(max_length=16, blank=True, help_text="gpu or interpreter")
    engine_version = models.CharField(max_length=32, blank=True)
    fingerprint = models.JSONField(default=dict, blank=True)
    hardware_record = models.JSONField(default=dict, blank=True)
    seed_schedule = models.JSONField(default=dict, blank=True)
    error_code = models.CharField(max_length=64, blank=True)
    reason = models.TextField(blank=True)

    class Meta:
        ordering = ["submission", "number"]
        constraints = [models.UniqueConstraint(fields=["submission", "number"], name="unique_attempt_number")]

    def __str__(self) -> str:
        return f"{self.submission_id}.{self.number} ({self.status})"


class TaskResult(models.Model):
    attempt = models.ForeignKey(EvaluationAttempt, on_delete=models.CASCADE, related_name="task_results")
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=16, help_text="the engine's: correct, incorrect, error, timeout, crashed")
    error_code = models.CharField(max_length=64, blank=True)
    reason = models.TextField(blank=True)
    verdict = models.CharField(max_length=16, default="unjudged")
    findings = models.JSONField(default=list, blank=True)
    aten_ops = models.JSONField(default=list, blank=True)
    autotune = models.JSONField(default=dict, blank=True)
    wall_s = models.FloatField(default=0.0)
    stdout_tail = models.TextField(blank=True)
    stderr_tail = models.TextField(blank=True)
    recorded_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["attempt", "task__task_id"]
        constraints = [models.UniqueConstraint(fields=["attempt", "task"], name="unique_result_per_attempt_task")]

    def __str__(self) -> str:
        return f"{self.attempt} {self.task.slug}: {self.status}"


class WorkloadResult(models.Model):
    task_result = models.ForeignKey(TaskResult, on_delete=models.CASCADE, related_name="workloads")
    name = models.CharField(max_length=64)
    smoke = models.BooleanField(default=False)
    position = models.PositiveIntegerField(default=0)
    correct = models.BooleanField()
    params = models.JSONField(default=dict)
    baseline_ms = models.FloatField(null=True, blank=True)
    candidate_ms = models.FloatField(null=True, blank=True)
    speedup = models.FloatField(null=True, blank=True)
    sol_fraction = models.FloatField(null=True, blank=True)
    rel_stderr = models.FloatField(null=True, blank=True)
    data = models.JSONField(default=dict, help_text="the engine's WorkloadResult, as JSON")

    class Meta:
        ordering = ["task_result", "smoke", "position"]
        constraints = [models.UniqueConstraint(fields=["task_result", "smoke", "name"], name="unique_workload_result")]

    def __str__(self) -> str:
        return f"{self.task_result} {self.name}"

    @property
    def expert_ms(self) -> float | None:
        """The task's expert kernel, timed in the same run in a worker set up like the kernel's
        (every GPU bench times it): the comparison the benchmark exists for, free of run-to-run drift."""
        expert = (self.data or {}).get("timings", {}).get("expert")
        return expert.get("median_ms") if isinstance(expert, dict) else None

    @property
    def vs_expert(self) -> float | None:
        """Expert time over this kernel's: above 1 the kernel beat the expert in the same run."""
        if self.expert_ms and self.candidate_ms:
            return self.expert_ms / self.candidate_ms
        return None


class WorkerBeacon(models.Model):
    """A Celery worker's sign of life, for the status page (written by the worker's own timer)."""

    hostname = models.CharField(max_length=200, unique=True)
    queues = models.JSONField(default=list)
    started_at = models.DateTimeField()
    last_seen = models.DateTimeField(db_index=True)
    current = models.CharField(max_length=80, blank=True, help_text="the attempt it is running, if any")

    class Meta:
        ordering = ["hostname"]

    def __str__(self) -> str:
        return self.hostname
