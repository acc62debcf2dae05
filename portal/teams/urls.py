from django.urls import path

from portal.teams import views

app_name = "teams"

urlpatterns = [
    path("", views.mine, name="mine"),
    path("<slug:slug>/", views.detail, name="detail"),
    path("<slug:slug>/tokens/", views.tokens, name="tokens"),
    path("<slug:slug>/tokens/<int:pk>/revoke/", views.revoke, name="revoke"),
]
