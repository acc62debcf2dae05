"""One worker per GPU, each pinned by CUDA_VISIBLE_DEVICES; the supervisor restarts a dead one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ops.gpu_workers import Gpu, WorkerPlan, plan, queue_for

H200 = "NVIDIA H200"


def test_one_pinned_worker_per_gpu_on_its_profile_queue() -> None:
    plans = plan([Gpu("0", H200), Gpu("1", H200)], host="node7", base_env={"PATH": "/bin"})
    assert [p.node for p in plans] == ["gpu0@node7", "gpu1@node7"]
    assert [p.env["CUDA_VISIBLE_DEVICES"] for p in plans] == ["0", "1"]
    for p in plans:
        assert p.queue == "gpu.h200"
        argv = " ".join(p.argv)
        assert "-Q gpu.h200" in argv and "--concurrency 1" in argv and "--prefetch-multiplier 1" in argv
        assert f"-n {p.node}" in argv and p.env["PATH"] == "/bin"


def test_unknown_gpu_duplicates_and_nothing_are_refused() -> None:
    with pytest.raises(SystemExit, match="matches no hardware profile"):
        queue_for(Gpu("0", "Some Future GPU"))
    with pytest.raises(SystemExit, match="listed twice"):
        plan([Gpu("0", H200), Gpu("0", H200)])
    with pytest.raises(SystemExit, match="no GPU"):
        plan([])


def test_supervisor_restarts_a_dead_worker_and_stops_all_on_term(tmp_path: Path) -> None:
    """Real processes stand in for workers: each appends its pin to a file, one dies at once."""
    log = tmp_path / "starts.txt"
    script = ("import os, sys, time\n"
              f"open({str(log)!r}, 'a').write(os.environ['CUDA_VISIBLE_DEVICES'] + '\\n')\n"
              "sys.exit(3) if os.environ['CUDA_VISIBLE_DEVICES'] == '1' and "
              f"open({str(log)!r}).read().count('1\\n') == 1 else time.sleep(60)\n")
    plans = [WorkerPlan(Gpu(i, H200), "gpu.h200", f"gpu{i}@t", [sys.executable, "-c", script],
                        {**os.environ, "CUDA_VISIBLE_DEVICES": i}) for i in ("0", "1")]
    runner = subprocess.Popen([sys.executable, "-c", (
        "import pickle, sys\nfrom ops.gpu_workers import Supervisor\n"
        "sys.exit(Supervisor(pickle.loads(sys.stdin.buffer.read())).run())")],
        stdin=subprocess.PIPE, cwd=Path(__file__).resolve().parents[2])
    import pickle

    runner.stdin.write(pickle.dumps(plans))
    runner.stdin.close()
    deadline = time.time() + 30
    while time.time() < deadline and (not log.exists() or log.read_text().count("1\n") < 2):
        time.sleep(0.2)
    starts = log.read_text().split()
    assert starts.count("0") == 1 and starts.count("1") == 2  # GPU 1's worker died and came back, pinned
    runner.send_signal(signal.SIGTERM)
    assert runner.wait(timeout=30) == 0
