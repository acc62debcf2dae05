"""Tasks and workloads as synced from the task tree (``tasks/``, ``references/``, ``guidance/``).

The files are the source of truth; these rows are a copy for the pages and for joining results.
Only ``leaderboard.services`` writes them.
"""

from __future__ import annotations

from django.db import models

from leaderboard.constants import VerificationStatus
from tasks.guidance import guidance_digest


class Task(models.Model):
    """One benchmark task, as last synced from its files."""

    slug = models.SlugField(max_length=64, unique=True)
    task_id = models.CharField("task id", max_length=8, help_text="T15, T16, ...")
    title = models.CharField(max_length=120)
    category = models.CharField(max_length=40)
    entry_point = models.CharField(max_length=64)
    summary = models.TextField()
    semantics = models.TextField()
    notes = models.TextField(blank=True)
    spec_json = models.JSONField(help_text="the validated task.toml, as JSON")
    guidance_l1 = models.TextField("L1 guidance (algorithm)")
    guidance_l2 = models.TextField("L2 guidance (dataflow)")
    guidance_l3 = models.TextField("L3 guidance (low-level technique)")
    content_sha256 = models.CharField(max_length=64, help_text="sha256 over the task's files")
    synced_at = models.DateTimeField(help_text="when a sync last changed this row")
    retired = models.BooleanField(default=False, help_text="gone from the task tree; kept for history")
    retired_at = models.DateTimeField(null=True, blank=True)

    verification_status = models.CharField(
        max_length=16, choices=VerificationStatus.choices, default=VerificationStatus.UNVERIFIED
    )
    verification_mode = models.CharField(max_length=16, blank=True, help_text="gpu or interpreter")
    verification_reason = models.TextField(blank=True)
    verification_at = models.DateTimeField(null=True, blank=True)
    verification_sha256 = models.CharField(
        max_length=64, blank=True, help_text="content_sha256 of the files that were verified"
    )

    class Meta:
        ordering = ["task_id", "slug"]

    def __str__(self) -> str:
        return f"{self.task_id} {self.slug}"

    @property
    def verification_is_stale(self) -> bool:
        """True when the files changed after the last finished verification."""
        return bool(self.verification_sha256) and self.verification_sha256 != self.content_sha256

    @property
    def guidance(self) -> dict[str, str]:
        return {"L1": self.guidance_l1, "L2": self.guidance_l2, "L3": self.guidance_l3}

    def guidance_sha256(self, condition: str) -> str:
        """The digest of the guidance ``condition`` gives now ("" for none; tasks.guidance)."""
        return guidance_digest(self.guidance, condition)


class GuidanceVersion(models.Model):
    """One version of the guidance a condition gives for a task, kept from the first sync that
    published it, so that a run on earlier guidance still shows the text its agent was given."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="guidance_versions")
    condition = models.CharField(max_length=12, help_text="L1, L1+L2 or L1+L2+L3")
    sha256 = models.CharField(max_length=64, help_text="tasks.guidance.guidance_digest of the text")
    text = models.TextField(help_text="the levels the condition gives, as one Markdown document")
    first_synced_at = models.DateTimeField(help_text="when a sync first published this text")

    class Meta:
        ordering = ["task", "condition", "-first_synced_at"]
        constraints = [models.UniqueConstraint(fields=["task", "condition", "sha256"],
                                               name="unique_guidance_version")]

    def __str__(self) -> str:
        return f"{self.task.slug} {self.condition} {self.sha256[:12]}"


class Workload(models.Model):
    """A concrete problem size of a task; ``smoke`` ones are the small interpreter workloads."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="workloads")
    name = models.CharField(max_length=64)
    smoke = models.BooleanField(default=False)
    position = models.PositiveIntegerField(help_text="order in task.toml")
    model = models.CharField(max_length=120, blank=True)
    note = models.TextField(blank=True)
    params = models.JSONField()
    flops = models.FloatField()
    bytes = models.FloatField(help_text="minimal bytes moved")
    shapes = models.JSONField(help_text="[{name, role, shape, dtype}] for every input and output tensor")

    class Meta:
        ordering = ["task", "smoke", "position"]
        constraints = [
            models.UniqueConstraint(fields=["task", "smoke", "name"], name="unique_workload_name_per_task"),
        ]

    def __str__(self) -> str:
        return f"{self.task.slug}/{'smoke/' if self.smoke else ''}{self.name}"

    @property
    def arithmetic_intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else 0.0


class ReferenceRun(models.Model):
    """One imported engine run of the expert references (``bench references --compare compile,...``).

    The engine's JSON is kept whole (``result_json``): the reference rows of the leaderboard are
    scored from it by ``evaluator.score_result``, and the page shows its fingerprint and provenance.
    Importing the same file twice changes nothing (``source_sha256`` is unique).
    """

    hardware = models.CharField(max_length=32, db_index=True, help_text="hardware profile, e.g. h200")
    source_sha256 = models.CharField(max_length=64, unique=True)
    source_name = models.CharField(max_length=300, help_text="the file it was imported from")
    provenance = models.TextField(blank=True, help_text="how it was measured: the command, the machine")
    engine_version = models.CharField(max_length=40)
    started_at = models.DateTimeField()
    imported_at = models.DateTimeField(auto_now_add=True)
    fingerprint = models.JSONField()
    result_json = models.JSONField()

    class Meta:
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"{self.hardware} reference run {self.started_at:%Y-%m-%d %H:%M}"


class ReferenceTiming(models.Model):
    """A provider's median on one workload in a reference run: eager, torch.compile or the expert."""

    run = models.ForeignKey(ReferenceRun, on_delete=models.CASCADE, related_name="timings")
    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="reference_timings")
    provider = models.CharField(max_length=16, help_text="eager, compile or expert")
    correct = models.BooleanField()
    median_ms = models.FloatField()
    q1_ms = models.FloatField()
    q3_ms = models.FloatField()
    count = models.PositiveIntegerField()
    speedup = models.FloatField(help_text="eager median / this median, same run")
    sol_fraction = models.FloatField(null=True, blank=True)
    peak_mem_bytes = models.BigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["workload", "provider"]
        constraints = [
            models.UniqueConstraint(fields=["run", "workload", "provider"], name="unique_reference_timing"),
        ]
