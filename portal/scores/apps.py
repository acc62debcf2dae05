from django.apps import AppConfig


class ScoresConfig(AppConfig):
    name = "portal.scores"
    label = "scores"
    verbose_name = "leaderboard scores"
