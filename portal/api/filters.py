"""django-filter sets for the list endpoints."""

from __future__ import annotations

import django_filters

from portal.submissions.constants import Guidance, Status
from portal.submissions.models import Submission


class SubmissionFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=Status.choices)
    hardware = django_filters.CharFilter()
    guidance = django_filters.ChoiceFilter(choices=Guidance.choices)
    model = django_filters.CharFilter(field_name="model__name")
    harness = django_filters.CharFilter(field_name="harness__name")
    team = django_filters.CharFilter(field_name="team__slug")
    task = django_filters.CharFilter(field_name="tasks__task__slug", distinct=True)

    class Meta:
        model = Submission
        fields = ["status", "hardware", "guidance", "model", "harness", "team", "task"]
