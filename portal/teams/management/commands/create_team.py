"""``manage.py create_team NAME --owner USER [--password PW] [--moderator USER]``: bootstrap a site.

Creates the owner (and the moderator) if missing, the team with its owner membership, and puts
the moderator in the ``moderators`` group. Running it again changes nothing that exists.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError
from django.utils.text import slugify

from portal.moderation.permissions import moderators_group
from portal.teams.models import Team
from portal.teams.services import membership_add, team_create


class Command(BaseCommand):
    help = "Create a team with its owner (and optionally a moderator); idempotent."

    def add_arguments(self, parser) -> None:  # noqa: ANN001
        parser.add_argument("name")
        parser.add_argument("--owner", required=True)
        parser.add_argument("--password", help="password for users this command creates")
        parser.add_argument("--moderator", help="a user to put in the moderators group")

    def _user(self, username: str, password: str | None) -> User:
        user = User.objects.filter(username=username).first()
        if user is None:
            if not password:
                raise CommandError(f"user {username} does not exist: pass --password to create it")
            user = User.objects.create_user(username, password=password)
            self.stdout.write(f"created user {username}")
        return user

    def handle(self, *args: object, name: str, owner: str, password: str | None = None,
               moderator: str | None = None, **options: object) -> None:
        owner_user = self._user(owner, password)
        team = Team.objects.filter(slug=slugify(name)).first()
        if team is None:
            team = team_create(name, owner=owner_user)
            self.stdout.write(f"created team {team.name} ({team.slug})")
        elif not team.memberships.filter(user=owner_user).exists():
            membership_add(team, owner_user, role="owner")
        if moderator:
            self._user(moderator, password).groups.add(moderators_group())
            self.stdout.write(f"{moderator} is a moderator")
