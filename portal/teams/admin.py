from django.contrib import admin

from portal.teams.models import ApiToken, Membership, Team


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "daily_quota", "concurrent_quota", "created_at")
    inlines = [MembershipInline]
    prepopulated_fields = {"slug": ("name",)}


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("team", "name", "prefix", "created_at", "expires_at", "revoked_at", "last_used_at")
    readonly_fields = ("digest", "prefix")
