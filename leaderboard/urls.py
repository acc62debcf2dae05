"""URLs of the task pages."""

from django.urls import path

from leaderboard import views

app_name = "leaderboard"

urlpatterns = [
    path("", views.home, name="home"),
    path("tasks/", views.task_list, name="task-list"),
    path("tasks/<slug:slug>/", views.task_detail, name="task-detail"),
]
