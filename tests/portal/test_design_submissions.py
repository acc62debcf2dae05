"""Design-only submissions: refused while no judge is configured; otherwise judged on the ``judge``
queue by a real worker whose LLM judge talks to a local server speaking the Anthropic wire format."""

from __future__ import annotations

import json

import pytest

from agents.judge import PROMPT_VERSION, build_rubric
from evaluator.bundle_problems import BundleInvalid
from portal.scores.models import JudgeScore
from portal.submissions.actions import check_create_submission
from portal.submissions.models import EvaluationAttempt, Submission
from tasks.registry import get_task
from tests.agents.fake_llm import FakeLLM, Reply
from tests.portal.factories import make_team, make_zip, manifest_text

DESIGN = "# Design\n\nOne pass over gate and up; <b>fused</b> SiLU and product in registers.\n"


def design_bundle() -> bytes:
    return make_zip({"submission.toml": manifest_text(["silu-and-mul"], mode="design"),
                     "silu-and-mul/design.md": DESIGN})


@pytest.mark.django_db
def test_design_uploads_are_refused_without_a_judge(catalogue, media, settings):
    settings.D2K_JUDGE_MODEL = ""
    team, user = make_team("Alpha")
    with pytest.raises(BundleInvalid) as info:
        check_create_submission(team=team, user=user, blob=design_bundle(), filename="d.zip")
    assert [(p.file, p.rule) for p in info.value.problems] == [("submission.toml", "design-mode")]
    missing = make_zip({"submission.toml": manifest_text(["silu-and-mul"], mode="design")})
    settings.D2K_JUDGE_PROVIDER, settings.D2K_JUDGE_MODEL = "anthropic", "judge-1"
    with pytest.raises(BundleInvalid) as info:
        check_create_submission(team=team, user=user, blob=missing, filename="d.zip")
    assert [(p.file, p.rule) for p in info.value.problems] == [("silu-and-mul/design.md", "missing-file")]


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_a_design_is_judged_by_the_worker(transactional_db, catalogue, media, settings, portal_worker):
    ids = [item.id for item in build_rubric(get_task("silu-and-mul", catalogue))]
    answer = json.dumps({"items": [{"id": i, "score": 70, "evidence": "stated"} for i in ids],
                         "summary": "a fused design"})
    with FakeLLM([Reply(text="not json"), Reply(text=answer)]) as llm:
        settings.D2K_JUDGE_PROVIDER, settings.D2K_JUDGE_MODEL, settings.D2K_JUDGE_BASE_URL = "anthropic", "judge-1", llm.url
        worker = portal_worker("judge,web", D2K_JUDGE_PROVIDER="anthropic", D2K_JUDGE_MODEL="judge-1",
                               D2K_JUDGE_BASE_URL=llm.url, ANTHROPIC_API_KEY="test-key")
        team, user = make_team("Alpha")
        sub, _ = check_create_submission(team=team, user=user, blob=design_bundle(), filename="d.zip")
        assert sub.current_attempt.queue == "judge" and sub.tasks.get().design_source == DESIGN
        worker.wait_for("the judgement", lambda: Submission.objects.get(pk=sub.pk).status == "evaluated", 120)
    score = JudgeScore.objects.get(submission_task__submission=sub)
    assert score.kind == "design" and score.judge_model == "judge-1" and score.prompt_version == PROMPT_VERSION
    assert score.attempts == 2 and len(score.raw_answers) == 2 and set(score.levels) == {"L1", "L2", "L3"}
    assert score.score == 70
    assert EvaluationAttempt.objects.get(submission=sub).mode == "judge"
    from django.test import Client

    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    page = client.get(f"/submissions/{sub.pk}/").content.decode()
    assert "design 70/100" in page and "judge-1" in page
    design = client.get(f"/submissions/{sub.pk}/design/silu-and-mul/").content.decode()
    assert "&lt;b&gt;fused&lt;/b&gt;" in design and "<b>fused</b>" not in design


@pytest.mark.django_db
def test_a_judged_design_can_be_published(catalogue, media, settings):
    """The whole path without a worker: judged, evaluated, approved, public (with its scores)."""
    from agents.judge import JudgeResult
    from portal.moderation.services import do_moderate
    from portal.submissions import actions
    from tests.portal.factories import make_user

    settings.D2K_JUDGE_PROVIDER, settings.D2K_JUDGE_MODEL = "anthropic", "judge-1"
    team, user = make_team("Alpha")
    sub, _ = check_create_submission(team=team, user=user, blob=design_bundle(), filename="d.zip")
    claim = actions.do_start_evaluation(sub.pk, 1, worker="w")
    attempt = EvaluationAttempt.objects.get(submission=sub)
    result = JudgeResult(kind="design", score=55.0, levels={"L1": 60.0, "L2": 50.0, "L3": 55.0}, items=[],
                         judge_model="judge-1")
    assert actions.do_record_judge_score(attempt.pk, claim, "silu-and-mul", result)
    assert actions.do_record_judge_score(attempt.pk, claim, "silu-and-mul", result)  # redelivered: no new row
    assert actions.do_finish_judging(attempt.pk, claim) == "evaluated"
    do_moderate(sub, moderator=make_user("mod", moderator=True), decision="approve")
    sub.refresh_from_db()
    assert sub.status == "published" and JudgeScore.objects.filter(submission_task__submission=sub).count() == 1
    from rest_framework.test import APIClient

    scores = APIClient(HTTP_HOST="localhost").get(f"/api/v1/submissions/{sub.pk}/judge/").json()
    assert [(s["slug"], s["kind"], s["score"]) for s in scores] == [("silu-and-mul", "design", 55.0)]


@pytest.mark.django_db
def test_the_design_board_ranks_by_the_judge_and_shows_no_timings(catalogue, media, settings):
    """Design-only rows carry their judge score from publication on (they are judged before), are
    sorted by it with unjudged rows last, and the board shows no timing columns or reference rows
    for them (a design is never run, so a Performance Score would be the failure penalty)."""
    from django.test import Client

    from agents.judge import JudgeResult
    from portal.moderation.services import do_moderate
    from portal.scores.models import SubmissionScore
    from portal.submissions import actions
    from tests.portal.factories import make_user

    settings.D2K_JUDGE_PROVIDER, settings.D2K_JUDGE_MODEL = "anthropic", "judge-1"
    mod = make_user("mod", moderator=True)
    published = {}
    for name, score in (("Low", 40.0), ("High", 85.0), ("Unjudged", None)):
        team, user = make_team(name)
        sub, _ = check_create_submission(team=team, user=user, blob=design_bundle(), filename="d.zip")
        claim = actions.do_start_evaluation(sub.pk, 1, worker="w")
        attempt = EvaluationAttempt.objects.get(submission=sub)
        if score is not None:
            assert actions.do_record_judge_score(attempt.pk, claim, "silu-and-mul", JudgeResult(
                kind="design", score=score, levels={"L1": score}, items=[], judge_model="judge-1"))
        actions.do_finish_judging(attempt.pk, claim)
        do_moderate(sub, moderator=mod, decision="approve")
        published[name] = sub.pk
    rows = SubmissionScore.objects.filter(scope="all", mode="design")
    assert {r.submission_id: r.design_score for r in rows} == {published["Low"]: 40.0, published["High"]: 85.0,
                                                               published["Unjudged"]: None}
    hardware = rows.first().hardware
    page = Client(HTTP_HOST="localhost").get(f"/leaderboard/?hardware={hardware}&mode=design").content.decode()
    table = page[page.index('id="leaderboard"'):page.index("</table>", page.index('id="leaderboard"'))]
    order = [published[n] for n in ("High", "Low", "Unjudged")]
    assert [table.index(f'id="row-{pk}"') for pk in order] == sorted(table.index(f'id="row-{pk}"') for pk in order)
    assert "85.0" in table and "not judged yet" in table
    assert "Performance Score" not in table and 'class="reference"' not in table and "0.100" not in table


@pytest.mark.django_db
def test_the_board_counts_each_task_once_by_the_configured_judge(catalogue, media, settings):
    """A task judged by two models (the judge model changed between evaluation and publication)
    counts once on the board, with the configured model's score; without a configured judge, the
    newest judgement counts."""
    from portal.scores.services import judge_means

    settings.D2K_JUDGE_PROVIDER, settings.D2K_JUDGE_MODEL = "anthropic", "judge-2"
    team, user = make_team("Two")
    sub, _ = check_create_submission(team=team, user=user, blob=design_bundle(), filename="d.zip")
    st = sub.tasks.get()
    for model, score in (("judge-1", 20.0), ("judge-2", 90.0)):
        JudgeScore.objects.create(submission_task=st, kind="design", score=score, levels={"L1": score}, items=[],
                                  judge_model=model, prompt_version=PROMPT_VERSION, raw_answers=[], attempts=1)
    JudgeScore.objects.create(submission_task=st, kind="design", score=5.0, levels={}, items=[],
                              judge_model="judge-2", prompt_version="judge-v0", raw_answers=[], attempts=1)
    assert judge_means(sub) == {"design_score": 90.0, "implementation_score": None}
    settings.D2K_JUDGE_MODEL = ""
    assert judge_means(sub)["design_score"] == 90.0  # the newest, not the mean of 20 and 90
    settings.D2K_JUDGE_MODEL = "judge-3"  # configured, but not yet run on this task
    assert judge_means(sub)["design_score"] is None


@pytest.mark.django_db
def test_a_design_rerun_keeps_the_earlier_judgement_and_the_board_follows_publication(catalogue, media, settings):
    """PORTAL.md: a re-run never overwrites the old result. A design-only submission's result is its
    judgement: the re-run's is stored beside it, and the board shows the published attempt's."""
    from agents.judge import JudgeResult
    from portal.moderation.services import do_moderate
    from portal.scores.models import SubmissionScore
    from portal.submissions import actions
    from tests.portal.factories import make_user

    settings.D2K_JUDGE_PROVIDER, settings.D2K_JUDGE_MODEL = "anthropic", "judge-1"
    mod = make_user("mod", moderator=True)
    team, user = make_team("Rerun")
    sub, _ = check_create_submission(team=team, user=user, blob=design_bundle(), filename="d.zip")

    def evaluate(number: int, score: float) -> EvaluationAttempt:
        claim = actions.do_start_evaluation(sub.pk, number, worker="w")
        attempt = EvaluationAttempt.objects.get(submission=sub, number=number)
        assert actions.do_record_judge_score(attempt.pk, claim, "silu-and-mul", JudgeResult(
            kind="design", score=score, levels={"L1": score}, items=[], judge_model="judge-1"))
        actions.do_finish_judging(attempt.pk, claim)
        return attempt

    first = evaluate(1, 40.0)
    do_moderate(Submission.objects.get(pk=sub.pk), moderator=mod, decision="approve")
    board = SubmissionScore.objects.get(submission=sub, scope="all")
    assert board.design_score == 40.0
    actions.do_rerun(Submission.objects.get(pk=sub.pk), user=mod, reason="judge again", by_moderator=True)
    second = evaluate(2, 75.0)
    stored = {s.attempt_id: s.score for s in JudgeScore.objects.filter(submission_task__submission=sub)}
    assert stored == {first.pk: 40.0, second.pk: 75.0}  # both kept
    board.refresh_from_db()
    assert board.design_score == 40.0  # the published attempt's, while the re-run waits for moderation
    from django.test import Client
    from rest_framework.test import APIClient

    public = APIClient(HTTP_HOST="localhost").get(f"/api/v1/submissions/{sub.pk}/judge/").json()
    assert [j["score"] for j in public] == [40.0]  # the re-run's judgement is not published yet
    page = Client(HTTP_HOST="localhost").get(f"/submissions/{sub.pk}/").content.decode()
    assert "design 40/100" in page and "75/100" not in page
    member = Client(HTTP_HOST="localhost")
    member.force_login(user)
    assert "design 75/100" in member.get(f"/submissions/{sub.pk}/").content.decode()
    do_moderate(Submission.objects.get(pk=sub.pk), moderator=mod, decision="approve")
    assert SubmissionScore.objects.get(submission=sub, scope="all").design_score == 75.0
