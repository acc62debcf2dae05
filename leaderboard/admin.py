"""Read-only admin views of the synced tasks: the files are the source of truth."""

from django.contrib import admin

from leaderboard.models import Task, Workload


class WorkloadInline(admin.TabularInline):
    model = Workload
    extra = 0
    can_delete = False
    fields = ("name", "smoke", "model", "params", "flops", "bytes")
    readonly_fields = fields


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ("task_id", "slug", "title", "category", "verification_status", "retired", "synced_at")
    list_filter = ("category", "verification_status", "retired")
    search_fields = ("slug", "title", "task_id")
    inlines = [WorkloadInline]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
