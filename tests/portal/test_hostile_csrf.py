"""CSRF: every browser form endpoint refuses a POST without the token (403) and changes nothing;
the same POST with the token does what it should (so the 403 was the token's absence, nothing
else). The API refuses a cookie-session POST without the token too; a Bearer token needs none."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import Client
from rest_framework.test import APIClient

from portal.submissions import actions
from portal.submissions.models import Submission
from portal.teams.models import ApiToken
from portal.teams.services import token_create
from tests.portal import hostile as h
from tests.portal.factories import expert_bundle, make_team, make_user

pytestmark = pytest.mark.django_db


def evaluated(team, user) -> Submission:  # noqa: ANN001
    sub, _ = actions.check_create_submission(team=team, user=user, blob=expert_bundle(guidance="L1"), filename="e.zip")
    return h.finish_evaluation(sub)


@pytest.fixture
def w(catalogue, media):
    team, alice = make_team("Alpha", owner=make_user("alice"))
    queued, _ = actions.check_create_submission(team=team, user=alice, blob=expert_bundle(), filename="q.zip")
    cancelled, _ = actions.check_create_submission(team=team, user=alice, blob=expert_bundle(guidance="L1+L2"),
                                                   filename="c.zip")
    actions.do_cancel(cancelled, user=alice)
    return {"media": media, "team": team, "alice": alice, "mod": make_user("mod", moderator=True), "queued": queued,
            "cancelled": cancelled, "evaluated": evaluated(team, alice),
            "token": token_create(team, name="old", actor=alice).token}


def status_of(key: str) -> Callable[[dict], str]:
    return lambda w: Submission.objects.get(pk=w[key].pk).status


# name: (who, url, data, what to observe, the POST's status with its token)
FORMS = {
    "submit": ("alice", lambda w: "/submit/", lambda w: {
        "team": w["team"].pk, "upload": h.SimpleUploadedFile("b.zip", expert_bundle(guidance="L1+L2+L3")),
        "hardware": "cpu-interpret", "guidance": "none", "budget": 350}, lambda w: Submission.objects.count(), 302),
    "cancel": ("alice", lambda w: f"/submissions/{w['queued'].pk}/cancel/", lambda w: {}, status_of("queued"), 302),
    "rerun": ("alice", lambda w: f"/submissions/{w['cancelled'].pk}/rerun/", lambda w: {"reason": "again"},
              status_of("cancelled"), 302),
    "token-create": ("alice", lambda w: f"/teams/{w['team'].slug}/tokens/", lambda w: {"name": "new", "days": 9},
                     lambda w: ApiToken.objects.count(), 200),
    "token-revoke": ("alice", lambda w: f"/teams/{w['team'].slug}/tokens/{w['token'].pk}/revoke/", lambda w: {},
                     lambda w: ApiToken.objects.get(pk=w["token"].pk).revoked_at, 302),
    "approve": ("mod", lambda w: f"/moderation/{w['evaluated'].pk}/approve/", lambda w: {"reason": "ok"},
                status_of("evaluated"), 302),
    "reject": ("mod", lambda w: f"/moderation/{w['evaluated'].pk}/reject/", lambda w: {"reason": "no"},
               status_of("evaluated"), 302),
    "moderator-rerun": ("mod", lambda w: f"/moderation/{w['evaluated'].pk}/rerun/", lambda w: {},
                        status_of("evaluated"), 302),
    "moderator-cancel": ("mod", lambda w: f"/moderation/{w['queued'].pk}/cancel/", lambda w: {}, status_of("queued"),
                         302),
    "logout": ("alice", lambda w: "/accounts/logout/", lambda w: {},
               lambda w: None, 302),
}


@pytest.mark.parametrize("name", list(FORMS))
def test_forms_refuse_a_post_without_the_csrf_token(w, name):
    who, url, data, observe, ok = FORMS[name]
    client = Client(HTTP_HOST="localhost", enforce_csrf_checks=True)
    client.force_login(w[who])
    before, seen = h.state(w["media"]), observe(w)
    refused = client.post(url(w), data(w))
    assert refused.status_code == 403 and "CSRF" in refused.content.decode()
    assert observe(w) == seen and h.state(w["media"]) == before
    assert client.get("/submissions/").status_code == 200  # still signed in (the logout was refused too)

    client.get("/submit/")  # any page with a form sets the CSRF cookie
    accepted = client.post(url(w), {**data(w), "csrfmiddlewaretoken": client.cookies["csrftoken"].value})
    assert accepted.status_code == ok, accepted.content[:300]
    assert name == "logout" or observe(w) != seen


def test_sign_in_refuses_a_post_without_the_csrf_token(catalogue):
    make_user("alice")
    client = Client(HTTP_HOST="localhost", enforce_csrf_checks=True)
    credentials = {"username": "alice", "password": "pw-for-tests-only"}
    for url in ("/accounts/login/", "/admin/login/"):
        assert client.post(url, credentials).status_code == 403
        assert "_auth_user_id" not in client.session
    client.get("/accounts/login/")
    signed_in = client.post("/accounts/login/", {**credentials, "csrfmiddlewaretoken": client.cookies["csrftoken"].value})
    assert signed_in.status_code == 302 and "_auth_user_id" in client.session


# name: (who, method, url, data, what to observe, the status with its token)
API = {
    "upload": ("alice", "post", lambda w: "/api/v1/submissions/",
               lambda w: {"bundle": h.SimpleUploadedFile("b.zip", expert_bundle(guidance="L1+L2+L3"))},
               lambda w: Submission.objects.count(), 201),
    "cancel": ("alice", "post", lambda w: f"/api/v1/submissions/{w['queued'].pk}/cancel/", lambda w: {},
               status_of("queued"), 200),
    "rerun": ("alice", "post", lambda w: f"/api/v1/submissions/{w['cancelled'].pk}/rerun/", lambda w: {},
              status_of("cancelled"), 200),
    "decision": ("mod", "post", lambda w: f"/api/v1/submissions/{w['evaluated'].pk}/decisions/",
                 lambda w: {"decision": "approve"}, status_of("evaluated"), 200),
    "token-create": ("alice", "post", lambda w: "/api/v1/tokens/", lambda w: {"name": "new"},
                     lambda w: ApiToken.objects.count(), 201),
    "token-revoke": ("alice", "delete", lambda w: f"/api/v1/tokens/{w['token'].pk}/", lambda w: {},
                     lambda w: ApiToken.objects.get(pk=w["token"].pk).revoked_at, 204),
}


@pytest.mark.parametrize("name", list(API))
def test_the_api_refuses_a_session_post_without_the_csrf_token(w, name):
    who, method, url, data, observe, ok = API[name]
    client = APIClient(HTTP_HOST="localhost", enforce_csrf_checks=True)
    client.force_login(w[who])
    before, seen = h.state(w["media"]), observe(w)
    refused = getattr(client, method)(url(w), data(w), format="multipart" if name == "upload" else "json")
    assert refused.status_code == 403 and observe(w) == seen and h.state(w["media"]) == before
    error = refused.json()["error"]
    assert error["code"] == "permission_denied" and "CSRF" in error["message"]
    client.get("/submit/")
    accepted = getattr(client, method)(url(w), data(w), format="multipart" if name == "upload" else "json",
                                       HTTP_X_CSRFTOKEN=client.cookies["csrftoken"].value)
    assert accepted.status_code == ok, accepted.content[:300]
    assert observe(w) != seen
