"""Running the LLM judge on published submissions and storing what it says.

The judge itself (rubric, prompt, strict answers, retries) is :mod:`agents.judge`; this module
picks what to judge (a kernel: its implementation; a design document: its design), calls the
judge with the provider configured in settings (``D2K_JUDGE_*``), stores a :class:`JudgeScore`
per task and kind (idempotent: judging again under the same model and prompt version replaces
nothing), and folds the mean into the submission's leaderboard rows.
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from agents.judge import PROMPT_VERSION, judge
from agents.providers import ProviderConfig, make_provider
from portal.scores.models import JudgeScore, SubmissionScore
from portal.scores.services import judge_means, new_board_generation
from portal.submissions.models import Submission, SubmissionTask
from tasks.registry import get_task


def judge_configured() -> bool:
    return bool(settings.D2K_JUDGE_MODEL)


def provider_config() -> ProviderConfig:
    return ProviderConfig(provider=settings.D2K_JUDGE_PROVIDER, model=settings.D2K_JUDGE_MODEL,
                          base_url=settings.D2K_JUDGE_BASE_URL or None, api_key_env=settings.D2K_JUDGE_API_KEY_ENV,
                          timeout_s=settings.D2K_JUDGE_TIMEOUT_S, max_retries=settings.D2K_JUDGE_MAX_RETRIES,
                          max_tokens=4096)


def kinds_for(st: SubmissionTask) -> list[tuple[str, str]]:
    """(kind, text) pairs to judge for one task: the design document, the kernel, or both."""
    out = []
    if st.design_source:
        out.append(("design", st.design_source))
    if st.kernel_source:
        out.append(("implementation", st.kernel_source))
    return out


def judge_submission_task(submission_task_id: int) -> list[JudgeScore]:
    """Judge one task of a submission (every kind it has); returns the stored scores."""
    st = SubmissionTask.objects.select_related("task", "submission").get(pk=submission_task_id)
    config = provider_config()
    stored = []
    for kind, text in kinds_for(st):
        existing = JudgeScore.objects.filter(submission_task=st, kind=kind, judge_model=config.model,
                                             prompt_version=PROMPT_VERSION).first()
        if existing is not None:  # a redelivered task: the judgement exists, nothing is paid twice
            stored.append(existing)
            continue
        result = judge(make_provider(config), get_task(st.task.slug, root=settings.D2K_TASKS_ROOT), text, kind)
        stored.append(JudgeScore.objects.create(
            submission_task=st, kind=kind, score=result.score, levels=result.levels, items=result.items,
            judge_model=result.judge_model, prompt_version=result.prompt_version, raw_answers=result.raw_answers,
            attempts=result.attempts))
    fold_into_board(st.submission)
    return stored


@transaction.atomic
def fold_into_board(submission: Submission) -> None:
    """Mean judge scores over the submission's judged tasks, onto its leaderboard rows."""
    SubmissionScore.objects.filter(submission=submission).update(**judge_means(submission))
    transaction.on_commit(new_board_generation)
