"""In Chromium, against a live server and a real worker: a team member signs in, uploads an expert
kernel, watches the run progress to ``evaluated``, a moderator approves it, and the result shows
on the public pages."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from portal.submissions.models import Submission
from tests.browser.test_task_pages import chromium
from tests.portal.factories import expert_bundle, make_team, make_user

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.interpreter, pytest.mark.timeout(600)]

PASSWORD = "pw-for-tests-only"


def sign_in(page: Page, base: str, username: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name=f"Sign out {username}")).to_be_visible()


def test_upload_watch_approve_publish(live_server, catalogue, media, portal_worker, tmp_path):
    make_team("Alpha", owner=make_user("alice"))
    make_user("mod", moderator=True)
    bundle = tmp_path / "bundle.zip"
    bundle.write_bytes(expert_bundle(model="browser-model"))
    portal_worker()
    base = live_server.url

    with chromium() as browser:
        team_page = browser.new_context().new_page()
        sign_in(team_page, base, "alice")
        team_page.get_by_role("link", name="Submit", exact=True).click()
        team_page.set_input_files("#id_upload", str(bundle))
        team_page.select_option("#id_hardware", "cpu-interpret")
        team_page.get_by_role("button", name="Submit", exact=True).click()
        expect(team_page).to_have_url(re.compile(r"/submissions/\d+/$"))
        pk = int(re.search(r"/submissions/(\d+)/", team_page.url).group(1))
        expect(team_page.locator(".messages")).to_contain_text(f"Submission #{pk} is queued")
        # The page polls its live fragment: the status changes without a reload.
        expect(team_page.locator("#status")).to_have_text("evaluated", timeout=300_000)
        expect(team_page.locator("#result-silu-and-mul")).to_contain_text("correct")
        expect(team_page.locator("#result-silu-and-mul table.workloads tbody tr")).to_have_count(3)

        anonymous = browser.new_context().new_page()
        response = anonymous.goto(f"{base}/submissions/{pk}/")
        assert response is not None and response.status == 404  # not public before approval

        mod_page = browser.new_context().new_page()
        sign_in(mod_page, base, "mod")
        mod_page.get_by_role("link", name="Moderation").click()
        mod_page.locator(f"#queue-{pk} a").click()
        expect(mod_page.locator("#evidence-silu-and-mul")).to_contain_text("Anti-cheat findings")
        mod_page.fill("#id_reason", "clean run")
        mod_page.get_by_role("button", name="Approve and publish").click()
        expect(mod_page.locator(".messages")).to_contain_text(f"Submission #{pk}: approve")

        anonymous.goto(f"{base}/runs/")
        row = anonymous.locator(f"#submission-{pk}")
        expect(row).to_contain_text("browser-model")
        row.get_by_role("link").click()
        expect(anonymous.locator("#status")).to_have_text("published")
        expect(anonymous.locator("#result-silu-and-mul")).to_contain_text("correct")
        anonymous.get_by_role("link", name="silu-and-mul/kernel.py").click()
        expect(anonymous.locator("div.hl")).to_contain_text("triton.jit")

    assert Submission.objects.get(pk=pk).status == "published"
