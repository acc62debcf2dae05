"""In Chromium: the leaderboard, the paired view and a task page render, charts drawn with data.

Screenshots go to ``$D2K_SCREENSHOTS`` (``docs/screenshots`` holds committed ones) or to the
test's temporary folder.
"""

from __future__ import annotations

import os
import re
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from portal.scores.seed import SeedSpec, seed
from tasks.registry import REPO_ROOT
from tests.browser.test_task_pages import chromium
from tests.portal.helpers import sync

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _charts_drawn(page, count: int) -> None:  # noqa: ANN001 - a Playwright page
    figures = page.locator("figure[data-chart]")
    expect(figures).to_have_count(count)
    for i in range(count):
        expect(figures.nth(i)).to_have_attribute("data-rendered", re.compile(r"^[1-9][0-9]*$"), timeout=20_000)
        assert figures.nth(i).locator(".main-svg").count() > 0  # plotly drew an SVG


def test_leaderboard_pairs_and_task_page_render_with_charts(live_server, task_tree, tmp_path: Path) -> None:
    task_tree("fused-add-rmsnorm")
    sync(task_tree("silu-and-mul"))
    call_command("import_reference_results", str(REPO_ROOT / "docs/results/h200-bench.json"), stdout=StringIO())
    seed(SeedSpec(submissions=8, teams=1, models=2, seed=3))
    shots = Path(os.environ.get("D2K_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{live_server.url}/leaderboard/?hardware=h200")
        expect(page.locator("#leaderboard tbody tr")).to_have_count(3 + 8)
        expect(page.locator("#leaderboard tr.reference").first).to_contain_text("PyTorch eager")
        _charts_drawn(page, 3)  # scores by condition, correctness by category, SOL per task
        page.screenshot(path=str(shots / "leaderboard.png"), full_page=True)
        # The 14-column board fits a 1280-pixel window (the board's pages take a wider column);
        # narrower, it scrolls inside the page column, and the page itself never scrolls sideways.
        table_scrolls = "(() => { const w = document.querySelector('.table-scroll'); return w.scrollWidth > w.clientWidth; })()"
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        assert not page.evaluate(table_scrolls)
        narrow = browser.new_page(viewport={"width": 900, "height": 900})
        narrow.goto(f"{live_server.url}/leaderboard/?hardware=h200")
        _charts_drawn(narrow, 3)
        assert narrow.evaluate(table_scrolls)
        assert narrow.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        narrow.close()
        page.goto(f"{live_server.url}/")  # the home page shows the board's top rows in the same table
        expect(page.locator("#leaderboard tr.reference").first).to_contain_text("PyTorch eager")
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        page.goto(f"{live_server.url}/leaderboard/?hardware=h200")

        page.select_option("select[name=guidance]", "L1+L2+L3")
        page.get_by_role("button", name="Apply").click()
        expect(page.locator("#leaderboard tbody tr:not(.reference)")).to_have_count(2)

        page.goto(f"{live_server.url}/leaderboard/pairs/?hardware=h200")
        expect(page.locator("section.pair")).to_have_count(6)
        _charts_drawn(page, 7)  # the ablation and one scatter per pair
        page.screenshot(path=str(shots / "pairs.png"), full_page=True)
        # The seeded runs state no guidance version, so no pair keeps a task on the current one.
        page.get_by_label("Only tasks where the guided agent read the current guidance").check()
        page.get_by_role("button", name="Apply").click()
        expect(page.locator("section.pair")).to_have_count(0)
        expect(page.locator("p.guidance-filter")).to_be_visible()
        expect(page.get_by_text("No pair on this page has a task whose guided run read the current guidance")).to_be_visible()
        assert "guidance_version=current" in page.url

        page.goto(f"{live_server.url}/tasks/fused-add-rmsnorm/")
        expect(page.locator("#reference-h200 tbody tr")).to_have_count(3)
        page.screenshot(path=str(shots / "task-page.png"), full_page=True)

        # The home page heads with the same board (its top rows) and the newest published runs.
        page.goto(f"{live_server.url}/")
        expect(page.locator("#leaderboard tr.reference")).to_have_count(3)
        expect(page.locator("#leaderboard tbody tr:not(.reference)")).to_have_count(8)
        expect(page.locator("table.submissions tbody tr")).to_have_count(5)
        page.screenshot(path=str(shots / "home.png"), full_page=True)
        page.locator("table.submissions tbody tr a").first.click()
        expect(page.locator("h1")).to_contain_text("Submission")
