from django.apps import AppConfig


class ModerationConfig(AppConfig):
    name = "portal.moderation"
    label = "moderation"
