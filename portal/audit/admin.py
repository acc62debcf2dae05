"""The audit log in the admin, read-only."""

from django.contrib import admin

from portal.audit.models import AuditLog


@admin.register(AuditLog)
class AuditLogAdmin(admin.ModelAdmin):
    list_display = ("created_at", "actor_label", "action", "object_type", "object_id", "from_status", "to_status")
    list_filter = ("action", "to_status")
    search_fields = ("object_id", "actor_label", "reason")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
