"""Task list and detail pages: every task of the real tree, escaping, 404s and query counts."""

from __future__ import annotations

from html import escape

import pytest
from django.test import Client

from leaderboard.models import Task
from leaderboard.templatetags.d2k import markdown, si
from tasks.registry import load_tasks
from tests.portal.helpers import sync

pytestmark = pytest.mark.django_db

XSS = "<script>alert(1)</script>"


@pytest.fixture
def client() -> Client:
    return Client(HTTP_HOST="localhost")


@pytest.fixture
def real_tasks():
    report = load_tasks()
    assert report.tasks, "the repository's task tree is empty"
    sync()
    return report.tasks


def test_task_list_shows_every_task(client, real_tasks):
    html = client.get("/tasks/").content.decode()
    for task in real_tasks:
        row = html[html.index(f'<tr id="task-{task.slug}">'):]
        row = row[:row.index("</tr>")]
        for text in (task.spec.id, task.slug, escape(task.spec.title), task.spec.category):
            assert text in row
        assert f'<td class="num">{len(task.spec.workloads)}</td>' in row
        assert f'href="/tasks/{task.slug}/"' in row
        assert "not verified" in row


def test_home_has_the_intro_and_the_table(client, real_tasks):
    response = client.get("/")
    assert response.status_code == 200
    html = response.content.decode()
    assert '<p class="intro">D2K-Bench asks' in html
    for task in real_tasks:
        assert f'id="task-{task.slug}"' in html


def test_task_detail_shows_workloads_and_guidance(client, real_tasks):
    for task in real_tasks:
        response = client.get(f"/tasks/{task.slug}/")
        assert response.status_code == 200
        html = response.content.decode()
        assert escape(task.spec.title) in html
        for workload in task.spec.workloads:
            flops, nbytes = task.roofline(workload.params)
            assert f'<tr id="workload-{workload.name}">' in html
            assert si(flops) in html and si(nbytes, "B") in html
        for workload in task.spec.smoke:
            assert f'<tr id="workload-smoke-{workload.name}">' in html
        for level in ("L1", "L2", "L3"):
            assert f'<details class="guidance" id="guidance-{level}">' in html
        first_line = task.guidance["L1"].strip().splitlines()[0].lstrip("# ").strip()
        assert escape(first_line, quote=False)[:40] in html


def test_markup_in_task_files_is_escaped(client, task_tree):
    root = task_tree()
    toml = root / "tasks" / "fused-add-rmsnorm" / "task.toml"
    text = toml.read_text()
    text = text.replace('title = "Fused residual add + RMSNorm"', f'title = "{XSS} norm"')
    text = text.replace('model = "Llama-3-8B"', 'model = "<img src=x onerror=alert(2)>"')
    text = text.replace("semantics = \"\"\"\n", "semantics = \"\"\"\n<iframe src=\"javascript:alert(3)\"></iframe> [x](javascript:alert(4))\n")
    toml.write_text(text)
    l1 = root / "guidance" / "fused-add-rmsnorm" / "L1.md"
    l1.write_text(l1.read_text() + f"\n\n{XSS}\n")
    sync(root)

    for url in ("/tasks/", "/", "/tasks/fused-add-rmsnorm/"):
        html = client.get(url).content.decode()
        assert XSS not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    detail = client.get("/tasks/fused-add-rmsnorm/").content.decode()
    assert "<img src=x" not in detail and "&lt;img src=x onerror=alert(2)&gt;" in detail
    assert "<iframe" not in detail
    assert 'href="javascript:' not in detail


def test_unknown_slug_is_404(client, real_tasks):
    response = client.get("/tasks/no-such-task/")
    assert response.status_code == 404
    assert "no-such-task" in response.content.decode()


def test_retired_task_leaves_the_list_but_keeps_its_page(client, task_tree):
    root = task_tree()
    sync(root)
    Task.objects.update(retired=True)
    assert 'id="task-fused-add-rmsnorm"' not in client.get("/tasks/").content.decode()
    detail = client.get("/tasks/fused-add-rmsnorm/")
    assert detail.status_code == 200 and "retired" in detail.content.decode()


def test_query_counts_do_not_grow_with_tasks(client, task_tree, django_assert_num_queries):
    task_tree()
    task_tree(as_slug="second-norm", task_id="T98")
    sync(task_tree(as_slug="third-norm", task_id="T99"))
    with django_assert_num_queries(1):
        client.get("/tasks/")
    with django_assert_num_queries(5):  # the task, its workloads, its reference runs (none yet), best kernels,
        # its guidance versions
        client.get("/tasks/fused-add-rmsnorm/")


def test_embedded_markdown_headings_move_below_the_page_s_own() -> None:
    """Guidance files open with a level-1 heading; on a page that has its own ``h1`` they render lower."""
    text = "# L1: algorithm\n\n## Steps\n\n###### deepest\n\n<h1>raw</h1>"
    assert str(markdown(text)).startswith("<h1>L1: algorithm</h1>")
    shifted = str(markdown(text, 2))
    assert "<h3>L1: algorithm</h3>" in shifted and "<h4>Steps</h4>" in shifted and "<h6>deepest</h6>" in shifted
    assert "<h1>" not in shifted and "&lt;h1&gt;raw&lt;/h1&gt;" in shifted


def test_an_unverified_expert_says_how_it_gets_checked(client, real_tasks):
    """A fresh site (the README's run-local) has every expert "not verified": the task page says
    what checks it, and stops saying so once a check has run."""
    from leaderboard.constants import VerificationStatus
    from leaderboard.models import Task

    page = client.get("/tasks/silu-and-mul/").content.decode()
    assert "not verified" in page and "python manage.py sync_tasks --verify" in page
    Task.objects.filter(slug="silu-and-mul").update(verification_status=VerificationStatus.CORRECT)
    page = client.get("/tasks/silu-and-mul/").content.decode()
    assert "sync_tasks --verify" not in page
