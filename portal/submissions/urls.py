"""Submission pages."""

from django.urls import path

from portal.submissions import views

app_name = "submissions"

urlpatterns = [
    path("submit/", views.submit, name="submit"),
    path("submissions/", views.mine, name="mine"),
    path("runs/", views.published, name="published"),
    path("submissions/<int:pk>/", views.detail, name="detail"),
    path("submissions/<int:pk>/live/", views.progress, name="live"),
    path("submissions/<int:pk>/kernel/<slug:slug>/", views.kernel, name="kernel"),
    path("submissions/<int:pk>/transcript/<slug:slug>/", views.transcript, name="transcript"),
    path("submissions/<int:pk>/design/<slug:slug>/", views.design, name="design"),
    path("submissions/<int:pk>/cancel/", views.act, {"action": "cancel"}, name="cancel"),
    path("submissions/<int:pk>/rerun/", views.act, {"action": "rerun"}, name="rerun"),
]
