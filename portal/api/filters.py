"""django-filter sets for the list endpoints."""

from __future__ import annotations

import django_filters
from django.db.models import Q, QuerySet

from portal.api.viewer import viewer_of
from portal.submissions.constants import Guidance, Status
from portal.submissions.models import Submission


class SubmissionFilter(django_filters.FilterSet):
    """Filters see what the caller sees: an outsider's view of another team's submission says
    "published" whatever it is now (a re-run may be queued), so ``status`` filters on that, not
    on the real field, which would tell outsiders what the serializer hides."""

    status = django_filters.ChoiceFilter(choices=Status.choices, method="filter_status")
    hardware = django_filters.CharFilter()
    guidance = django_filters.ChoiceFilter(choices=Guidance.choices)
    model = django_filters.CharFilter(field_name="model__name")
    harness = django_filters.CharFilter(field_name="harness__name")
    team = django_filters.CharFilter(field_name="team__slug")
    task = django_filters.CharFilter(field_name="tasks__task__slug", distinct=True)

    def filter_status(self, queryset: QuerySet[Submission], name: str, value: str) -> QuerySet[Submission]:
        viewer = viewer_of(self.request)
        if viewer.moderator:
            return queryset.filter(status=value)
        own = Q(team_id__in=viewer.team_ids)
        shown = own & Q(status=value)
        if value == Status.PUBLISHED:
            shown |= ~own & Q(published_attempt__isnull=False)
        return queryset.filter(shown)

    class Meta:
        model = Submission
        fields = ["status", "hardware", "guidance", "model", "harness", "team", "task"]
