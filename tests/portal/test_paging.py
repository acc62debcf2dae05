"""The browser's list pages show every row a page at a time (before, the moderation queue listed
everything and a team's list stopped silently at 200), and the API's moderation queue is a cursor
page in the queue's own order."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from portal.paging import PAGE_SIZE
from portal.submissions import actions
from portal.submissions.models import Submission
from tests.portal.factories import expert_bundle, make_team, make_user
from tests.portal.test_portal_pages import client_as, evaluated

pytestmark = pytest.mark.django_db

COUNT = PAGE_SIZE + 3


@pytest.fixture
def many(catalogue, media):
    team, user = make_team("Alpha", daily_quota=COUNT + 1, concurrent_quota=COUNT + 1)
    blob = expert_bundle()
    subs = [evaluated(actions.check_create_submission(team=team, user=user, blob=blob, filename="b.zip")[0])
            for _ in range(COUNT)]
    return subs, user


def _rows(html: str, prefix: str) -> int:
    return html.count(f'id="{prefix}-')


def test_moderation_queue_pages_hold_every_waiting_submission_once(many):
    subs, _ = many
    mod = client_as(make_user("mod", moderator=True))
    first = mod.get("/moderation/").content.decode()
    second = mod.get("/moderation/?page=2").content.decode()
    assert _rows(first, "queue") == PAGE_SIZE and _rows(second, "queue") == COUNT - PAGE_SIZE
    assert f"page 1 of 2 ({COUNT} waiting)" in first and 'rel="next" href="?page=2"' in first
    oldest = min(subs, key=lambda s: (Submission.objects.get(pk=s.pk).updated_at, s.pk))
    assert f'id="queue-{oldest.pk}"' in first  # oldest first: the backlog in the order to work it
    assert mod.get("/moderation/?page=99").content.decode().count('id="queue-') == COUNT - PAGE_SIZE  # nearest page
    assert mod.get("/moderation/?page=x").status_code == 200


def test_moderation_queue_page_does_not_query_once_per_row(many):
    """The task counts come from one annotated query: the old template's ``s.tasks.count`` made a
    full page cost more than fifty queries."""
    mod = client_as(make_user("mod", moderator=True))
    with CaptureQueriesContext(connection) as ctx:
        page = mod.get("/moderation/").content.decode()
    assert '<td class="num">1</td>' in page  # each row's task count, from the annotation
    assert len(ctx.captured_queries) < 15, [q["sql"] for q in ctx.captured_queries]


def test_team_list_pages_past_the_old_cap(many):
    subs, user = many
    client = client_as(user)
    seen = _rows(client.get("/submissions/").content.decode(), "submission")
    seen += _rows(client.get("/submissions/?page=2").content.decode(), "submission")
    assert seen == COUNT


def test_api_moderation_queue_is_a_cursor_page_in_queue_order(many):
    subs, _ = many
    api = APIClient(HTTP_HOST="localhost")
    api.force_login(make_user("mod", moderator=True))
    ids, url = [], "/api/v1/moderation/queue/?page_size=20"
    while url:
        body = api.get(url).json()
        ids += [row["id"] for row in body["results"]]
        url = body["next"]
    expected = list(Submission.objects.filter(pk__in=[s.pk for s in subs]).order_by("updated_at", "id")
                    .values_list("pk", flat=True))
    assert ids == expected
