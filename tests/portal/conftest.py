"""Fixtures for the submission side: a catalogue of two fast tasks, private media storage."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.portal.factories import FAST_TASKS
from tests.portal.helpers import sync


@pytest.fixture
def media(settings, tmp_path: Path) -> Path:
    """Uploads go to a private folder, so tests can assert that nothing was left behind."""
    root = tmp_path / "media"
    settings.MEDIA_ROOT = str(root)
    return root


@pytest.fixture
def catalogue(settings, task_tree: Callable[..., Path]) -> Path:
    """A task tree of the two fast tasks, synced into the database; the settings point at it.

    A private tree keeps these tests independent of tasks being added to the repository.
    """
    root = None
    for slug in FAST_TASKS:
        root = task_tree(slug)
    assert root is not None
    sync(root)
    settings.D2K_TASKS_ROOT = root
    return root


@pytest.fixture
def portal_worker(tmp_path: Path):
    """``portal_worker(queues="cpu.interpret,web", **env)`` starts a worker; all are stopped after the test."""
    from tests.portal.worker import PortalWorker

    workers: list[PortalWorker] = []

    def start(queues: str = "cpu.interpret,web", **env: str) -> PortalWorker:
        worker = PortalWorker(tmp_path / f"worker-{len(workers)}.log", queues, **env)
        workers.append(worker)
        return worker.start()

    yield start
    for worker in workers:
        worker.stop()
