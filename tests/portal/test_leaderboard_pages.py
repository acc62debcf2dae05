"""The leaderboard, its exports and the paired view, on seeded published submissions.

Every number the pages show is checked against :mod:`evaluator.scoring` applied independently to
the engine JSON stored for each submission; unpublished results never appear.
"""

from __future__ import annotations

import csv
import io
import json
import math
from io import StringIO

import pytest
from django.core.management import call_command

from evaluator.result import TaskResult as EngineTaskResult
from evaluator.result import WorkloadResult as EngineWorkload
from evaluator.score_result import score_task_result
from evaluator.scoring import submission_score
from portal.scores.models import SubmissionScore
from portal.scores.seed import SeedSpec, seed
from portal.submissions.models import Submission
from tasks.registry import REPO_ROOT
from tests.portal.helpers import sync

pytestmark = pytest.mark.django_db
SUITE = ["fused-add-rmsnorm", "silu-and-mul"]  # T15, T16: the order of task ids


@pytest.fixture
def board(task_tree):
    task_tree("fused-add-rmsnorm")
    sync(task_tree("silu-and-mul"))
    call_command("import_reference_results", str(REPO_ROOT / "docs/results/h200-bench.json"), stdout=StringIO())
    published = seed(SeedSpec(submissions=8, teams=1, models=2, seed=3))
    hidden = seed(SeedSpec(submissions=2, teams=1, models=1, seed=99), publish=False)
    return published, hidden


def _independent_score(sub: Submission) -> float:
    scores = {}
    for tr in sub.published_attempt.task_results.select_related("task"):
        engine = EngineTaskResult(slug=tr.task.slug, status=tr.status, verdict="clean",
                                  workloads=[EngineWorkload.model_validate(w.data) for w in tr.workloads.all()])
        scores[tr.task.slug] = score_task_result(engine)
    return submission_score(scores, SUITE).performance_score


def test_board_rows_match_the_scoring_module_and_hide_unpublished(board, client) -> None:
    published, hidden = board
    data = client.get("/leaderboard/?hardware=h200&format=json").json()
    rows = [r for r in data["rows"] if not r["reference"]]
    refs = {r["model"]: r for r in data["rows"] if r["reference"]}
    assert set(refs) == {"PyTorch eager", "torch.compile", "expert kernels"}
    assert refs["PyTorch eager"]["performance_score"] == 1.0
    assert math.isclose(refs["expert kernels"]["performance_score"], (6.91 * 6.99 * 6.02) ** (1 / 6)
                        * (2.95 * 2.85 * 2.93) ** (1 / 6), rel_tol=0.02)
    # the latest of each group (one team, two models, four conditions): 8 groups, 8 rows
    assert len(rows) == 8
    by_id = {s.pk: s for s in published}
    for r in rows:
        assert math.isclose(r["performance_score"], _independent_score(by_id[r["submission"]]), rel_tol=1e-12)
    assert not {s.pk for s in hidden} & {r["submission"] for r in rows}
    html = client.get("/leaderboard/?hardware=h200").content.decode()
    assert 'id="leaderboard"' in html and "expert kernels" in html
    for s in hidden:
        assert f'id="row-{s.pk}"' not in html
    assert '"chart-scores"' in html or 'data-chart="chart-scores"' in html


def test_filters_and_csv_export(board, client) -> None:
    data = client.get("/leaderboard/?hardware=h200&guidance=L1&format=json").json()
    assert {r["guidance"] for r in data["rows"] if not r["reference"]} == {"L1"}
    cat = client.get("/leaderboard/?hardware=h200&category=norm-activation&format=json").json()
    assert cat["scope"] == "norm-activation"
    text = client.get("/leaderboard/?hardware=h200&format=csv").content.decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows[0]["model"] == "PyTorch eager" and "performance_score" in rows[0]
    assert len(rows) == 3 + 8


def test_column_headers_sort_the_board_and_keep_the_filters(board, client) -> None:
    """Each sortable header links to the same board sorted by it; the sorted one says so."""
    html = client.get("/leaderboard/?hardware=h200&guidance=L1&sort=turns").content.decode()
    head = html.split('id="leaderboard"')[1].split("</thead>")[0]
    for key in ("model", "score", "correct", "geomean", "sol", "implementation", "turns", "date"):
        assert f'href="?hardware=h200&amp;guidance=L1&amp;sort={key}"' in head, key
    assert head.count("aria-sort=") == 1 and 'aria-sort="ascending" class="sorted"><a href="?hardware=h200&amp;guidance=L1&amp;sort=turns"' in head
    assert "fast<sub>1.5</sub>" in head
    rows = client.get("/leaderboard/?hardware=h200&guidance=L1&sort=turns&format=json").json()["rows"]
    turns = [r["turns_used"] for r in rows if not r["reference"]]
    assert turns == sorted(turns)
    # the fast_1.5 cell of each row is the stored fraction
    first = next(r for r in rows if not r["reference"])
    cells = html.split(f'id="row-{first["submission"]}"')[1].split("</tr>")[0]
    assert f'{first["fast_1.5"] * 100:.1f}%' in cells
    # the home page shows the same table, unsorted headers as plain text
    home = client.get("/").content.decode()
    assert "sort=" not in home.split('id="leaderboard"')[1].split("</thead>")[0]


def test_pairs_page_compares_each_guided_run_with_the_unguided_one(board, client) -> None:
    html = client.get("/leaderboard/pairs/?hardware=h200").content.decode()
    assert html.count('class="pair"') == 6  # 2 models x (L1, L1+L2, L1+L2+L3) vs none
    assert "Wilcoxon p" in html and "CI" in html
    assert 'data-chart="chart-ablation"' in html
    figure = json.loads(html.split('<script id="pair-0" type="application/json">')[1].split("</script>")[0])
    assert figure["layout"]["xaxis"]["type"] == "log"


def test_pairs_page_through_every_group(board, client, monkeypatch) -> None:
    """Pairs come a page of groups at a time, newest first, and every group is reachable: the two
    models' groups on two pages of one group each, in the HTML and in the API."""
    from leaderboard import board_queries

    api = [client.get(f"/api/v1/pairs/?hardware=h200&limit=1&offset={o}").json() for o in (0, 1, 2)]
    assert [a["groups"] for a in api] == [2, 2, 2] and [len(a["pairs"]) for a in api] == [3, 3, 0]
    models = [{p["model"] for p in a["pairs"]} for a in api[:2]]
    assert all(len(m) == 1 for m in models) and models[0] != models[1]
    every = client.get("/api/v1/pairs/?hardware=h200").json()
    key = lambda p: (p["unguided"], p["guided"])  # noqa: E731
    assert sorted(map(key, every["pairs"])) == sorted(map(key, api[0]["pairs"] + api[1]["pairs"]))
    assert client.get("/api/v1/pairs/?hardware=h200&limit=0").status_code == 400

    monkeypatch.setattr(board_queries, "PAIR_GROUPS_PER_PAGE", 1)
    first = client.get("/leaderboard/pairs/?hardware=h200").content.decode()
    second = client.get("/leaderboard/pairs/?hardware=h200&page=2").content.decode()
    assert first.count('class="pair"') == 3 and second.count('class="pair"') == 3
    assert "page 1 of 2 (2 groups)" in first and 'rel="next"' in first and 'rel="prev"' not in first
    assert "page 2 of 2" in second and 'rel="prev"' in second and 'rel="next"' not in second
    beyond = client.get("/leaderboard/pairs/?hardware=h200&page=9").content.decode()
    assert 'class="pair"' not in beyond and "there are 2 groups in all" in beyond
    assert client.get("/leaderboard/pairs/?hardware=h200&page=x").status_code == 200


def test_a_task_board_ranks_each_groups_result_on_that_task(board, client) -> None:
    """?task= gives each group's latest published submission with its stored score on that task:
    correct ones fastest first, then failed ones; the reference rows are that task's; the page,
    the JSON export and the API agree; an unknown task falls back to the suite's board."""
    from portal.scores.models import TaskScore

    data = client.get("/leaderboard/?hardware=h200&task=silu-and-mul&format=json").json()["rows"]
    refs, rows = [r for r in data if r["reference"]], [r for r in data if not r["reference"]]
    assert [r["model"] for r in refs] == ["PyTorch eager", "torch.compile", "expert kernels"]
    assert refs[0]["speedup"] == 1.0 and all(r["task"] == "silu-and-mul" for r in data)
    latest = set(SubmissionScore.objects.filter(hardware="h200", scope="all", is_latest=True, mode="kernel")
                 .values_list("submission_id", flat=True))
    assert {r["submission"] for r in rows} == latest
    stored = {t.submission_id: t for t in TaskScore.objects.filter(task__slug="silu-and-mul")}
    for r in rows:
        t = stored.get(r["submission"])
        assert r["status"] == ("not attempted" if t is None else "correct" if t.correct else "failed")
        assert r["speedup"] == (t.speedup if t else None)
    ranks = [(0 if r["status"] == "correct" else 1 if r["status"] == "failed" else 2, -(r["speedup"] or 0)) for r in rows]
    assert ranks == sorted(ranks) and ranks[0][0] == 0
    html = client.get("/leaderboard/?hardware=h200&task=silu-and-mul").content.decode()
    assert 'class="board task"' in html and html.count('<tr id="row-') == len(rows)
    assert f'<tr id="row-{rows[0]["submission"]}"><td>1</td>' in html
    api = client.get("/api/v1/leaderboard/?hardware=h200&task=silu-and-mul").json()
    assert api["rows"] == data
    unknown = client.get("/leaderboard/?hardware=h200&task=no-such-task").content.decode()
    assert 'class="board task"' not in unknown and 'id="leaderboard"' in unknown


def test_scores_are_written_at_publication_only(board) -> None:
    published, hidden = board
    assert SubmissionScore.objects.filter(submission__in=hidden).count() == 0
    assert SubmissionScore.objects.filter(submission__in=published, scope="all").count() == len(published)


def test_api_serves_the_same_rows_and_pairs(board, client) -> None:
    page = client.get("/leaderboard/?hardware=h200&format=json").json()
    api = client.get("/api/v1/leaderboard/?hardware=h200").json()
    assert api["rows"] == page["rows"]
    pairs = client.get("/api/v1/pairs/?hardware=h200").json()["pairs"]
    assert len(pairs) == 6 and all(p["ci"][0] <= p["score_ratio"] <= p["ci"][1] for p in pairs)
    schema = client.get("/api/v1/schema/").content.decode()
    assert "/api/v1/leaderboard/" in schema and "/api/v1/pairs/" in schema


def test_api_pages_through_the_board(board, client) -> None:
    every = client.get("/api/v1/leaderboard/?hardware=h200").json()  # the default page holds this small board
    assert every["count"] == len(every["rows"]) > 4 and every["limit"] == 100 and every["offset"] == 0
    assert every["next"] is None and every["previous"] is None
    first = client.get("/api/v1/leaderboard/?hardware=h200&limit=3").json()
    rest = client.get("/api/v1/leaderboard/?hardware=h200&limit=1000&offset=3").json()
    assert first["rows"] + rest["rows"] == every["rows"] and first["count"] == rest["count"] == every["count"]
    assert client.get(f"/api/v1/leaderboard/?hardware=h200&offset={every['count']}").json()["rows"] == []
    # next/previous walk the board with the request's own filters, and meet every row once
    url, seen, pages = "/api/v1/leaderboard/?hardware=h200&sort=date&limit=3", [], []
    while url:
        page = client.get(url).json()
        pages.append(page)
        seen += page["rows"]
        url = page["next"]
        assert url is None or ("hardware=h200" in url and "sort=date" in url and "limit=3" in url)
    dated = client.get("/api/v1/leaderboard/?hardware=h200&sort=date&limit=1000").json()["rows"]
    assert seen == dated and len(pages) == -(-len(dated) // 3)
    assert pages[0]["previous"] is None and all(p["previous"] for p in pages[1:])
    back = client.get(pages[1]["previous"]).json()
    assert back["offset"] == 0 and back["rows"] == pages[0]["rows"]
    for bad in ("limit=0", "limit=1001", "limit=x", "offset=-1"):
        response = client.get(f"/api/v1/leaderboard/?hardware=h200&{bad}")
        assert response.status_code == 400, bad
        assert response.json()["error"]["code"] == "invalid", response.json()


def test_task_page_lists_the_best_published_kernels(board, client) -> None:
    published, hidden = board
    html = client.get("/tasks/silu-and-mul/").content.decode()
    assert 'id="best-h200"' in html
    from portal.scores.models import TaskScore

    best = TaskScore.objects.filter(task__slug="silu-and-mul", correct=True, submission__in=published)
    top = max(best, key=lambda t: t.speedup)
    assert f"{top.speedup:.2f}×" in html
    for s in hidden:
        assert f"/submissions/{s.pk}/kernel/" not in html


@pytest.mark.parametrize("url", ["/api/v1/leaderboard/?hardware=cpu-interpret", "/leaderboard/?hardware=cpu-interpret",
                                 "/leaderboard/?hardware=cpu-interpret&format=csv",
                                 "/api/v1/pairs/?hardware=cpu-interpret"])
def test_an_untimed_profile_has_no_board(client, url: str) -> None:
    """Interpreter runs carry no timings, so every score there would be the failure penalty: the
    end-to-end run showed a correct expert as 0/26 on such a board. Asked for by name, it is a 404
    that says why, not a board of zeros."""
    sync()
    response = client.get(url)
    assert response.status_code == 404, response.content[:300]
    if url.startswith("/api/"):
        assert "correctness-only" in response.json()["error"]["message"]


def test_pairs_say_which_guidance_version_the_guided_run_read(board, client) -> None:
    """The seeded runs state no version; once a guided run states the current one for each task, its
    pair's table and the API say so, and the pair's note about other versions goes away."""
    from django.core.cache import cache

    from portal.submissions.models import SubmissionTask

    pairs = client.get("/api/v1/pairs/?hardware=h200").json()["pairs"]
    assert all(set(p["guided_guidance"].values()) == {"not stated"} for p in pairs)
    assert all(set(p["guided_guidance"]) == set(p["per_task_ratios"]) for p in pairs)
    html = client.get("/leaderboard/pairs/?hardware=h200").content.decode()
    assert html.count('class="guidance-note"') == 6 and "version not stated" in html

    guided = Submission.objects.get(pk=pairs[0]["guided"])
    for entry in SubmissionTask.objects.filter(submission=guided).select_related("task"):
        entry.guidance_sha256 = entry.task.guidance_sha256(guided.guidance)
        entry.save(update_fields=["guidance_sha256"])
    cache.clear()
    first = client.get("/api/v1/pairs/?hardware=h200").json()["pairs"][0]
    assert first["guided"] == guided.pk and set(first["guided_guidance"].values()) == {"current"}
    html = client.get("/leaderboard/pairs/?hardware=h200").content.decode()
    assert html.count('class="guidance-note"') == 5 and ", current</a>" in html

    # Only the tasks whose guided run read the current version: that pair alone, over all its tasks.
    full = first["score_ratio"]
    only = client.get("/api/v1/pairs/?hardware=h200&guidance_version=current").json()
    assert only["guidance_version"] == "current" and [p["guided"] for p in only["pairs"]] == [guided.pk]
    assert math.isclose(only["pairs"][0]["score_ratio"], full)
    # One task read a text this site never published: the pair is compared over the others.
    stale = SubmissionTask.objects.filter(submission=guided).select_related("task").order_by("task__slug").first()
    stale.guidance_sha256 = "ab" * 32
    stale.save(update_fields=["guidance_sha256"])
    cache.clear()
    (pair,) = client.get("/api/v1/pairs/?hardware=h200&guidance_version=current").json()["pairs"]
    ratios = pair["per_task_ratios"]
    assert stale.task.slug not in ratios and len(ratios) == len(first["per_task_ratios"]) - 1
    assert math.isclose(pair["score_ratio"], math.exp(sum(math.log(r) for r in ratios.values()) / len(ratios)))
    assert client.get("/api/v1/pairs/?hardware=h200").json()["guidance_version"] == "any"
    html = client.get("/leaderboard/pairs/?hardware=h200&guidance_version=current").content.decode()
    assert 'name="guidance_version" value="current" checked' in html and 'class="guidance-filter"' in html
    assert html.count('class="pair"') == 1 and html.count('<td class="guidance-version">') == len(ratios)
