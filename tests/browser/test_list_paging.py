"""In Chromium, against a live server: a moderator with more waiting submissions than one page
works through the queue with the pager, oldest first, and reaches every one of them."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from portal.paging import PAGE_SIZE
from portal.submissions import actions
from portal.submissions.models import Submission
from tests.browser.test_submission_flow import sign_in
from tests.browser.test_task_pages import chromium
from tests.portal.factories import expert_bundle, make_team, make_user
from tests.portal.test_portal_pages import evaluated

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

COUNT = PAGE_SIZE + 2


def test_moderator_pages_through_a_long_queue(live_server, catalogue, media):
    team, user = make_team("Alpha", daily_quota=COUNT + 1, concurrent_quota=COUNT + 1)
    blob = expert_bundle()
    for _ in range(COUNT):
        evaluated(actions.check_create_submission(team=team, user=user, blob=blob, filename="b.zip")[0])
    make_user("mod", moderator=True)
    order = list(Submission.objects.order_by("updated_at", "id").values_list("pk", flat=True))

    with chromium() as browser:
        page = browser.new_context().new_page()
        sign_in(page, live_server.url, "mod")
        page.get_by_role("link", name="Moderation").click()
        rows = page.locator("tbody tr[id^=queue-]")
        expect(rows).to_have_count(PAGE_SIZE)
        expect(rows.first).to_have_id(f"queue-{order[0]}")
        expect(page.get_by_role("navigation", name="Pages of waiting")).to_contain_text(f"page 1 of 2 ({COUNT} waiting)")
        page.get_by_role("link", name="next →").click()
        expect(rows).to_have_count(COUNT - PAGE_SIZE)
        expect(rows.last).to_have_id(f"queue-{order[-1]}")
        page.get_by_role("link", name="← previous").click()
        expect(rows.first).to_have_id(f"queue-{order[0]}")
