"""The LLM judge on its own queue: a real Celery worker judges a published submission's kernel
against a local server speaking the Anthropic wire format; the score lands on the board and page."""

from __future__ import annotations

import json

import pytest

from agents.judge import build_rubric
from portal.scores.models import JudgeScore, SubmissionScore
from portal.scores.seed import SeedSpec, seed
from portal.scores.tasks import queue_judging
from tasks.registry import get_task
from tests.agents.fake_llm import FakeLLM, Reply
from tests.portal.helpers import sync

pytestmark = pytest.mark.django_db(transaction=True)


def _answer(slug: str, score: int) -> str:
    ids = [it.id for it in build_rubric(get_task(slug))]
    return json.dumps({"items": [{"id": i, "score": score, "evidence": "seen"} for i in ids], "summary": "ok"})


def test_published_submission_is_judged_by_a_worker_on_the_judge_queue(task_tree, settings, portal_worker,
                                                                       client) -> None:
    sync(task_tree("silu-and-mul"))
    (sub,) = seed(SeedSpec(submissions=1, teams=1, models=1, seed=5, tasks=("silu-and-mul",)))
    script = [Reply(text="not json"), Reply(text=_answer("silu-and-mul", 70))]
    with FakeLLM(script) as llm:
        env = {"D2K_JUDGE_PROVIDER": "anthropic", "D2K_JUDGE_MODEL": "judge-1", "D2K_JUDGE_BASE_URL": llm.url,
               "ANTHROPIC_API_KEY": "test-key", "D2K_TASKS_ROOT": str(settings.D2K_TASKS_ROOT)}
        settings.D2K_JUDGE_MODEL = "judge-1"
        worker = portal_worker(queues="judge", **env)
        assert queue_judging(sub) == 1
        worker.wait_for("a judge score", lambda: JudgeScore.objects.filter(submission_task__submission=sub).first(),
                        timeout_s=120)
    score = JudgeScore.objects.get()
    assert score.kind == "implementation" and score.score == 70 and score.attempts == 2
    assert score.judge_model == "judge-1" and len(score.raw_answers) == 2
    assert SubmissionScore.objects.filter(submission=sub).first().implementation_score == 70
    html = client.get(f"/submissions/{sub.pk}/").content.decode()
    assert "implementation 70/100" in html and "judge judge-1" in html
