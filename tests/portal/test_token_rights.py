"""PORTAL.md's security rules at their edges: a token carries no more than its team's rights and
its creator's standing, quotas count every run a team asks for, sign-in limits cannot be walked
around (the admin's sign-in, other addresses, a proxy), and outsiders learn nothing a published
view hides (a pending re-run's status, an unapproved judgement)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from portal.moderation.services import do_moderate
from portal.submissions import actions
from portal.submissions.models import Submission
from portal.teams.models import ApiToken, Membership
from portal.teams.services import token_create
from tests.portal.factories import expert_bundle, make_team, make_user
from tests.portal.test_portal_pages import evaluated

pytestmark = pytest.mark.django_db


def bearer(secret: str) -> APIClient:
    client = APIClient(HTTP_HOST="localhost")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


@pytest.fixture(autouse=True)
def _fresh_limits():
    cache.clear()
    yield
    cache.clear()


def test_a_token_stops_when_its_creator_leaves_the_team_or_is_deactivated(catalogue, media):
    team, owner = make_team("Alpha")
    member = make_user("member")
    Membership.objects.create(team=team, user=member)
    leaving = bearer(token_create(team, name="ci", actor=member).secret)
    assert leaving.get("/api/v1/tokens/").status_code == 200
    Membership.objects.filter(team=team, user=member).delete()
    refused = leaving.get("/api/v1/tokens/")
    assert refused.status_code == 401 and refused.json()["error"]["message"].startswith("the token is unknown")
    assert leaving.post("/api/v1/tokens/", {"name": "renewed"}, format="json").status_code == 401

    owners = bearer(token_create(team, name="owner", actor=owner).secret)
    assert owners.get("/api/v1/tokens/").status_code == 200
    owner.is_active = False
    owner.save(update_fields=["is_active"])
    assert owners.get("/api/v1/tokens/").status_code == 401


def test_a_moderators_token_carries_only_its_teams_rights(catalogue, media):
    mod = make_user("mod", moderator=True)
    mods_team, _ = make_team("Mods", owner=mod)
    other, other_owner = make_team("Other")
    sub, _ = actions.check_create_submission(team=other, user=other_owner, blob=expert_bundle(), filename="b.zip")
    evaluated(sub)
    token = bearer(token_create(mods_team, name="harness", actor=mod).secret)
    assert token.get("/api/v1/moderation/queue/").status_code == 403
    decided = token.post(f"/api/v1/submissions/{sub.pk}/decisions/", {"decision": "approve"}, format="json")
    assert decided.status_code == 403 and "signed in" in decided.json()["error"]["message"]
    assert token.get(f"/api/v1/submissions/{sub.pk}/logs/").status_code == 404
    assert token.get("/api/v1/submissions/").json()["results"] == []
    signed_in = APIClient(HTTP_HOST="localhost")
    signed_in.force_login(mod)  # the person, signed in, still moderates
    assert signed_in.get("/api/v1/moderation/queue/").status_code == 200


def test_a_token_made_with_a_token_does_not_outlive_it(catalogue, media):
    team, owner = make_team("Alpha")
    issued = token_create(team, name="short", actor=owner, days=2)
    made = bearer(issued.secret).post("/api/v1/tokens/", {"name": "long", "days": 300}, format="json")
    assert made.status_code == 201
    assert ApiToken.objects.get(pk=made.json()["id"]).expires_at == issued.token.expires_at
    signed_in = APIClient(HTTP_HOST="localhost")
    signed_in.force_login(owner)
    long = signed_in.post("/api/v1/tokens/", {"name": "long2", "days": 300}, format="json")
    assert ApiToken.objects.get(pk=long.json()["id"]).expires_at > timezone.now() + timedelta(days=299)


def test_team_reruns_use_the_daily_quota_and_moderator_reruns_do_not(catalogue, media):
    team, owner = make_team("Gamma", daily_quota=2, concurrent_quota=5)
    client = bearer(token_create(team, name="ci", actor=owner).secret)
    bundle = SimpleUploadedFile("b.zip", expert_bundle())
    sub_id = client.post("/api/v1/submissions/", {"bundle": bundle}, format="multipart").json()["id"]
    assert client.post(f"/api/v1/submissions/{sub_id}/cancel/").status_code == 200
    assert client.post(f"/api/v1/submissions/{sub_id}/rerun/").status_code == 200  # run 2 of 2
    assert client.post(f"/api/v1/submissions/{sub_id}/cancel/").status_code == 200
    over = client.post(f"/api/v1/submissions/{sub_id}/rerun/")
    assert over.status_code == 429 and over.json()["error"]["code"] == "quota_daily"
    assert int(over["Retry-After"]) > 0 and "re-runs" in over.json()["error"]["message"]
    mod = make_user("mod", moderator=True)
    actions.do_rerun(Submission.objects.get(pk=sub_id), user=mod, reason="check", by_moderator=True)
    assert Submission.objects.get(pk=sub_id).status == "queued"  # not the team's quota


def test_the_admins_sign_in_goes_through_the_rate_limited_one(catalogue):
    answer = Client(HTTP_HOST="localhost").get("/admin/login/?next=/admin/")
    assert answer.status_code == 302 and answer["Location"] == "/accounts/login/?next=/admin/"
    assert Client(HTTP_HOST="localhost").post("/admin/login/", {"username": "x", "password": "y"}).status_code == 302


def test_sign_in_failures_count_per_account_and_per_address_behind_a_proxy(catalogue, settings):
    settings.D2K_LOGIN_RATE_PER_MIN = 3
    make_user("someone")
    make_user("another")
    for n in range(3):  # three addresses, one account
        Client(HTTP_HOST="localhost", REMOTE_ADDR=f"10.0.0.{n}").post(
            "/accounts/login/", {"username": "someone", "password": "wrong"})
    blocked = Client(HTTP_HOST="localhost", REMOTE_ADDR="10.0.0.9").post(
        "/accounts/login/", {"username": "someone", "password": "pw-for-tests-only"})
    assert blocked.status_code == 429
    ok = Client(HTTP_HOST="localhost", REMOTE_ADDR="10.0.0.9").post(
        "/accounts/login/", {"username": "another", "password": "pw-for-tests-only"})
    assert ok.status_code == 302  # the address itself is not blocked

    cache.clear()
    settings.D2K_PROXY_HOPS = 1  # the proxy's address is REMOTE_ADDR; the client's is the last forwarded

    def via_proxy(client_addr: str, username: str, password: str = "wrong") -> int:
        return Client(HTTP_HOST="localhost", REMOTE_ADDR="192.168.0.1",
                      HTTP_X_FORWARDED_FOR=f"1.2.3.4, {client_addr}").post(
            "/accounts/login/", {"username": username, "password": password}).status_code

    for n in range(3):
        assert via_proxy("203.0.113.7", f"guess{n}") == 200
    assert via_proxy("203.0.113.7", "another", "pw-for-tests-only") == 429  # that client is over
    assert via_proxy("203.0.113.8", "another", "pw-for-tests-only") == 302  # the others are not


def test_creating_tokens_in_the_browser_is_rate_limited(catalogue, settings):
    settings.D2K_TOKEN_CREATE_PER_HOUR = 2
    team, owner = make_team("Alpha")
    client = Client(HTTP_HOST="localhost")
    client.force_login(owner)
    for n in range(2):
        assert client.post(f"/teams/{team.slug}/tokens/", {"name": f"t{n}", "days": 7}).status_code == 200
    limited = client.post(f"/teams/{team.slug}/tokens/", {"name": "t3", "days": 7})
    assert limited.status_code == 429 and limited["Retry-After"] == "3600"
    assert "Too many tokens" in limited.content.decode()
    assert ApiToken.objects.filter(team=team).count() == 2


def test_outsiders_cannot_filter_on_a_published_submissions_real_status(catalogue, media):
    team, owner = make_team("Alpha")
    sub, _ = actions.check_create_submission(team=team, user=owner, blob=expert_bundle(), filename="b.zip")
    mod = make_user("mod", moderator=True)
    do_moderate(evaluated(sub), moderator=mod, decision="approve")
    actions.do_rerun(Submission.objects.get(pk=sub.pk), user=mod, reason="again", by_moderator=True)
    assert Submission.objects.get(pk=sub.pk).status == "queued"
    anon = APIClient(HTTP_HOST="localhost")
    assert anon.get("/api/v1/submissions/?status=queued").json()["results"] == []
    assert [r["id"] for r in anon.get("/api/v1/submissions/?status=published").json()["results"]] == [sub.pk]
    own = bearer(token_create(team, name="ci", actor=owner).secret)
    assert [r["id"] for r in own.get("/api/v1/submissions/?status=queued").json()["results"]] == [sub.pk]
    page = Client(HTTP_HOST="localhost").get(f"/submissions/{sub.pk}/").content.decode()
    assert "status-queued" not in page and "status-published" in page
