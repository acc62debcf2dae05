"""Scores of published submissions, stored when they are published, read by the leaderboard.

Every number here is computed by :mod:`evaluator.scoring` (through :mod:`portal.scores.services`)
at the moment a result is published, and never anywhere else: the leaderboard reads these rows
instead of re-scoring thousands of submissions per request. ``SubmissionScore`` holds one row per
scope, the whole suite (``all``) and each task category, so a category filter is an index lookup.
``is_latest`` marks the newest published submission of its group (team, model, harness, guidance,
budget, hardware, mode), which is the row the leaderboard shows.
"""

from __future__ import annotations

from django.db import models

from leaderboard.models import Task
from portal.submissions.models import EvaluationAttempt, Submission

ALL = "all"


class SubmissionScore(models.Model):
    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="scores")
    attempt = models.ForeignKey(EvaluationAttempt, on_delete=models.CASCADE, related_name="+")
    scope = models.CharField(max_length=40, help_text="'all' or a task category")
    # denormalized from the submission, so the board filters and sorts on one table
    hardware = models.CharField(max_length=32)
    guidance = models.CharField(max_length=12)
    mode = models.CharField(max_length=8)
    budget = models.PositiveIntegerField()
    team_name = models.CharField(max_length=120)
    # str(AgentModel) and str(Harness): "name (version) · provider" is up to 286 characters, "name version" 201
    model_name = models.CharField(max_length=300)
    harness_name = models.CharField(max_length=210)
    published_at = models.DateTimeField()
    is_latest = models.BooleanField(default=True)

    performance_score = models.FloatField()
    correctness_rate = models.FloatField()
    suite_correctness_rate = models.FloatField()
    correct_count = models.PositiveIntegerField()
    attempted = models.PositiveIntegerField()
    suite_size = models.PositiveIntegerField()
    geomean_correct = models.FloatField(null=True)
    fast_p = models.JSONField(help_text="{p: fraction of the suite correct with S > p}")
    mean_sol_fraction = models.FloatField(null=True)
    turns_used = models.PositiveIntegerField(null=True, help_text="mean over the scope's tasks with a transcript")
    design_score = models.FloatField(null=True)
    implementation_score = models.FloatField(null=True)

    class Meta:
        ordering = ["-performance_score"]
        constraints = [models.UniqueConstraint(fields=["submission", "scope"], name="unique_score_scope")]
        indexes = [
            models.Index(fields=["hardware", "scope", "is_latest", "-performance_score"], name="board_lookup"),
            models.Index(fields=["hardware", "scope", "team_name", "model_name", "harness_name", "budget", "mode",
                                 "guidance", "-published_at"], name="board_group"),
        ]

    def __str__(self) -> str:
        return f"{self.submission_id} {self.scope}: {self.performance_score:.3f}"


class TaskScore(models.Model):
    """One task of a published submission: S (None when failed) and its SOL fraction."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="task_scores")
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="+")
    correct = models.BooleanField()
    speedup = models.FloatField(null=True)
    sol_fraction = models.FloatField(null=True)
    findings = models.JSONField(default=list)

    class Meta:
        ordering = ["task__task_id"]
        constraints = [models.UniqueConstraint(fields=["submission", "task"], name="unique_task_score")]


class JudgeScore(models.Model):
    """The LLM judge's verdict on one task of a submission (AGENTS.md, Judge).

    Stored with the judge model, the prompt version and every raw answer, so a score can be
    audited and re-judged under a new prompt without losing the old one.
    """

    KINDS = (("design", "design"), ("implementation", "implementation"))

    submission_task = models.ForeignKey("submissions.SubmissionTask", on_delete=models.CASCADE,
                                        related_name="judge_scores")
    kind = models.CharField(max_length=16, choices=KINDS)
    score = models.FloatField(help_text="0-100: mean of the level scores")
    levels = models.JSONField(help_text="{L1: 0-100, L2: ..., L3: ...}")
    items = models.JSONField(help_text="[{id, level, item, score, evidence}] per rubric item")
    judge_model = models.CharField(max_length=200)
    prompt_version = models.CharField(max_length=40)
    raw_answers = models.JSONField(help_text="every answer of the judge, the accepted one last")
    attempts = models.PositiveIntegerField()
    # The evaluation attempt a design-only submission's judgement belongs to: a re-run judges the
    # document again and keeps the earlier judgement (PORTAL.md: a re-run never overwrites). None
    # for the judgement made at publication, which is of the submission's code, not of an attempt.
    attempt = models.ForeignKey("submissions.EvaluationAttempt", null=True, blank=True, on_delete=models.CASCADE,
                                related_name="judge_scores")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["submission_task", "kind", "-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["submission_task", "kind", "judge_model", "prompt_version"],
                                    condition=models.Q(attempt__isnull=True), name="unique_judgement"),
            models.UniqueConstraint(fields=["submission_task", "kind", "judge_model", "prompt_version", "attempt"],
                                    condition=models.Q(attempt__isnull=False), name="unique_attempt_judgement"),
        ]
