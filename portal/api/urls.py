"""``/api/v1/``: the router's endpoints, the OpenAPI schema and its docs page (served offline)."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from leaderboard.api import LeaderboardView, PairsView
from portal.api import views

router = DefaultRouter()
router.register("tasks", views.TaskViewSet, basename="task")
router.register("submissions", views.SubmissionViewSet, basename="submission")
router.register("tokens", views.TokenViewSet, basename="token")

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("moderation/queue/", views.ModerationQueueView.as_view(), name="api-moderation-queue"),
    path("leaderboard/", LeaderboardView.as_view(), name="api-leaderboard"),
    path("pairs/", PairsView.as_view(), name="api-pairs"),
    path("", include(router.urls)),
]
