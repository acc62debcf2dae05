"""Published scores follow the catalogue (SCORING.md: one rule for every row of a board): a
roofline formula fixed in a task re-expresses the stored SOL of published submissions, and a task
added to the suite changes their suite size and penalty, as it does for the reference rows."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from evaluator.result import RunResult
from portal.moderation.services import do_moderate
from portal.scores.models import SubmissionScore
from portal.submissions import actions
from portal.submissions.models import WorkloadResult
from tests.portal.factories import expert_bundle, make_team, make_user
from tests.portal.helpers import sync

REPO_ROOT = Path(__file__).resolve().parents[2]
H200 = REPO_ROOT / "docs" / "results" / "h200-bench.json"

pytestmark = pytest.mark.django_db


def _publish_measured(team, user) -> int:  # noqa: ANN001
    """An h200 submission whose results are the measured run in docs/results, approved."""
    blob = expert_bundle(("silu-and-mul", "fused-add-rmsnorm"))
    sub, _ = actions.check_create_submission(team=team, user=user, blob=blob, filename="b.zip", hardware="h200")
    claim = actions.do_start_evaluation(sub.pk, 1, worker="gpu-node")
    attempt = sub.attempts.get()
    run = RunResult.model_validate_json(H200.read_text())
    run.tasks = [t for t in run.tasks if t.slug in {st.task.slug for st in sub.tasks.all()}]
    for task in run.tasks:
        assert actions.do_record_task_result(attempt.pk, claim, task)
    assert actions.do_finish_evaluation(attempt.pk, claim, run) == "evaluated"
    sub.refresh_from_db()
    do_moderate(sub, moderator=make_user("mod", moderator=True), decision="approve")
    return sub.pk


def test_a_fixed_formula_and_a_new_task_reach_published_scores(catalogue, media, task_tree):
    team, user = make_team("Alpha")
    pk = _publish_measured(team, user)
    before = SubmissionScore.objects.get(submission_id=pk, scope="all")
    silu_w = WorkloadResult.objects.filter(task_result__attempt__submission_id=pk, task_result__task__slug="silu-and-mul",
                                           smoke=False).order_by("position").first()
    old_fraction = silu_w.sol_fraction
    assert old_fraction and before.suite_size == 2

    toml = catalogue / "tasks" / "silu-and-mul" / "task.toml"
    toml.write_text(toml.read_text().replace('bytes = "nbytes_x + nbytes_out"', 'bytes = "(nbytes_x + nbytes_out)/2"'))
    out = sync(catalogue)
    assert "rescored 1 published submission(s)" in out
    silu_w.refresh_from_db()
    assert silu_w.sol_fraction == pytest.approx(old_fraction / 2, rel=1e-6)  # half the bytes: half the SOL time
    assert json.loads(json.dumps(silu_w.data))["bytes"] > 0
    after = SubmissionScore.objects.get(submission_id=pk, scope="all")
    assert after.mean_sol_fraction < before.mean_sol_fraction
    assert after.performance_score == pytest.approx(before.performance_score)  # times untouched, no clamp met

    task_tree("merge-attn-states")  # a third task joins the suite
    sync(catalogue)
    grown = SubmissionScore.objects.get(submission_id=pk, scope="all")
    assert grown.suite_size == 3 and grown.performance_score < before.performance_score  # the penalty for it

    again = StringIO()
    call_command("rescore", stdout=again)
    assert "1 published submission(s) rescored; 0 workload SOL(s) changed" in again.getvalue()
