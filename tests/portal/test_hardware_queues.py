"""Which hardware profiles a deployment accepts uploads for (``D2K_HARDWARE_PROFILES``), and the
queue each one's submissions go to."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from portal.hardware_queues import hardware_queues
from portal.submissions.actions import check_create_submission
from portal.submissions.validation import BundleInvalid
from tasks.registry import REPO_ROOT
from tests.portal.factories import expert_bundle, make_team


def test_profiles_map_to_their_worker_queues() -> None:
    assert hardware_queues("h200, h100,cpu-interpret,h100") == {
        "h200": "gpu.h200", "h100": "gpu.h100", "cpu-interpret": "cpu.interpret"}


@pytest.mark.parametrize("spec", ["", " , ", "h200,b300"])
def test_an_unknown_or_empty_profile_list_is_refused(spec: str) -> None:
    with pytest.raises(ImproperlyConfigured, match="known: cpu-interpret, h100, h200"):
        hardware_queues(spec)


def test_the_settings_declare_a_queue_for_every_profile() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings.test", "D2K_HARDWARE_PROFILES": "h100,cpu-interpret"}
    code = ("import django; django.setup(); from django.conf import settings as s; "
            "print(sorted(s.D2K_HARDWARE_QUEUES), sorted(q.name for q in s.CELERY_TASK_QUEUES))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['cpu-interpret', 'h100'] ['cpu.interpret', 'gpu.h100', 'judge', 'web']"


@pytest.mark.django_db
def test_uploads_go_to_the_profiles_queue_and_other_profiles_are_refused(catalogue, media, settings) -> None:
    settings.D2K_HARDWARE_QUEUES = hardware_queues("h200,h100,cpu-interpret")
    team, user = make_team("Alpha")
    sub, _ = check_create_submission(team=team, user=user, blob=expert_bundle(), filename="b.zip", hardware="h100")
    assert sub.hardware == "h100" and sub.attempts.get().queue == "gpu.h100"
    settings.D2K_HARDWARE_QUEUES = hardware_queues("h200,cpu-interpret")
    with pytest.raises(BundleInvalid, match="h100"):
        check_create_submission(team=team, user=user, blob=expert_bundle(notes="again"), filename="b.zip",
                                hardware="h100")


def test_a_timed_runs_options_fit_its_tasks_and_any_rerun_inside_the_celery_limit(settings) -> None:
    """Each task's limit is a share of Celery's soft limit, and the run's deadline (which a
    timing-integrity rerun must fit before) is that limit less the margin, from now."""
    import time

    from portal.submissions.evaluation import _options

    settings.CELERY_TASK_SOFT_TIME_LIMIT = 3720
    settings.D2K_TASK_TIMEOUT_S = 1800
    before = time.monotonic()
    opts = _options("h100", 4)
    assert opts.command == "bench" and opts.timeout_s == 900.0
    assert before + 3600 <= opts.deadline <= time.monotonic() + 3600
    assert _options("cpu-interpret", 4).command == "check"
