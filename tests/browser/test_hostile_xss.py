"""In Chromium: pages showing injected fields run none of it. The submission page (team name,
model, harness, the engine's reason), the transcript viewer and the leaderboard with its Plotly
charts (which draw model names in SVG) are loaded with a dialog listener: no alert fires, no
injected element exists, and the payload is visible as text."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.test_task_pages import chromium
from tests.portal.test_hostile_xss import P, world  # noqa: F401 - the fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_injected_fields_are_shown_as_text_and_never_run(live_server, world):  # noqa: F811
    pk, base = world["pk"], live_server.url
    with chromium() as browser:
        page = browser.new_page()
        dialogs: list[str] = []
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        for url, shown in ((f"/submissions/{pk}/", ("team", "model", "harness", "reason")),
                           (f"/submissions/{pk}/kernel/silu-and-mul/", ("path",)),
                           (f"/submissions/{pk}/transcript/silu-and-mul/", ("tmodel", "content")),
                           ("/leaderboard/?hardware=h200", ("model",))):
            page.goto(base + url)
            page.wait_for_load_state("networkidle")
            assert dialogs == [], f"{url}: an injected script ran: {dialogs}"
            for tag in shown:
                expect(page.get_by_text(P(tag)).first).to_be_visible()
            assert page.locator("img[src=x], img[onerror]").count() == 0, url
            # Executable scripts only: the charts' JSON data (type=application/json) holds the names as text.
            assert page.evaluate("[...document.scripts].filter(s => !s.type || s.type.includes('javascript'))"
                                 ".every(s => !s.textContent.includes('alert('))"), url
        figures = page.locator("figure[data-chart]")
        assert figures.count() > 0
        expect(figures.first).to_have_attribute("data-rendered", re.compile(r"^[1-9]"), timeout=20_000)  # drawn
    assert dialogs == [], f"an injected script ran: {dialogs}"
