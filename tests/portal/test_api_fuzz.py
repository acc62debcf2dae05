"""Schemathesis fuzzes every operation of the served OpenAPI schema on a real HTTP server.

The server is pytest-django's ``live_server`` (a threaded WSGI server on a real port) over the
test PostgreSQL database, holding real data: a synced catalogue, published results with their
scores and the reference rows of the leaderboard, and the fuzzing team's own queued, running,
cancelled and evaluated submissions. The schema is read from the server's own ``/api/v1/schema/``.
Every generated request is sent three times: anonymously, with the team's token and with a
moderator's token. No answer may be a 5xx, and every answer, success or error, must match the
schema (status code, content type, body, headers), so the schema stays an accurate contract.

Bounded and deterministic for CI: a fixed seed, derandomized Hypothesis, a small
``max-examples``, no example database, and Hypothesis's caches in a temporary folder.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from dataclasses import dataclass, field
from io import StringIO
from pathlib import Path

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core.cache import cache
from django.core.management import call_command
from hypothesis.configuration import set_hypothesis_home_dir
from rest_framework.throttling import ScopedRateThrottle
from schemathesis.config import SchemathesisConfig

from portal.scores.seed import SeedSpec, seed
from portal.submissions import actions
from portal.teams.models import ApiToken, Team
from portal.teams.services import membership_add, token_create
from tasks.registry import REPO_ROOT
from tests.portal.factories import expert_bundle, make_team, make_user

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

# Hypothesis caches the constants of local modules under ./.hypothesis/ while pytest collects (before
# any fixture runs), so the folder is moved out of the work tree here, at import.
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "d2k-hypothesis")

#: Per operation: the examples, coverage (boundary and wrong-type values, unexpected methods) and
#: fuzzing phases; ``max-examples`` bounds the fuzzing phase. The callers' tokens are set by the
#: test, so the generator does not invent Authorization headers or session cookies. CI uses the
#: defaults; ``D2K_FUZZ_EXAMPLES`` and ``D2K_FUZZ_SEED`` fuzz harder or differently on a laptop.
CONFIG = f"""
seed = {int(os.environ.get("D2K_FUZZ_SEED", "20260101"))}
suppress-health-check = ["all"]

[generation]
max-examples = {int(os.environ.get("D2K_FUZZ_EXAMPLES", "8"))}
deterministic = true
database = "none"
with-security-parameters = false
"""

CHECKS = [
    schemathesis.checks.not_a_server_error,
    schemathesis.checks.status_code_conformance,
    schemathesis.checks.content_type_conformance,
    schemathesis.checks.response_schema_conformance,
    schemathesis.checks.response_headers_conformance,
]

CALLERS = ("anonymous", "team", "moderator")


@dataclass
class World:
    """What the server holds, and a valid token per caller.

    The fuzzer may revoke the very token it calls with (``DELETE /tokens/{id}/``); a revoked
    token is replaced before the next request, so the rest of the run still acts as that caller.
    """

    submission_ids: list[int]
    token_ids: list[int]
    slugs: list[str]
    members: dict[str, tuple[Team, User]]
    _tokens: dict[str, tuple[int, str]] = field(default_factory=dict)

    def headers(self, caller: str) -> dict[str, str]:
        if caller == "anonymous":
            return {}
        token_id, secret = self._tokens.get(caller, (0, ""))
        if not ApiToken.objects.filter(pk=token_id, revoked_at__isnull=True).exists():
            team, user = self.members[caller]
            issued = token_create(team, name=f"fuzz-{caller}-{token_id}", actor=user)
            token_id, secret = issued.token.pk, issued.secret
            self._tokens[caller] = (token_id, secret)
        return {"Authorization": f"Bearer {secret}"}


@pytest.fixture
def world(transactional_db, catalogue, media, monkeypatch) -> World:
    cache.clear()  # throttle counts and cached board data left by earlier tests in this process
    # The token endpoints allow 30 requests a minute; the fuzzer sends hundreds, and a wall of 429s
    # would hide the answers it came to check.
    monkeypatch.setitem(ScopedRateThrottle.THROTTLE_RATES, "tokens", "100000/min")
    call_command("import_reference_results", str(REPO_ROOT / "docs/results/h200-bench.json"), stdout=StringIO())
    published = seed(SeedSpec(submissions=4, teams=1, models=2, seed=3))
    evaluated = seed(SeedSpec(submissions=1, teams=1, models=1, seed=9), publish=False)
    team = Team.objects.get(slug="seed-team-0")
    member = make_user("fuzz-member")
    membership_add(team, member)
    queued, _ = actions.check_create_submission(team=team, user=member, blob=expert_bundle(), filename="q.zip")
    running, _ = actions.check_create_submission(team=team, user=member, blob=expert_bundle(guidance="L1"),
                                                 filename="r.zip")
    assert actions.do_start_evaluation(running.pk, 1, worker="fuzz-worker")
    cancelled, _ = actions.check_create_submission(team=team, user=member, blob=expert_bundle(guidance="L1+L2"),
                                                   filename="c.zip")
    actions.do_cancel(cancelled, user=member, reason="fuzz fixture")
    moderator = make_user("fuzz-moderator", moderator=True)
    mod_team, _ = make_team("Moderators", owner=moderator)
    spare_tokens = [token_create(team, name=f"spare-{i}", actor=member).token.pk for i in range(2)]
    return World(submission_ids=[s.pk for s in (*published, *evaluated, queued, running, cancelled)],
                 token_ids=spare_tokens, slugs=["silu-and-mul", "fused-add-rmsnorm"],
                 members={"team": (team, member), "moderator": (mod_team, moderator)})


@pytest.fixture
def api_schema(live_server, world: World):  # noqa: ANN201
    config = SchemathesisConfig.from_str(CONFIG)
    schema = schemathesis.openapi.from_url(f"{live_server.url}/api/v1/schema/?format=json", config=config)
    turns = itertools.count()

    @schema.hook
    def map_path_parameters(context, path_parameters):  # noqa: ANN001, ANN202
        """Every other generated id or slug is swapped for a real one (deterministically), so the
        fuzz reaches real rows in every state and not only 404s."""
        if not path_parameters:
            return path_parameters
        value = path_parameters.get("id")
        if isinstance(value, int) and not isinstance(value, bool) and value % 2 == 0:
            pool = world.token_ids if context.operation.path.startswith("/api/v1/tokens/") else world.submission_ids
            path_parameters["id"] = pool[next(turns) % len(pool)]
        slug = path_parameters.get("slug")
        if isinstance(slug, str) and len(slug) % 2 == 0:
            path_parameters["slug"] = world.slugs[next(turns) % len(world.slugs)]
        return path_parameters

    return schema


schema = schemathesis.pytest.from_fixture("api_schema")


@pytest.fixture(autouse=True)
def _node_id_for_schemathesis(request) -> None:
    """Schemathesis 4.32 names each operation's subtest through ``Node._nodeid``, which pytest 9.2
    no longer has (the id is ``Node.nodeid``); without it the loader fails before any request."""
    if not hasattr(request.node, "_nodeid"):
        request.node._nodeid = request.node.nodeid


def needs_token(operation: schemathesis.APIOperation) -> bool:
    return {} not in operation.definition.raw.get("security", [{}])


@schema.parametrize()
def test_every_operation_answers_within_its_schema(case, world: World) -> None:
    for caller in CALLERS:
        headers = world.headers(caller)
        try:
            response = case.call(headers=headers, timeout=30)
            case.validate_response(response, checks=CHECKS, headers=headers)
            if caller == "anonymous" and needs_token(case.operation):
                assert response.status_code >= 400, f"{case.operation.label} served an anonymous caller"
        except BaseException as exc:
            exc.add_note(f"calling as: {caller}")
            raise
