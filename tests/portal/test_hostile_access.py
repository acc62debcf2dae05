"""Team A uses team B's ids on every endpoint that takes one (portal/urls.py and the API router):
the answer is what a nonexistent id gets, a 404 (PORTAL.md: a team cannot read, cancel or re-run
another team's submission; docs/api.md: "not_found" for an object the caller may not see), and
nothing changes. Role-gated endpoints (moderation) answer 403 for any id, existing or not, so they
reveal nothing either. Team B, the owner, gets through with the same ids: the ids are live."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from rest_framework.test import APIClient

from portal.submissions import actions
from portal.submissions.models import Submission
from portal.teams.services import token_create
from tests.portal import hostile as h
from tests.portal.factories import expert_bundle, make_team, make_user

pytestmark = pytest.mark.django_db

NOWHERE = 987_654


@pytest.fixture
def w(catalogue, media, settings):
    """Team B's objects in every state an endpoint cares about; team A's member and token."""
    settings.D2K_JUDGE_MODEL = "judge-for-tests"  # so that B can have a design-only submission
    a_team, alice = make_team("Alpha", owner=make_user("alice"))
    b_team, bob = make_team("Beta", owner=make_user("bob"), concurrent_quota=20)

    def submit(guidance: str, **extra: object) -> Submission:
        files = {**h.base_files(**{"silu-and-mul/transcript.jsonl": _transcript(guidance)}),
                 "submission.toml": h.manifest(guidance=guidance, **extra)}
        if extra.get("mode") == "design":
            files = {"submission.toml": files["submission.toml"], "silu-and-mul/design.md": "# design\n"}
        return actions.check_create_submission(team=b_team, user=bob, blob=h.zip_with(files), filename="b.zip")[0]

    queued, cancelled, evaluated, published = submit("none"), submit("L1"), submit("L1+L2"), submit("L1+L2+L3")
    design = submit("none", mode="design", harness="design-harness")
    actions.do_cancel(cancelled, user=bob)
    h.finish_evaluation(evaluated)
    from portal.moderation.services import do_moderate

    do_moderate(h.finish_evaluation(published), moderator=make_user("mod", moderator=True), decision="approve")
    ids = {"queued": queued.pk, "cancelled": cancelled.pk, "evaluated": evaluated.pk, "published": published.pk,
           "design": design.pk, "b_token": token_create(b_team, name="b-ci", actor=bob).token.pk,
           "b_team": b_team.pk, "b_slug": b_team.slug, "a_slug": a_team.slug}
    return {"media": media, "alice": alice, "bob": bob, "a_team": a_team, "b_team": b_team, "ids": ids,
            "a_token": token_create(a_team, name="a-ci", actor=alice).secret,
            "b_token_secret": token_create(b_team, name="b-ci2", actor=bob).secret}


def _transcript(guidance: str) -> str:
    import json

    lines = [{"kind": "header", "provider": "p", "model": "m", "guidance": guidance, "budget": 350,
              "task": "silu-and-mul"}, {"kind": "event", "turn": 1, "role": "assistant", "content": "x"},
             {"kind": "footer", "stop_reason": "done", "turns_used": 1}]
    return "".join(json.dumps(line) + "\n" for line in lines)


# name: (door, method, url with {ids}, data, A's status, B's status with the same ids)
# door: "page" = a signed-in browser, "api" = a Bearer token, "session" = the API with a session
ENDPOINTS = {
    "detail": ("page", "get", "/submissions/{queued}/", {}, 404, 200),
    "live": ("page", "get", "/submissions/{queued}/live/", {}, 404, 200),
    "kernel": ("page", "get", "/submissions/{queued}/kernel/silu-and-mul/", {}, 404, 200),
    "transcript": ("page", "get", "/submissions/{queued}/transcript/silu-and-mul/", {}, 404, 200),
    "design": ("page", "get", "/submissions/{design}/design/silu-and-mul/", {}, 404, 200),
    "cancel": ("page", "post", "/submissions/{queued}/cancel/", {}, 404, 302),
    "rerun": ("page", "post", "/submissions/{cancelled}/rerun/", {"reason": "mine now"}, 404, 302),
    "cancel-published": ("page", "post", "/submissions/{published}/cancel/", {}, 404, 302),
    "rerun-published": ("page", "post", "/submissions/{published}/rerun/", {}, 404, 302),
    "team": ("page", "get", "/teams/{b_slug}/", {}, 404, 200),
    "tokens": ("page", "get", "/teams/{b_slug}/tokens/", {}, 404, 200),
    "token-create": ("page", "post", "/teams/{b_slug}/tokens/", {"name": "planted", "days": 5}, 404, 200),
    "token-revoke": ("page", "post", "/teams/{b_slug}/tokens/{b_token}/revoke/", {}, 404, 302),
    "token-revoke-via-own-team": ("page", "post", "/teams/{a_slug}/tokens/{b_token}/revoke/", {}, 404, None),
    "moderation-review": ("page", "get", "/moderation/{evaluated}/", {}, 403, 403),
    "moderation-decide": ("page", "post", "/moderation/{evaluated}/approve/", {}, 403, 403),
    "api-detail": ("api", "get", "/api/v1/submissions/{queued}/", {}, 404, 200),
    "api-results": ("api", "get", "/api/v1/submissions/{evaluated}/results/", {}, 404, 200),
    "api-judge": ("api", "get", "/api/v1/submissions/{design}/judge/", {}, 404, 200),
    "api-logs": ("api", "get", "/api/v1/submissions/{evaluated}/logs/", {}, 404, 200),
    "api-logs-published": ("api", "get", "/api/v1/submissions/{published}/logs/", {}, 404, 200),
    "api-cancel": ("api", "post", "/api/v1/submissions/{queued}/cancel/", {}, 404, 200),
    "api-rerun": ("api", "post", "/api/v1/submissions/{cancelled}/rerun/", {}, 404, 200),
    "api-cancel-published": ("api", "post", "/api/v1/submissions/{published}/cancel/", {}, 404, 409),
    "api-rerun-published": ("api", "post", "/api/v1/submissions/{published}/rerun/", {}, 404, 409),
    "api-decisions": ("api", "post", "/api/v1/submissions/{evaluated}/decisions/", {"decision": "approve"}, 403, 403),
    "api-token-revoke": ("api", "delete", "/api/v1/tokens/{b_token}/", {}, 404, 204),
}


def _client(w: dict, door: str, who: str):  # noqa: ANN202
    user = w["alice"] if who == "a" else w["bob"]
    if door == "api":
        client = APIClient(HTTP_HOST="localhost")
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {w['a_token'] if who == 'a' else w['b_token_secret']}")
        return client
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    return client


def _page(response, url: str) -> str:  # noqa: ANN001
    return re.sub(r'name="csrfmiddlewaretoken" value="\w+"', "", response.content.decode().replace(url, ""))


def _call(client, method: str, url: str, data: dict):  # noqa: ANN001, ANN202
    kwargs = {"format": "json"} if isinstance(client, APIClient) else {}
    return getattr(client, method)(url, data, **kwargs)


@pytest.mark.parametrize("name", list(ENDPOINTS))
def test_another_teams_ids_are_not_found(w, name):
    door, method, url, data, a_status, b_status = ENDPOINTS[name]
    target = url.format(**w["ids"])
    nowhere = url.format(**{k: (NOWHERE if isinstance(v, int) else f"no-such-{k}") for k, v in w["ids"].items()})
    client = _client(w, door, "a")
    before = h.state(w["media"])
    theirs, missing = _call(client, method, target, data), _call(client, method, nowhere, data)
    assert h.state(w["media"]) == before, f"{name}: team A's request changed something"
    assert theirs.status_code == a_status, (name, theirs.status_code, theirs.content[:300])
    assert missing.status_code == theirs.status_code  # the same answer as for nothing at all
    if door == "api":
        body = theirs.json()
        assert body["error"]["code"] == ("not_found" if a_status == 404 else "permission_denied"), body
    else:  # the same page, but for the URL and the (per-response masked) CSRF token of the sign-out form
        assert _page(theirs, target) == _page(missing, nowhere)
    if b_status is not None:
        owner = _call(_client(w, door, "b"), method, target, data)
        assert owner.status_code == b_status, (name, owner.status_code, owner.content[:300])


def test_another_teams_slug_in_team_fields(w):
    """Acting *as* team B: the form's team choice, the API's ``team`` field, a token's query."""
    ids, before = w["ids"], h.state(w["media"])
    page = _client(w, "page", "a")
    form = page.post("/submit/", {"team": ids["b_team"], "upload": h.SimpleUploadedFile("b.zip", expert_bundle()),
                                  "hardware": "cpu-interpret", "guidance": "none", "budget": 350})
    assert form.status_code == 400 and "Select a valid choice" in form.content.decode()
    token = _client(w, "api", "a")
    for response in (token.get(f"/api/v1/tokens/?team={ids['b_slug']}"),
                     token.post("/api/v1/tokens/", {"name": "x", "team": ids["b_slug"]}, format="json")):
        assert response.status_code == 403 and response.json()["error"]["message"] == "this token belongs to another team"
    session = APIClient(HTTP_HOST="localhost")
    session.force_login(w["alice"])
    upload = session.post("/api/v1/submissions/", {"bundle": h.SimpleUploadedFile("b.zip", expert_bundle()),
                                                   "team": ids["b_slug"]}, format="multipart")
    assert upload.status_code == 403 and upload.json()["error"]["message"] == "you are not a member of that team"
    listed = {s["id"] for s in token.get(f"/api/v1/submissions/?team={ids['b_slug']}").json()["results"]}
    assert listed == {ids["published"]}  # B's published run only: the rest stays private
    assert h.state(w["media"]) == before
