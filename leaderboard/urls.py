"""URLs of the task pages."""

from django.urls import path

from leaderboard import board_views, views

app_name = "leaderboard"

urlpatterns = [
    path("", views.home, name="home"),
    path("tasks/", views.task_list, name="task-list"),
    path("tasks/<slug:slug>/", views.task_detail, name="task-detail"),
    path("tasks/<slug:slug>/guidance/<str:sha256>/", views.guidance_version, name="guidance-version"),
    path("leaderboard/", board_views.leaderboard, name="board"),
    path("leaderboard/pairs/", board_views.pairs, name="pairs"),
]
