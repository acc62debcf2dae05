"""Top-level URLs: the leaderboard app's pages and the admin."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("leaderboard.urls")),
]
