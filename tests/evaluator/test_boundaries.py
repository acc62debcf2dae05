"""The layer boundaries the layout depends on, checked on the source.

ARCHITECTURE.md: ``evaluator/`` and ``tasks/`` never import Django (the GPU nodes run the engine
without the site). The test runner depends on a second rule: the tests under ``tests/evaluator/``
and ``tests/tasks/`` use no shared service, because they run in parallel xdist workers while the
service tests run alone in one (``tests/conftest.py``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tasks.registry import REPO_ROOT
from tests.conftest import SERVICE_FREE

#: Top-level packages that belong to the site or talk to its services.
SITE_PACKAGES = {"django", "rest_framework", "celery", "kombu", "redis", "psycopg", "psycopg2", "playwright",
                 "portal", "leaderboard", "agents", "ops", "d2k_cli"}
#: pytest-django and portal fixtures that reach the database, a live server or a Celery worker.
SERVICE_FIXTURES = {"db", "transactional_db", "django_db_setup", "live_server", "client", "admin_client",
                    "settings", "portal_worker", "django_capture_on_commit_callbacks", "django_assert_num_queries"}


def imported_packages(path: Path) -> set[str]:
    """Top-level names a module imports, anywhere in it (function-level imports included)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def fixture_arguments(path: Path) -> set[str]:
    """Argument names of the test functions and fixtures of a module: the fixtures it asks for."""
    args: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args |= {a.arg for a in node.args.args + node.args.kwonlyargs}
    return args


def sources(*folders: str) -> list[Path]:
    return sorted(p for f in folders for p in (REPO_ROOT / f).rglob("*.py"))


def test_the_engine_and_the_tasks_import_nothing_of_the_site() -> None:
    bad = {str(p.relative_to(REPO_ROOT)): sorted(imported_packages(p) & SITE_PACKAGES)
           for p in sources("evaluator", "tasks", "references")}
    assert not {k: v for k, v in bad.items() if v}


def test_the_parallel_test_folders_use_no_shared_service() -> None:
    bad = {}
    for p in sources(*(f"tests/{folder}" for folder in SERVICE_FREE)):
        found = sorted((imported_packages(p) & SITE_PACKAGES) | (fixture_arguments(p) & SERVICE_FIXTURES))
        if found:
            bad[str(p.relative_to(REPO_ROOT))] = found
    assert not bad


@pytest.mark.parametrize(("source", "found"), [
    ("def f():\n    from django.conf import settings\n", {"django"}),
    ("import portal.celery as c\n", {"portal"}),
    ("from . import x\nimport torch\n", {"torch"}),
])
def test_imports_are_found_at_any_depth(tmp_path: Path, source: str, found: set[str]) -> None:
    path = tmp_path / "m.py"
    path.write_text(source)
    assert imported_packages(path) == found


def test_service_fixtures_are_found(tmp_path: Path) -> None:
    path = tmp_path / "test_x.py"
    path.write_text("def test_a(tmp_path, live_server):\n    pass\n")
    assert fixture_arguments(path) & SERVICE_FIXTURES == {"live_server"}
