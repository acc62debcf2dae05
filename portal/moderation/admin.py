from django.contrib import admin

from portal.moderation.models import ModerationDecision


@admin.register(ModerationDecision)
class ModerationDecisionAdmin(admin.ModelAdmin):
    list_display = ("created_at", "attempt", "decision", "moderator")
    list_filter = ("decision",)

    def has_change_permission(self, request, obj=None) -> bool:
        return False
