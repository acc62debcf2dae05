"""``d2k submit bundle.zip --wait`` against a live server and a real worker."""

from __future__ import annotations

import pytest

from d2k_cli.main import main
from portal.teams.services import token_create
from tests.portal.factories import expert_bundle, make_team, make_zip, manifest_text

pytestmark = [pytest.mark.integration, pytest.mark.interpreter, pytest.mark.timeout(600)]


def test_submit_wait_shows_progress_and_results(live_server, catalogue, media, portal_worker, tmp_path, capsys):
    team, owner = make_team("Alpha")
    secret = token_create(team, name="cli", actor=owner).secret
    base = ["--url", live_server.url, "--token", secret, "--interval", "0.3"]

    bad = tmp_path / "bad.zip"
    bad.write_bytes(make_zip({"submission.toml": manifest_text(["silu-and-mul"]), "silu-and-mul/kernel.py": "x = 1\n"}))
    assert main([*base, "submit", str(bad)]) == 2
    assert "silu-and-mul/kernel.py: has no @triton.jit function (rule: triton-kernel)" in capsys.readouterr().out

    portal_worker()
    good = tmp_path / "good.zip"
    good.write_bytes(expert_bundle())
    assert main([*base, "submit", str(good), "--wait"]) == 0
    out = capsys.readouterr().out
    assert "submitted: #" in out and " evaluated" in out and "silu-and-mul: correct" in out
    assert "S1 (smoke): ok" in out
    assert main([*base, "submit", str(good)]) == 0  # the same bytes: the idempotency key finds it
    assert "already submitted" in capsys.readouterr().out
    assert main(["--url", live_server.url, "--token", "d2k_wrong", "status", "1"]) == 2
