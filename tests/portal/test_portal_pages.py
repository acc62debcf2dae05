"""Server-rendered submission, team, token, moderation and status pages: permissions, escaping,
refusals shown with file and rule, and the login rate limit."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from portal.submissions import actions
from portal.submissions.models import Submission
from portal.teams.models import ApiToken
from tests.portal.factories import expert_bundle, expert_source, make_team, make_user, make_zip, manifest_text
from tests.portal.test_state_machine import engine_result, finish_correct

pytestmark = pytest.mark.django_db

XSS = "<script>alert(1)</script>"


@pytest.fixture
def alpha(catalogue, media):
    return make_team("Alpha")


def client_as(user=None) -> Client:  # noqa: ANN001
    client = Client(HTTP_HOST="localhost")
    if user is not None:
        client.force_login(user)
    return client


def post_bundle(client: Client, team, blob: bytes, name: str = "b.zip", **fields):  # noqa: ANN001, ANN201
    return client.post("/submit/", {"team": team.pk, "upload": SimpleUploadedFile(name, blob),
                                    "hardware": "cpu-interpret", "guidance": "none", "budget": 350, **fields})


def evaluated(sub: Submission) -> Submission:
    claim = actions.do_start_evaluation(sub.pk, 1, worker="w")
    attempt = sub.attempts.get()
    actions.do_record_task_result(attempt.pk, claim, engine_result())
    finish_correct(attempt.pk, claim)
    return Submission.objects.get(pk=sub.pk)


def test_submit_form_queues_a_bundle_and_shows_refusals(alpha):
    team, user = alpha
    client = client_as(user)
    assert client_as().get("/submit/").status_code == 302  # sign-in first
    response = post_bundle(client, team, expert_bundle())
    sub = Submission.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/submissions/{sub.pk}/"
    bad = make_zip({"submission.toml": manifest_text(["silu-and-mul"]), "silu-and-mul/kernel.py": "import os\n"})
    refused = post_bundle(client, team, bad)
    html = refused.content.decode()
    assert refused.status_code == 400 and "<code>silu-and-mul/kernel.py</code>" in html and "triton-kernel" in html
    assert Submission.objects.count() == 1


def test_single_kernel_upload(alpha):
    team, user = alpha
    response = post_bundle(client_as(user), team, expert_source("silu-and-mul").encode(), "kernel.py",
                           task="silu-and-mul", model="m", provider="p", harness="manual")
    assert response.status_code == 302
    sub = Submission.objects.get()
    assert sub.model.name == "m" and sub.tasks.get().task.slug == "silu-and-mul"


def test_detail_is_private_until_published_and_escapes_everything(alpha):
    team, user = alpha
    notes_blob = expert_bundle(model=XSS, notes=XSS)
    sub, _ = actions.check_create_submission(team=team, user=user, blob=notes_blob, filename="b.zip")
    other_team, other = make_team("Beta")
    assert client_as().get(f"/submissions/{sub.pk}/").status_code == 404
    assert client_as(other).get(f"/submissions/{sub.pk}/").status_code == 404
    assert client_as(other).post(f"/submissions/{sub.pk}/cancel/").status_code == 404
    own = client_as(user).get(f"/submissions/{sub.pk}/").content.decode()
    assert XSS not in own and "&lt;script&gt;" in own and 'id="live"' in own
    sub = evaluated(sub)
    from portal.moderation.services import do_moderate

    do_moderate(sub, moderator=make_user("mod", moderator=True), decision="approve")
    public = client_as().get(f"/submissions/{sub.pk}/").content.decode()
    assert "published" in public and 'id="result-silu-and-mul"' in public and "Engine log" not in public
    kernel = client_as().get(f"/submissions/{sub.pk}/kernel/silu-and-mul/").content.decode()
    assert '<div class="hl">' in kernel and "triton" in kernel
    runs = client_as().get("/runs/").content.decode()
    assert f'id="submission-{sub.pk}"' in runs


def test_transcript_viewer_escapes_and_folds(alpha):
    team, user = alpha
    lines = [{"kind": "header", "provider": "p", "model": "m", "guidance": "none", "budget": 350,
              "task": "silu-and-mul"},
             {"kind": "event", "turn": 1, "role": "assistant", "content": XSS,
              "tool_calls": [{"id": "c1", "name": "check", "arguments": "{\"smoke\": true}"}]},
             {"kind": "event", "turn": 1, "role": "tool", "tool_call_id": "c1", "content": "all correct"},
             {"kind": "event", "turn": 2, "role": "assistant", "content": "peek",
              "tool_calls": [{"id": "c2", "name": "read_file", "arguments": "{\"path\": \"../references/x/expert.py\"}"},
                             {"id": "c3", "name": "write_kernel",
                              "arguments": json.dumps({"source": "import SubProcess\nX = torch._C._len_torch_dispatch_stack"})}]},
             {"kind": "footer", "stop_reason": "done", "turns_used": 2}]
    blob = make_zip({"submission.toml": manifest_text(["silu-and-mul"]),
                     "silu-and-mul/kernel.py": expert_source("silu-and-mul"),
                     "silu-and-mul/transcript.jsonl": "\n".join(json.dumps(x) for x in lines)})
    sub, _ = actions.check_create_submission(team=team, user=user, blob=blob, filename="b.zip")
    html = client_as(user).get(f"/submissions/{sub.pk}/transcript/silu-and-mul/").content.decode()
    assert XSS not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert 'id="turn-1"' in html and "<code>check</code>" in html and "<details>" in html
    review = client_as(make_user("mod", moderator=True)).get(f"/moderation/{evaluated(sub).pk}/").content.decode()
    assert "turn 2: tool call read_file mentions &#x27;references/&#x27;" in review
    assert "turn 2: tool call write_kernel mentions &#x27;subprocess&#x27; (another process)" in review  # any case
    assert "turn 2: tool call write_kernel mentions &#x27;dispatch_stack&#x27; (the op recorder)" in review
    # The header names another model and provider than the manifest: flagged for the moderator.
    assert "the transcript&#x27;s header says model &#x27;m&#x27;; the manifest says &#x27;test-model&#x27;" in review
    assert "header says provider &#x27;p&#x27;" in review and "header says harness" in review
    # Search: a tool call's arguments, any case; only the matching turns, their messages open; the
    # query is escaped back into the page.
    found = client_as(user).get(f"/submissions/{sub.pk}/transcript/silu-and-mul/?q=EXPERT.py").content.decode()
    assert 'id="turn-2"' in found and 'id="turn-1"' not in found and "1 of 2 turns mention" in found
    assert '<div class="event role-assistant match">' in found and "<details open>" in found
    none = client_as(user).get(f"/submissions/{sub.pk}/transcript/silu-and-mul/?q=%3Cb%3Ezzz").content.decode()
    assert "No turn mentions “&lt;b&gt;zzz”." in none and "<b>zzz" not in none
    assert "0 of 2 turns" in none


def test_token_page_shows_the_secret_once_and_revokes(alpha):
    team, user = alpha
    client = client_as(user)
    html = client.post(f"/teams/{team.slug}/tokens/", {"name": "harness", "days": 30}).content.decode()
    token = ApiToken.objects.get()
    assert 'id="new-token"' in html and token.prefix in html
    listing = client.get(f"/teams/{team.slug}/tokens/").content.decode()
    assert 'id="new-token"' not in listing and "active" in listing
    client.post(f"/teams/{team.slug}/tokens/{token.pk}/revoke/")
    token.refresh_from_db()
    assert token.revoked_at is not None
    outsider = make_user("outsider")
    assert client_as(outsider).get(f"/teams/{team.slug}/tokens/").status_code == 404


def test_moderation_pages_need_the_permission(alpha):
    team, user = alpha
    sub, _ = actions.check_create_submission(team=team, user=user, blob=expert_bundle(), filename="b.zip")
    sub = evaluated(sub)
    assert client_as(user).get("/moderation/").status_code == 403
    assert client_as(user).post(f"/moderation/{sub.pk}/approve/").status_code == 403
    mod = client_as(make_user("mod", moderator=True))
    assert f'id="queue-{sub.pk}"' in mod.get("/moderation/").content.decode()
    review = mod.get(f"/moderation/{sub.pk}/").content.decode()
    assert 'id="evidence-silu-and-mul"' in review and "Anti-cheat findings" in review and "fingerprint" in review
    mod.post(f"/moderation/{sub.pk}/reject/", {"reason": "uses a side stream"})
    sub.refresh_from_db()
    assert sub.status == "rejected"
    team_view = client_as(user).get(f"/submissions/{sub.pk}/").content.decode()
    assert "uses a side stream" in team_view


def test_status_page_counts_queues(alpha):
    team, user = alpha
    actions.check_create_submission(team=team, user=user, blob=expert_bundle(), filename="b.zip")
    html = client_as().get("/status/").content.decode()
    row = html[html.index('id="profile-cpu-interpret"'):]
    row = row[:row.index("</tr>")]
    assert '<td class="num">1</td>' in row


def test_login_is_rate_limited(catalogue, settings):
    from django.core.cache import cache

    cache.clear()
    settings.D2K_LOGIN_RATE_PER_MIN = 3
    make_user("someone")
    client = Client(HTTP_HOST="localhost")
    for _ in range(3):
        assert client.post("/accounts/login/", {"username": "someone", "password": "wrong"}).status_code == 200
    blocked = client.post("/accounts/login/", {"username": "someone", "password": "pw-for-tests-only"})
    assert blocked.status_code == 429 and blocked["Retry-After"] == "60"


def test_bundle_format_page(catalogue):
    html = Client(HTTP_HOST="localhost").get("/docs/bundle-format/").content.decode()
    assert "<h1>Submission bundles" in html and "<table>" in html


def test_review_shows_the_diff_against_the_previous_published_kernel(alpha):
    from portal.moderation.services import do_moderate

    team, user = alpha
    mod = make_user("mod", moderator=True)
    first, _ = actions.check_create_submission(team=team, user=user, blob=expert_bundle(), filename="a.zip")
    do_moderate(evaluated(first), moderator=mod, decision="approve")
    changed = expert_source("silu-and-mul").replace("one fused pass", "ONE FUSED PASS")
    blob = make_zip({"submission.toml": manifest_text(["silu-and-mul"], guidance="L1"),
                     "silu-and-mul/kernel.py": changed})
    second, _ = actions.check_create_submission(team=team, user=user, blob=blob, filename="b.zip")
    evaluated(second)
    html = client_as(mod).get(f"/moderation/{second.pk}/").content.decode()
    assert "Diff against the team" in html and "ONE FUSED PASS" in html and f"#{first.pk}/silu-and-mul/kernel.py" in html


def test_results_show_the_expert_timed_in_the_same_run(alpha):
    """Every GPU bench times the task's expert beside the submission: the page shows its time and
    the ratio, the comparison the benchmark exists for (here the kernel is 1.25x the expert)."""
    from evaluator.result import Timing, TrialResult
    from evaluator.result import WorkloadResult as EngineWorkload

    team, user = alpha
    sub, _ = actions.check_create_submission(team=team, user=user, blob=expert_bundle(), filename="b.zip")
    claim = actions.do_start_evaluation(sub.pk, 1, worker="w")
    attempt = sub.attempts.get()

    def timing(ms: float) -> Timing:
        return Timing(median_ms=ms, q1_ms=ms, q3_ms=ms, mean_ms=ms, min_ms=ms, count=20, rel_stderr=0.004,
                      host_over_device=1.0, compile_s=0.1, checked_calls=2)

    result = engine_result()
    result.workloads = [EngineWorkload(name="W1", smoke=False, params={"T": 1}, flops=1.0, bytes=1.0, correct=True,
                                       trials=[TrialResult(trial=0, seed=1, passed=True)],
                                       timings={"baseline": timing(1.0), "candidate": timing(0.4),
                                                "expert": timing(0.5)},
                                       speedup={"candidate": 2.5, "expert": 2.0})]
    assert actions.do_record_task_result(attempt.pk, claim, result)
    html = client_as(user).get(f"/submissions/{sub.pk}/").content.decode()
    assert "Expert ms" in html and ">0.5000<" in html and ">1.25×<" in html
    assert "scored at" not in html


def test_a_workload_faster_than_light_shows_the_speedup_the_score_counts(alpha):
    """Measured 2.5x at 2x the speed of light: the score counts it at the SOL bound, 1.25x, and the
    results table says so beside the measurement."""
    from evaluator.result import TrialResult
    from evaluator.result import WorkloadResult as EngineWorkload

    team, user = alpha
    sub, _ = actions.check_create_submission(team=team, user=user, blob=expert_bundle(), filename="b.zip")
    claim = actions.do_start_evaluation(sub.pk, 1, worker="w")
    result = engine_result()
    result.workloads = [EngineWorkload(name="W1", smoke=False, params={"T": 1}, flops=1.0, bytes=1.0, correct=True,
                                       trials=[TrialResult(trial=0, seed=1, passed=True)],
                                       speedup={"candidate": 2.5}, sol_fraction={"candidate": 2.0})]
    assert actions.do_record_task_result(sub.attempts.get().pk, claim, result)
    html = client_as(user).get(f"/submissions/{sub.pk}/").content.decode()
    assert "2.50×" in html and "scored at 1.25×" in html
