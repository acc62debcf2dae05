"""The ``moderators`` group, holding the ``moderation.moderate`` permission."""

from django.contrib.auth.management import create_permissions
from django.db import migrations


def create_group(apps, schema_editor):
    for app_config in apps.get_app_configs():  # permissions are normally made after migrate; make them now
        app_config.models_module = True
        create_permissions(app_config, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name="moderators")
    group.permissions.add(Permission.objects.get(codename="moderate", content_type__app_label="moderation"))


def remove_group(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name="moderators").delete()


class Migration(migrations.Migration):
    dependencies = [("moderation", "0002_initial"), ("auth", "0012_alter_user_first_name_max_length"),
                    ("contenttypes", "0002_remove_content_type_name")]

    operations = [migrations.RunPython(create_group, remove_group)]
