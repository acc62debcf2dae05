"""The REST API: uploads with Idempotency-Key, per-object permissions, error bodies, tokens, schema."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from portal.submissions.models import Submission
from portal.teams.models import ApiToken
from portal.teams.services import token_create
from tests.portal.factories import expert_bundle, expert_source, make_team, make_user, make_zip, manifest_text

pytestmark = pytest.mark.django_db


def client_for(team, user, name: str = "ci") -> APIClient:
    client = APIClient(HTTP_HOST="localhost")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(team, name=name, actor=user).secret}")
    return client


def upload(client: APIClient, blob: bytes, key: str | None = None, **extra):  # noqa: ANN201
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    return client.post("/api/v1/submissions/", {"bundle": SimpleUploadedFile("b.zip", blob), **extra},
                       format="multipart", **headers)


@pytest.fixture
def alpha(catalogue, media):
    return make_team("Alpha")


@pytest.fixture
def beta(catalogue, media):
    return make_team("Beta")


def test_create_with_idempotency_key(alpha):
    client = client_for(*alpha)
    first = upload(client, expert_bundle(), key="run-1")
    assert first.status_code == 201, first.json()
    body = first.json()
    assert body["status"] == "queued" and body["team"] == "alpha" and body["tasks"][0]["slug"] == "silu-and-mul"
    assert body["attempt"]["number"] == 1 and body["progress"]["final"] is False
    again = upload(client, expert_bundle(), key="run-1")
    assert again.status_code == 200 and again.json()["id"] == body["id"]
    conflict = upload(client, expert_bundle(guidance="L1"), key="run-1")
    assert conflict.status_code == 409 and conflict.json()["error"]["code"] == "idempotency_conflict"
    assert Submission.objects.count() == 1


def test_refusal_has_a_consistent_error_body(alpha):
    client = client_for(*alpha)
    blob = make_zip({"submission.toml": manifest_text(["silu-and-mul"]), "silu-and-mul/kernel.py": "def x(:\n"})
    response = upload(client, blob)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_bundle"
    assert error["details"] == [{"file": "silu-and-mul/kernel.py", "rule": "python-syntax",
                                 "message": "line 1: invalid syntax"}]
    missing = client.post("/api/v1/submissions/", {}, format="multipart")
    assert missing.status_code == 400 and missing.json()["error"]["code"] == "invalid"
    assert "bundle" in missing.json()["error"]["details"]


def test_a_single_kernel_file_with_its_fields_is_a_one_task_submission(alpha):
    """PORTAL.md: one kernel file plus form fields is accepted, through the API as through the web form."""
    client = client_for(*alpha)
    kernel = SimpleUploadedFile("kernel.py", expert_source("silu-and-mul").encode())
    fields = {"task": "silu-and-mul", "model": "m-1", "provider": "p", "harness": "h", "guidance": "L1", "budget": 40,
              "model_version": "2026-11"}
    response = client.post("/api/v1/submissions/", {"bundle": kernel, **fields}, format="multipart")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["status"] == "queued" and [t["slug"] for t in body["tasks"]] == ["silu-and-mul"]
    sub = Submission.objects.get(pk=body["id"])
    assert (sub.model.name, sub.model.provider, sub.model.version, sub.harness.name, sub.guidance, sub.budget) == (
        "m-1", "p", "2026-11", "h", "L1", 40)


def test_a_single_kernel_file_without_its_fields_or_a_bundle_with_them_is_refused(alpha):
    client = client_for(*alpha)
    kernel = SimpleUploadedFile("kernel.py", expert_source("silu-and-mul").encode())
    response = client.post("/api/v1/submissions/", {"bundle": kernel, "task": "silu-and-mul", "model": "m"},
                           format="multipart")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid" and set(error["details"]) == {"provider", "harness"}
    assert "kernel.py" in error["details"]["provider"][0]
    both = upload(client, expert_bundle(), model="m")  # the manifest names the model
    assert both.status_code == 400 and set(both.json()["error"]["details"]) == {"model"}
    unknown = client.post("/api/v1/submissions/", {"bundle": SimpleUploadedFile("k.py", b"x = 1\n"), "task": "no-such",
                                                   "model": "m", "provider": "p", "harness": "h"}, format="multipart")
    assert unknown.status_code == 400 and unknown.json()["error"]["code"] == "invalid_bundle"
    assert {d["rule"] for d in unknown.json()["error"]["details"]} == {"unknown-task"}
    assert Submission.objects.count() == 0


def test_anonymous_and_bad_tokens(alpha):
    anon = APIClient(HTTP_HOST="localhost")
    assert upload(anon, expert_bundle()).status_code in (401, 403)
    bad = APIClient(HTTP_HOST="localhost")
    bad.credentials(HTTP_AUTHORIZATION="Bearer d2k_not-a-token")
    response = upload(bad, expert_bundle())
    assert response.status_code == 401 and response.json()["error"]["message"].startswith("the token is unknown")


def test_revoked_and_expired_tokens_stop_working(alpha):
    team, user = alpha
    issued = token_create(team, name="short", actor=user)
    client = APIClient(HTTP_HOST="localhost")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.secret}")
    assert client.get("/api/v1/tokens/").status_code == 200
    ApiToken.objects.filter(pk=issued.token.pk).update(expires_at="2000-01-01T00:00:00Z")
    assert client.get("/api/v1/tokens/").status_code == 401
    fresh = client_for(team, user, "other")
    created = fresh.post("/api/v1/tokens/", {"name": "cli", "days": 7}, format="json")
    assert created.status_code == 201 and created.json()["token"].startswith("d2k_")
    stored = ApiToken.objects.get(pk=created.json()["id"])
    assert created.json()["token"] not in (stored.digest, stored.prefix)  # only a hash is kept
    assert fresh.delete(f"/api/v1/tokens/{stored.pk}/").status_code == 204
    revoked = APIClient(HTTP_HOST="localhost")
    revoked.credentials(HTTP_AUTHORIZATION=f"Bearer {created.json()['token']}")
    assert revoked.get("/api/v1/tokens/").status_code == 401


def test_a_team_cannot_see_cancel_or_rerun_another_teams_submission(alpha, beta):
    a_client, b_client = client_for(*alpha), client_for(*beta)
    sub_id = upload(a_client, expert_bundle()).json()["id"]
    assert b_client.get(f"/api/v1/submissions/{sub_id}/").status_code == 404
    assert b_client.get(f"/api/v1/submissions/{sub_id}/results/").status_code == 404
    assert b_client.get(f"/api/v1/submissions/{sub_id}/logs/").status_code == 404
    assert b_client.post(f"/api/v1/submissions/{sub_id}/cancel/").status_code == 404
    assert b_client.post(f"/api/v1/submissions/{sub_id}/rerun/").status_code == 404
    assert [s["id"] for s in b_client.get("/api/v1/submissions/").json()["results"]] == []
    assert Submission.objects.get(pk=sub_id).status == "queued"
    assert a_client.post(f"/api/v1/submissions/{sub_id}/cancel/").json()["status"] == "cancelled"
    rerun = a_client.post(f"/api/v1/submissions/{sub_id}/rerun/")
    assert rerun.status_code == 200 and rerun.json()["attempt"]["number"] == 2


def test_a_non_moderator_cannot_decide(alpha):
    client = client_for(*alpha)
    sub_id = upload(client, expert_bundle()).json()["id"]
    response = client.post(f"/api/v1/submissions/{sub_id}/decisions/", {"decision": "approve"}, format="json")
    assert response.status_code == 403 and response.json()["error"]["code"] == "permission_denied"
    assert client.get("/api/v1/moderation/queue/").status_code == 403
    assert Submission.objects.get(pk=sub_id).status == "queued"


def test_quota_gives_429_with_retry_after(catalogue, media):
    team, user = make_team("Gamma", daily_quota=1)
    client = client_for(team, user)
    assert upload(client, expert_bundle()).status_code == 201
    response = upload(client, expert_bundle(guidance="L1"))
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0 and response.json()["error"]["code"] == "quota_daily"


def test_list_filters_and_cursor_pagination(alpha):
    client = client_for(*alpha)
    for guidance in ("none", "L1", "L1+L2"):
        assert upload(client, expert_bundle(guidance=guidance)).status_code == 201
    page = client.get("/api/v1/submissions/?page_size=2").json()
    assert len(page["results"]) == 2 and page["next"] and "cursor=" in page["next"]
    rest = client.get(page["next"]).json()
    assert len(rest["results"]) == 1
    only = client.get("/api/v1/submissions/?guidance=L1").json()["results"]
    assert [s["guidance"] for s in only] == ["L1"]
    assert client.get("/api/v1/submissions/?task=fused-add-rmsnorm").json()["results"] == []


def test_tasks_schema_and_docs_are_public(catalogue):
    anon = APIClient(HTTP_HOST="localhost")
    tasks = anon.get("/api/v1/tasks/").json()
    assert {t["slug"] for t in tasks} == {"silu-and-mul", "fused-add-rmsnorm"}
    detail = anon.get("/api/v1/tasks/silu-and-mul/").json()
    assert detail["workloads"] and set(detail["guidance"]) == {"L1", "L2", "L3"}
    schema = anon.get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    assert "/api/v1/submissions/" in schema["paths"] and "teamToken" in schema["components"]["securitySchemes"]
    docs = anon.get("/api/v1/docs/").content.decode()
    assert "swagger-ui" in docs and "cdn" not in docs.lower() and "/static/drf_spectacular_sidecar/" in docs


def test_session_user_in_one_team_can_upload(alpha):
    team, user = alpha
    client = APIClient(HTTP_HOST="localhost")
    client.force_login(user)
    assert upload(client, expert_bundle()).status_code == 201
    outsider = make_user("loner")
    client.force_login(outsider)
    response = upload(client, expert_bundle())
    assert response.status_code == 403 and response.json()["error"]["message"] == "you are not in any team"


def test_list_query_count_does_not_grow_with_rows(alpha):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = client_for(*alpha)

    def list_queries(expected_rows: int) -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert len(client.get("/api/v1/submissions/").json()["results"]) == expected_rows
        return len(ctx.captured_queries)

    assert upload(client, expert_bundle()).status_code == 201
    one = list_queries(1)
    for guidance in ("L1", "L1+L2", "L1+L2+L3"):
        assert upload(client, expert_bundle(guidance=guidance)).status_code == 201
    assert 0 < list_queries(4) <= one


def test_a_moderator_can_cancel_any_teams_run(alpha):
    from portal.moderation.models import ModerationDecision

    sub_id = upload(client_for(*alpha), expert_bundle()).json()["id"]
    mod = APIClient(HTTP_HOST="localhost")
    mod.force_login(make_user("mod", moderator=True))
    response = mod.post(f"/api/v1/submissions/{sub_id}/decisions/", {"decision": "cancel", "reason": "bad node"},
                        format="json")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert ModerationDecision.objects.get().decision == "cancel"
    again = mod.post(f"/api/v1/submissions/{sub_id}/decisions/", {"decision": "approve"}, format="json")
    assert again.status_code == 409 and again.json()["error"]["code"] == "invalid_transition"
