"""API representations. Read-only except the upload, whose fields are validated by the actions."""

from __future__ import annotations

from rest_framework import serializers

from leaderboard.guidance_versions import guidance_state, versions_of
from leaderboard.models import Task, Workload
from portal.moderation.models import Decision
from portal.scores.models import JudgeScore
from portal.submissions.constants import DEFAULT_BUDGET, Guidance
from portal.submissions.models import (
    EvaluationAttempt,
    Submission,
    SubmissionTask,
    TaskResult,
    WorkloadResult,
)
from portal.submissions.selectors import progress_of, task_score
from portal.submissions.validation import (
    is_single_kernel,
    single_kernel_bundle,
    single_kernel_fields_beside_bundle,
    single_kernel_missing,
)
from portal.teams.models import ApiToken


class WorkloadSerializer(serializers.ModelSerializer):
    class Meta:
        model = Workload
        fields = ["name", "smoke", "model", "params", "flops", "bytes", "shapes"]


class TaskListSerializer(serializers.ModelSerializer):
    class Meta:
        model = Task
        fields = ["slug", "task_id", "title", "category", "entry_point", "summary"]


class TaskDetailSerializer(serializers.ModelSerializer):
    workloads = WorkloadSerializer(many=True, read_only=True)
    spec = serializers.JSONField(source="spec_json")
    guidance = serializers.DictField(child=serializers.CharField())
    guidance_versions = serializers.SerializerMethodField(
        help_text="every version of each guided condition's text this site published, with its digest")

    class Meta:
        model = Task
        fields = ["slug", "task_id", "title", "category", "entry_point", "summary", "semantics", "notes", "spec",
                  "workloads", "guidance", "guidance_versions"]

    def get_guidance_versions(self, obj: Task) -> list[dict]:
        return [{"condition": v.condition, "sha256": v.sha256, "first_synced_at": v.first_synced_at,
                 "current": current} for v, current in versions_of(obj)]


class SubmissionTaskSerializer(serializers.ModelSerializer):
    slug = serializers.CharField(source="task.slug")
    guidance_version = serializers.SerializerMethodField(
        help_text="the stated guidance against the task's: unguided, not stated, current, earlier or unpublished")

    class Meta:
        model = SubmissionTask
        fields = ["slug", "kernel_path", "kernel_sha256", "transcript_path", "turns_used", "guidance_sha256",
                  "guidance_version"]

    def get_guidance_version(self, obj: SubmissionTask) -> str:
        return guidance_state(obj.task, obj.submission.guidance, obj.guidance_sha256).status


class AttemptSerializer(serializers.ModelSerializer):
    class Meta:
        model = EvaluationAttempt
        fields = ["number", "status", "queue", "requested_by_label", "created_at", "started_at", "finished_at",
                  "heartbeat_at", "worker", "infra_retries", "progress", "mode", "engine_version", "error_code",
                  "reason"]


class SubmissionSerializer(serializers.ModelSerializer):
    team = serializers.CharField(source="team.slug")
    model = serializers.CharField(source="model.name")
    provider = serializers.CharField(source="model.provider")
    model_version = serializers.CharField(source="model.version")
    harness = serializers.CharField(source="harness.name")
    harness_version = serializers.CharField(source="harness.version")
    bundle_sha256 = serializers.CharField(source="bundle.sha256")
    tasks = SubmissionTaskSerializer(many=True, read_only=True)
    attempt = serializers.SerializerMethodField()
    public = serializers.BooleanField(source="is_public")
    progress = serializers.SerializerMethodField()

    class Meta:
        model = Submission
        fields = ["id", "team", "model", "provider", "model_version", "harness", "harness_version", "guidance", "mode",
                  "budget", "hardware", "filename", "bundle_sha256", "status", "public", "created_at", "updated_at",
                  "published_at", "tasks", "attempt", "progress"]

    def _private(self, obj: Submission) -> bool:
        """The caller's team's own submission (or a moderator): every attempt and live progress."""
        return bool(self.context.get("moderator")) or obj.team_id in self.context.get("team_ids", ())

    def get_attempt(self, obj: Submission) -> dict | None:
        attempt = obj.current_attempt if self._private(obj) else obj.published_attempt
        return AttemptSerializer(attempt).data if attempt else None

    def get_progress(self, obj: Submission) -> dict | None:
        return progress_of(obj) if self._private(obj) else None

    def to_representation(self, obj: Submission) -> dict:
        data = super().to_representation(obj)
        if not self._private(obj):
            data["status"] = "published"
        return data


class SubmissionCreateSerializer(serializers.Serializer):
    """A bundle, or one kernel file (``*.py``) with the fields its manifest would carry (PORTAL.md)."""

    bundle = serializers.FileField(help_text=".zip or .tar.gz with submission.toml at its root, "
                                             "or one kernel file (.py) with the single-kernel fields")
    hardware = serializers.CharField(required=False, help_text="hardware profile; overrides the manifest's")
    team = serializers.SlugField(required=False, help_text="session auth only, when the user is in several teams")
    task = serializers.SlugField(required=False, help_text="single kernel only (required): the task slug")
    model = serializers.CharField(required=False, max_length=120, help_text="single kernel only (required)")
    provider = serializers.CharField(required=False, max_length=80, help_text="single kernel only (required)")
    harness = serializers.CharField(required=False, max_length=120, help_text="single kernel only (required)")
    model_version = serializers.CharField(required=False, max_length=80, default="", help_text="single kernel only")
    harness_version = serializers.CharField(required=False, max_length=80, default="", help_text="single kernel only")
    guidance = serializers.ChoiceField(choices=Guidance.choices, default=Guidance.NONE, help_text="single kernel only")
    budget = serializers.IntegerField(min_value=1, max_value=100_000, default=DEFAULT_BUDGET,
                                      help_text="single kernel only: the agent's turn budget")
    guidance_sha256 = serializers.CharField(
        required=False, max_length=64, default="",
        help_text="single kernel only, guided runs: the SHA-256 of the guidance text the agent read "
                  "(the task's guidance_versions)")

    def validate(self, attrs: dict) -> dict:
        upload = attrs["bundle"]
        if is_single_kernel(upload.name):
            if missing := single_kernel_missing(attrs):
                raise serializers.ValidationError(
                    {name: [f"a single kernel file ({upload.name}) needs this field"] for name in missing})
        else:
            # A bundle's manifest says these; two sources would disagree silently.
            defaults = {name: field.default for name, field in self.fields.items()}
            if given := single_kernel_fields_beside_bundle(attrs, defaults):
                raise serializers.ValidationError(
                    {name: [f"only for a single kernel file; {upload.name} is a bundle, whose manifest says it"]
                     for name in given})
        return attrs

    def bundle_blob(self) -> bytes:
        """The upload as a bundle: a single kernel file is wrapped the same way the web form wraps it."""
        data = self.validated_data
        blob = data["bundle"].read()
        if not is_single_kernel(data["bundle"].name):
            return blob
        return single_kernel_bundle(blob, slug=data["task"], model=data["model"], provider=data["provider"],
                                    harness=data["harness"], guidance=data["guidance"], budget=data["budget"],
                                    model_version=data["model_version"], harness_version=data["harness_version"],
                                    guidance_sha256=data["guidance_sha256"])


class WorkloadResultSerializer(serializers.ModelSerializer):
    class Meta:
        model = WorkloadResult
        fields = ["name", "smoke", "correct", "params", "baseline_ms", "candidate_ms", "speedup", "sol_fraction",
                  "rel_stderr"]


class TaskResultSerializer(serializers.ModelSerializer):
    slug = serializers.CharField(source="task.slug")
    workloads = WorkloadResultSerializer(many=True, read_only=True)
    score = serializers.SerializerMethodField()

    class Meta:
        model = TaskResult
        fields = ["slug", "status", "error_code", "reason", "verdict", "findings", "aten_ops", "wall_s", "score",
                  "workloads"]

    def get_score(self, obj: TaskResult) -> dict:
        s = task_score(obj)
        return {"correct": s.correct, "speedup": s.speedup, "sol_fraction": s.sol_fraction,
                "findings": list(s.findings)}


class JudgeScoreSerializer(serializers.ModelSerializer):
    slug = serializers.CharField(source="submission_task.task.slug")

    class Meta:
        model = JudgeScore
        fields = ["slug", "kind", "score", "levels", "items", "judge_model", "prompt_version", "attempts", "created_at"]


class TaskLogSerializer(serializers.ModelSerializer):
    slug = serializers.CharField(source="task.slug")

    class Meta:
        model = TaskResult
        fields = ["slug", "status", "error_code", "stdout_tail", "stderr_tail"]


class ReasonSerializer(serializers.Serializer):
    reason = serializers.CharField(required=False, allow_blank=True, max_length=4000)


class DecisionSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=Decision.choices)
    reason = serializers.CharField(required=False, allow_blank=True, max_length=4000)
    other_node = serializers.BooleanField(required=False, default=False,
                                          help_text="with rerun: not on the worker the latest attempt ran on")


class TokenSerializer(serializers.ModelSerializer):
    state = serializers.CharField(read_only=True)
    team = serializers.CharField(source="team.slug", read_only=True)

    class Meta:
        model = ApiToken
        fields = ["id", "team", "name", "prefix", "created_at", "expires_at", "revoked_at", "last_used_at", "state"]
        read_only_fields = fields


class ErrorBodySerializer(serializers.Serializer):
    code = serializers.CharField(help_text="stable, machine-readable: invalid, not_found, quota_daily, ...")
    message = serializers.CharField()
    details = serializers.JSONField(help_text="field errors (a map), the upload's {file, rule, message} problems "
                                              "(a list), or {}")


class ErrorSerializer(serializers.Serializer):
    """The one body of every API error (portal.api.errors), for the schema."""

    error = ErrorBodySerializer()


class TokenCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=80)
    days = serializers.IntegerField(min_value=1, max_value=366, required=False)
    team = serializers.SlugField(required=False)
