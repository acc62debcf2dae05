"""In Chromium: the task list shows every task, a task page opens, the L1 guidance reveals, and a
guidance version opens from the page's list of versions."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from playwright.sync_api import Browser, expect, sync_playwright

from tasks.registry import load_tasks
from tests.portal.helpers import sync

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--disable-sync"]

pytestmark = pytest.mark.browser


@contextmanager
def chromium() -> Iterator[Browser]:
    """Playwright's sync API runs an event loop in this thread, after which Django refuses ORM
    calls here; so the database is prepared first and the browser started afterwards."""
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def test_browse_tasks_and_reveal_guidance(live_server):
    tasks = load_tasks().tasks
    assert tasks
    sync()
    with chromium() as browser:
        check_pages(browser, live_server.url, tasks)


def check_pages(browser: Browser, base: str, tasks: list) -> None:
    page = browser.new_page()
    try:
        page.goto(f"{base}/tasks/")
        expect(page.locator("table.tasks tbody tr")).to_have_count(len(tasks))
        for task in tasks:
            expect(page.locator(f"#task-{task.slug}")).to_contain_text(task.spec.title)

        task = tasks[0]
        page.get_by_role("link", name=task.slug, exact=True).click()
        expect(page).to_have_url(f"{base}/tasks/{task.slug}/")
        expect(page.get_by_role("heading", level=1)).to_contain_text(task.spec.title)
        expect(page.locator("table.workloads").first.locator("tbody tr")).to_have_count(len(task.spec.workloads))
        # The stylesheet is served (whitenoise, no CDN): the body font is not the browser default.
        assert page.evaluate("getComputedStyle(document.body).fontFamily").startswith("system-ui")

        l1 = page.locator("#guidance-L1")
        body = l1.locator("section.md")
        expect(body).to_be_hidden()
        l1.locator("summary").click()
        expect(body).to_be_visible()
        word = max(re.findall(r"[A-Za-z]{6,}", task.guidance["L1"]), key=len)
        expect(body).to_contain_text(word)
        expect(page.locator("#guidance-L2 section.md")).to_be_hidden()

        # Every guided condition's current version is listed; its page holds the levels it gives.
        digest = task.guidance_sha256("L1+L2")
        page.get_by_role("link", name=digest[:12], exact=True).click()
        expect(page).to_have_url(f"{base}/tasks/{task.slug}/guidance/{digest}/")
        expect(page.get_by_role("heading", level=1)).to_contain_text("L1+L2")
        expect(page.locator("dl.facts")).to_contain_text("current")
        expect(page.locator("section.md")).to_contain_text(word)
    finally:
        page.close()
