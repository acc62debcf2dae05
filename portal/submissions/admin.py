"""Read-only admin for submissions: changes go through actions, never through a form."""

from django.contrib import admin

from portal.submissions.models import AgentModel, Bundle, EvaluationAttempt, Harness, Submission, WorkerBeacon


class ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Submission)
class SubmissionAdmin(ReadOnly):
    list_display = ("id", "team", "model", "guidance", "hardware", "status", "created_at")
    list_filter = ("status", "hardware", "guidance")


@admin.register(EvaluationAttempt)
class AttemptAdmin(ReadOnly):
    list_display = ("submission", "number", "status", "queue", "worker", "heartbeat_at")


admin.site.register([AgentModel, Harness, Bundle, WorkerBeacon], ReadOnly)
