"""The sandbox: what bubblewrap hides and blocks, and the setting that refuses to run without it.

The cheat corpus (test_cheats.py) proves the same through the engine: reading references/,
writing outside the working directory and opening a connection all fail there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator import errors, sandbox
from evaluator.runner import RunOptions, run
from tasks.registry import REPO_ROOT, get_task

OK, WHY = sandbox.probe()
# CI (scripts/test.sh) sets D2K_TEST_SANDBOX=require: there a missing sandbox fails these tests
# instead of skipping them, so a broken bubblewrap install cannot pass unnoticed.
if not OK and os.environ.get("D2K_TEST_SANDBOX") == "require":
    raise RuntimeError(f"D2K_TEST_SANDBOX=require but bubblewrap is unusable here: {WHY}")
needs_sandbox = pytest.mark.skipif(not OK, reason=f"bubblewrap unusable here: {WHY}")
EXPERT = get_task("silu-and-mul").expert_path

PROBE = r"""
import json, os, socket, pathlib
out = {"pid1": open("/proc/1/cmdline", "rb").read().split(b"\0")[0].decode(),
       "ifaces": sorted(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") else [],
       "refs": os.path.exists(REFS), "refs_listing": os.listdir(REFS) if os.path.isdir(REFS) else [],
       "home": os.environ.get("HOME"), "secret": os.environ.get("D2K_SECRET_FOR_TEST")}
for name, path in (("work", "/sandbox/work/f"), ("tmp", "/tmp/f"), ("engine", ENGINE + "/f"), ("root", "/f")):
    try:
        pathlib.Path(path).write_text("x")
        out["write_" + name] = "ok"
    except OSError as exc:
        out["write_" + name] = exc.strerror
try:
    socket.create_connection(("127.0.0.1", 22), timeout=2)
    out["net"] = "connected"
except OSError as exc:
    out["net"] = exc.strerror or str(exc)
print(json.dumps(out))
"""


@needs_sandbox
def test_bubblewrap_hides_and_blocks(tmp_path, monkeypatch):
    monkeypatch.setenv("D2K_SECRET_FOR_TEST", "database-password")
    code = PROBE.replace("REFS", repr(str(REPO_ROOT / "references"))).replace("ENGINE", repr(str(REPO_ROOT / "evaluator")))
    env = sandbox.scrubbed_env(dict(__import__("os").environ), {"HOME": sandbox.WORKDIR})
    cmd = sandbox.bwrap_command([sys.executable, "-c", code], workdir=tmp_path, code_dirs=[REPO_ROOT / "evaluator"],
                                files={}, hidden=[REPO_ROOT / "references"], gpu=False, env=env)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["pid1"].endswith("bwrap")  # a new PID namespace: the host's processes are not there
    assert seen["ifaces"] in ([], ["lo"])  # no network but a private loopback
    assert seen["net"] != "connected"
    assert not seen["refs_listing"]  # references/ is absent or an empty tmpfs
    assert seen["write_work"] == "ok" and not (tmp_path / "f").exists()  # a private, sized tmpfs
    assert seen["write_tmp"] == "ok" and not Path("/tmp/f").exists()  # a private tmpfs
    assert seen["write_engine"] == "Read-only file system"
    assert seen["write_root"] in ("Read-only file system", "Permission denied")
    assert seen["home"] == sandbox.WORKDIR and seen["secret"] is None  # a scrubbed environment


def test_command_binds_code_not_the_repository(tmp_path):
    cmd = sandbox.bwrap_command(["true"], workdir=tmp_path, code_dirs=[REPO_ROOT / "evaluator", REPO_ROOT / "tasks"],
                                files={"expert": EXPERT}, hidden=[REPO_ROOT / "references"], gpu=False, env={})
    binds = {cmd[i + 1] for i, a in enumerate(cmd) if a in ("--ro-bind", "--bind", "--dev-bind")}
    assert str(REPO_ROOT) not in binds and str(REPO_ROOT / "references") not in binds
    assert str(REPO_ROOT / "evaluator") in binds and str(EXPERT) in binds  # the expert file alone, explicitly
    assert not any(b.startswith("/dev/nvidia") for b in binds)  # no GPU nodes unless a GPU is used
    assert {"--die-with-parent", "--unshare-net", "--unshare-pid", "--clearenv"} <= set(cmd)


def test_require_refuses_to_run_without_bubblewrap(tmp_path, monkeypatch):
    monkeypatch.setenv("D2K_SANDBOX", "require")
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on the PATH
    sandbox.probe.cache_clear()
    try:
        with pytest.raises(errors.EvaluatorError) as info:
            run([get_task("silu-and-mul")], lambda _t: EXPERT, RunOptions(command="check", smoke=True, interpret=True))
    finally:
        sandbox.probe.cache_clear()
    assert info.value.code == errors.INFRA_SANDBOX and "not installed" in str(info.value)


def test_require_through_the_cli_exits_2(tmp_path):
    env = {**__import__("os").environ, "D2K_SANDBOX": "require", "PATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "evaluator", "check", str(EXPERT), "--task", "silu-and-mul",
                           "--interpret", "--quiet"], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2
    assert "sandbox-unavailable" in proc.stderr and "D2K_SANDBOX=require" in proc.stderr


def test_unknown_setting_is_an_error(monkeypatch):
    monkeypatch.setenv("D2K_SANDBOX", "maybe")
    with pytest.raises(errors.EvaluatorError, match="D2K_SANDBOX must be one of"):
        sandbox.decide()
    monkeypatch.setenv("D2K_SANDBOX", "auto")
    monkeypatch.setenv("D2K_SANDBOX_UNSHARE", "net,bogus")
    with pytest.raises(errors.EvaluatorError, match="unknown namespace"):
        sandbox.namespaces()


def test_the_probe_runs_a_workers_own_command_line(tmp_path, monkeypatch):
    """A bubblewrap that starts but refuses a flag workers need (``--size`` before 0.7, or a
    setuid install) fails the probe, so ``require`` refuses the run instead of every worker
    failing as if the kernel had crashed."""
    fake = tmp_path / "bwrap"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do [ "$a" = "--size" ] && { echo "bwrap: Unknown option --size" >&2; '
                    'exit 1; }; done\nexit 0\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{__import__('os').environ['PATH']}")
    monkeypatch.setenv("D2K_SANDBOX", "require")
    sandbox.probe.cache_clear()
    try:
        ok, why = sandbox.probe()
        with pytest.raises(errors.EvaluatorError, match="Unknown option --size"):
            sandbox.decide()
    finally:
        sandbox.probe.cache_clear()
    assert not ok and "--size" in why


def test_require_refuses_a_sandbox_without_network_or_pid_isolation(monkeypatch):
    monkeypatch.setenv("D2K_SANDBOX", "require")
    monkeypatch.setenv("D2K_SANDBOX_UNSHARE", "user,ipc,uts")
    with pytest.raises(errors.EvaluatorError, match="leaves out the net and pid namespaces") as info:
        sandbox.decide()
    assert info.value.code == errors.INFRA_SANDBOX
    monkeypatch.setenv("D2K_SANDBOX_UNSHARE", ",")  # parses as nothing: every namespace dropped
    with pytest.raises(errors.EvaluatorError, match="leaves out"):
        sandbox.decide()


@needs_sandbox
def test_a_partial_sandbox_is_recorded_on_the_result(monkeypatch):
    monkeypatch.setenv("D2K_SANDBOX", "auto")
    monkeypatch.setenv("D2K_SANDBOX_UNSHARE", "user,ipc,pid,net,cgroup")
    sandbox.probe.cache_clear()
    try:
        sandboxed, note = sandbox.decide()
    finally:
        sandbox.probe.cache_clear()
    assert sandboxed and note == "the sandbox ran without the uts namespace(s) (D2K_SANDBOX_UNSHARE)"


@pytest.mark.interpreter
def test_off_runs_without_the_sandbox_and_says_so(monkeypatch):
    monkeypatch.setenv("D2K_SANDBOX", "off")
    (task,) = run([get_task("silu-and-mul")], lambda _t: EXPERT,
                  RunOptions(command="check", smoke=True, interpret=True, workloads=["S1"])).tasks
    assert task.status == "correct"
    assert any(f.kind == "sandbox" and "D2K_SANDBOX=off" in f.message for f in task.findings)


def test_host_cache_directories_stay_outside():
    """A worker host that points Inductor or Triton at a cache of its own (scripts/device_round.sh
    does) must not hand that path to the sandbox, where it is read-only and a torch import that
    tries to create it fails every kernel (seen on the H200)."""
    host = {"TORCHINDUCTOR_CACHE_DIR": "/srv/cache/inductor", "TRITON_CACHE_DIR": "/srv/cache/triton",
            "TORCHINDUCTOR_FX_GRAPH_CACHE": "1", "CUDA_VISIBLE_DEVICES": "0", "SECRET_KEY": "x"}
    env = sandbox.scrubbed_env(host, {"TRITON_CACHE_DIR": "/work/.triton"})
    assert env == {"TORCHINDUCTOR_FX_GRAPH_CACHE": "1", "CUDA_VISIBLE_DEVICES": "0",
                   "TRITON_CACHE_DIR": "/work/.triton"}
