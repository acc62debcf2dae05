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


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    """Each test starts with an empty Django cache.

    The leaderboard caches its menus, charts and pairs under a generation bumped when a publication
    commits; a test's rolled-back transaction never commits, so without this a test could be served
    what an earlier test (with other rows) computed.
    """
    from django.core.cache import cache

    cache.clear()
