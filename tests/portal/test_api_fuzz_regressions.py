"""Plain regression tests for what the schema fuzz test (test_api_fuzz.py) found, so each stays
fixed even if the fuzzer's examples change: 500s on a malformed token id and on a NUL character
in a leaderboard filter or a task slug, HTML 404 pages under /api/, and a schema that did not
document errors or described three lists as paginated."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from portal.teams.models import ApiToken
from portal.teams.services import token_create
from tests.portal.factories import make_team

pytestmark = pytest.mark.django_db


@pytest.fixture
def alpha_client() -> tuple[APIClient, ApiToken]:
    team, user = make_team("Alpha")
    issued = token_create(team, name="ci", actor=user)
    client = APIClient(HTTP_HOST="localhost")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.secret}")
    return client, issued.token


@pytest.mark.parametrize("token_id", ["null,null", "abc", "1e3"])
def test_revoking_a_malformed_token_id_is_a_404_not_a_500(alpha_client, token_id: str) -> None:
    client, token = alpha_client
    response = client.delete(f"/api/v1/tokens/{token_id}/")
    assert response.status_code == 404, response.content[:300]
    assert response.json()["error"]["code"] == "not_found"
    token.refresh_from_db()
    assert token.revoked_at is None
    assert client.delete(f"/api/v1/tokens/{token.pk}/").status_code == 204  # the real id still works


@pytest.mark.parametrize("url", ["/api/v1/leaderboard/?model=a%00", "/api/v1/leaderboard/?hardware=h200%00",
                                 "/api/v1/pairs/?hardware=%00", "/leaderboard/?model=%00", "/leaderboard/pairs/?hardware=%00",
                                 "/leaderboard/?hardware=%00&format=csv"])
def test_a_nul_character_in_a_leaderboard_filter_is_a_400_not_a_500(catalogue, url: str) -> None:
    response = APIClient(HTTP_HOST="localhost").get(url)
    assert response.status_code == 400, response.content[:300]
    if url.startswith("/api/"):
        error = response.json()["error"]
        assert error["code"] == "invalid" and "NUL" in error["message"]


def test_a_nul_character_in_a_task_slug_is_a_404_not_a_500(catalogue) -> None:
    anon = APIClient(HTTP_HOST="localhost")
    response = anon.get("/api/v1/tasks/silu-and-mul%00/")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert anon.get("/api/v1/tasks/silu-and-mul/").status_code == 200


def test_an_unroutable_api_path_answers_the_error_body_and_pages_keep_their_404_page() -> None:
    anon = APIClient(HTTP_HOST="localhost")
    for path in ("/api/v1/submissions/0.5/results/", "/api/v1/tasks/a.b.c/", "/api/v1/no-such-thing/"):
        response = anon.get(path)
        assert response.status_code == 404 and response["Content-Type"] == "application/json", path
        error = response.json()["error"]
        assert error["code"] == "not_found" and path in error["message"]
    page = anon.get("/no-such-page/")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")


def test_the_schema_documents_errors_and_plain_lists() -> None:
    schema = APIClient(HTTP_HOST="localhost").get("/api/v1/schema/?format=json").json()
    error_ref = {"$ref": "#/components/schemas/Error"}
    assert schema["components"]["schemas"]["Error"]["required"] == ["error"]
    for path, operations in schema["paths"].items():
        for method, op in operations.items():
            errors = {code: r for code, r in op["responses"].items() if code >= "400"}
            assert "401" in errors, (method, path)  # a bad token is refused everywhere
            for code, response in errors.items():
                assert response["content"]["application/json"]["schema"] == error_ref, (method, path, code)
            if "{" in path:
                assert "404" in errors, (method, path)
    submission = schema["paths"]["/api/v1/submissions/"]["post"]["responses"]
    assert {"400", "403", "409", "413", "429"} <= set(submission)
    for action in ("results", "judge", "logs"):
        op = schema["paths"][f"/api/v1/submissions/{{id}}/{action}/"]["get"]
        assert [p["name"] for p in op["parameters"]] == ["id"]
        assert op["responses"]["200"]["content"]["application/json"]["schema"]["type"] == "array"
