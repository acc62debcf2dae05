"""The home page: what the benchmark is, the headline leaderboard (the default card's reference
rows and its top published rows), the latest published runs, and the task table. Unpublished
results appear in none of it."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import call_command

from leaderboard.views import HOME_BOARD_ROWS, HOME_LATEST_RUNS
from portal.scores.models import SubmissionScore
from portal.scores.seed import SeedSpec, seed
from portal.submissions.models import Submission
from tasks.registry import REPO_ROOT
from tests.portal.helpers import sync

pytestmark = pytest.mark.django_db


def _page(client) -> str:  # noqa: ANN001
    response = client.get("/")
    assert response.status_code == 200
    return response.content.decode()


def _section(html: str, start: str, end: str) -> str:
    return html[html.index(start):html.index(end, html.index(start))]


def test_an_empty_site_says_so(catalogue, client) -> None:
    html = _page(client)
    assert "No submission is published on this card yet." in _section(html, 'id="leaderboard"', "</table>")
    assert "No run is published yet." in html
    assert 'id="task-silu-and-mul"' in html


def test_the_home_page_heads_with_the_board_and_the_latest_runs(task_tree, client) -> None:
    task_tree("fused-add-rmsnorm")
    sync(task_tree("silu-and-mul"))
    call_command("import_reference_results", str(REPO_ROOT / "docs/results/h200-bench.json"), stdout=StringIO())
    seed(SeedSpec(submissions=14, teams=2, models=3, seed=5))
    hidden = seed(SeedSpec(submissions=2, teams=1, models=1, seed=77), publish=False)
    html = _page(client)
    assert "Leaderboard on h200, all tasks" in html

    board = _section(html, 'id="leaderboard"', "</table>")
    refs = re.findall(r'<tr class="reference"><td>ref</td><td>([^<]+)</td>', board)
    assert refs[:2] == ["PyTorch eager", "torch.compile"] and "expert kernels" in refs
    want = list(SubmissionScore.objects.filter(hardware="h200", scope="all", is_latest=True, mode="kernel")
                .order_by("-performance_score", "submission_id").values_list("submission_id", flat=True))
    shown = [int(n) for n in re.findall(r'<tr id="row-(\d+)">', board)]
    assert len(want) >= 3 and shown == want[:HOME_BOARD_ROWS]

    newest = list(Submission.objects.filter(published_attempt__isnull=False).order_by("-published_at")
                  .values_list("pk", flat=True)[:HOME_LATEST_RUNS])
    runs = [int(n) for n in re.findall(r'<tr id="submission-(\d+)">', _section(html, 'id="latest-runs"', "</table>"))]
    assert runs == newest and len(runs) == HOME_LATEST_RUNS
    unpublished = {s.pk for s in hidden}
    assert not unpublished & (set(shown) | set(runs))
