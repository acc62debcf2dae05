from django.urls import path

from portal.moderation import views

app_name = "moderation"

urlpatterns = [
    path("", views.queue, name="queue"),
    path("<int:pk>/", views.review, name="review"),
    path("<int:pk>/<str:decision>/", views.decide, name="decide"),
]
