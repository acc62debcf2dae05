"""Shared fixtures: temporary task trees built from a real task, for tests that must not depend
on (or change) the repository's own tree."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tasks.registry import REPO_ROOT

#: The task copied to build temporary trees.
TEMPLATE_SLUG = "fused-add-rmsnorm"


def copy_task(root: Path, slug: str = TEMPLATE_SLUG, *, as_slug: str | None = None,
              task_id: str | None = None) -> Path:
    """Copy one task's files (tasks/, references/, guidance/) under ``root``, optionally renamed.

    Returns the new ``task.toml``. A renamed copy gets its ``slug`` (and ``id`` if given)
    rewritten so that the loader accepts it as a distinct task.
    """
    new = as_slug or slug
    for part in ("tasks", "references", "guidance"):
        shutil.copytree(REPO_ROOT / part / slug, root / part / new)
    toml = root / "tasks" / new / "task.toml"
    text = toml.read_text(encoding="utf-8")
    text = re.sub(r'^slug = ".*"$', f'slug = "{new}"', text, count=1, flags=re.M)
    if task_id:
        text = re.sub(r'^id = ".*"$', f'id = "{task_id}"', text, count=1, flags=re.M)
    toml.write_text(text, encoding="utf-8")
    return toml


@pytest.fixture
def task_tree(tmp_path: Path) -> Callable[..., Path]:
    """``task_tree()`` -> a tree root holding a copy of the template task; call again to add more."""
    root = tmp_path / "tree"

    def build(slug: str = TEMPLATE_SLUG, *, as_slug: str | None = None, task_id: str | None = None) -> Path:
        copy_task(root, slug, as_slug=as_slug, task_id=task_id)
        return root

    return build


#: Test folders that use no shared service (no database, Redis, Celery worker or browser): the
#: engine and the tasks never import Django. Their tests may run in parallel pytest-xdist workers.
SERVICE_FREE = ("evaluator", "tasks")


#: The xdist group of every other test (``--dist loadgroup`` in scripts/test.sh).
SERVICES_GROUP = "services"


def uses_services(item: pytest.Item) -> bool:
    """Whether a test may touch a shared service: every test outside :data:`SERVICE_FREE`."""
    tests_dir = Path(__file__).resolve().parent
    path = Path(item.path).resolve()
    return not path.is_relative_to(tests_dir) or path.relative_to(tests_dir).parts[0] not in SERVICE_FREE


#: Single tests that take minutes on CI's two cores, longest first. They are collected first, so
#: under ``--dist loadgroup`` (which deals the groups out first, largest first, then the other
#: tests in collection order) they start early, beside the services group, and the run does not
#: end with one worker still inside one of them while the other has nothing left to take.
SLOW_FIRST = (
    "tests/evaluator/test_preflight_sm90.py::test_every_experts_gpu_path_compiles_for_sm90",
    "tests/tasks/test_topk_topp_barriers.py::test_every_store_of_the_sampling_kernels_is_fenced_by_a_barrier[W3]",
    "tests/evaluator/test_cheats.py::test_cheat_fails_bench[escape_after_timer]",
    "tests/evaluator/test_runner_faults.py::test_a_timeout_part_way_keeps_the_workloads_already_judged",
)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which turns the marks into node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test outside :data:`SERVICE_FREE` joins one xdist group, so under ``--dist loadgroup``
    they all run in one worker, one after another: they share Redis queues (a worker fixture
    purges them), Celery workers and the database server, and are written to have them alone.
    The interpreter-bound engine and task tests, most of the suite's time, spread over the rest;
    the :data:`SLOW_FIRST` ones first. (Tests that share an expensive module fixture or build
    cache name their own group in their module, so that one worker pays for it once.)"""
    for item in items:
        if uses_services(item):
            item.add_marker(pytest.mark.xdist_group(SERVICES_GROUP))
    rank = {nodeid: n for n, nodeid in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid, len(rank)))  # stable: the rest keep their order


class GroupingGuard:
    """Fails every service test of a parallel run in which the services group did not take.

    xdist groups by suffixing node ids (``...::test@services``). When it cannot (pytest 9.2 with
    xdist 3.8, pytest-dev/pytest-xdist#1386) the tests are spread as if ungrouped, and the service
    tests then collide on Redis queues and Celery workers: intermittent failures far from the
    cause. Each such test fails at setup instead, naming the cause."""

    def __init__(self) -> None:
        self.ungrouped: set[str] = set()

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        if getattr(config.option, "loadgroup", False):  # set in xdist workers under --dist loadgroup
            self.ungrouped = {i.nodeid for i in items
                              if uses_services(i) and not i.nodeid.endswith(f"@{SERVICES_GROUP}")}

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if item.nodeid in self.ungrouped:
            pytest.fail(f"--dist loadgroup did not put this service test in the {SERVICES_GROUP!r} group, so it "
                        "could run beside another service test; this pytest-xdist cannot group under this "
                        "pytest (see the pin in pyproject.toml)", pytrace=False)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(GroupingGuard(), "d2k-grouping-guard")


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    """Each test starts with an empty Django cache.

    The leaderboard caches its menus, charts and pairs under a generation bumped when a publication
    commits; a test's rolled-back transaction never commits, so without this a test could be served
    what an earlier test (with other rows) computed.
    """
    from django.core.cache import cache

    cache.clear()
