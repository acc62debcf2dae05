"""Top-level URLs: the leaderboard's pages, the submission side, the API, accounts and the admin."""

from django.contrib import admin
from django.contrib.auth.views import LogoutView
from django.urls import include, path
from django.views.generic import RedirectView

from portal.health import healthz, readyz
from portal.submissions.status_views import status
from portal.submissions.views import bundle_format
from portal.teams.views import RateLimitedLoginView

handler404 = "portal.api.errors.not_found"

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    # The admin's own sign-in has no rate limit: it sends people to the one that has.
    path("admin/login/", RedirectView.as_view(pattern_name="login", query_string=True)),
    path("admin/", admin.site.urls),
    path("accounts/login/", RateLimitedLoginView.as_view(), name="login"),
    path("accounts/logout/", LogoutView.as_view(), name="logout"),
    path("api/v1/", include("portal.api.urls")),
    path("moderation/", include("portal.moderation.urls")),
    path("teams/", include("portal.teams.urls")),
    path("status/", status, name="status"),
    path("docs/bundle-format/", bundle_format, name="docs-bundle"),
    path("", include("portal.submissions.urls")),
    path("", include("leaderboard.urls")),
]

handler500 = "portal.unavailable.handler500"
