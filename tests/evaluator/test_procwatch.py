"""The process watch: what a worker may start, read from ``/proc`` (evaluator/procwatch.py).

The H200 run rejected a legitimate expert because a library called ``platform.architecture()``,
which runs ``file -b <interpreter>``. These pin what is let through and what is still a started
process, on the real ``/proc`` of a live process tree and on the classification itself.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from evaluator import procwatch
from evaluator.procwatch import Proc

WORKER = Proc(100, 1, "/usr/bin/python3.12", "/usr/bin/python3.12 -m evaluator.worker --job x", 1)


def _child(exe: str, cmdline: str, pid: int = 101) -> Proc:
    return Proc(pid, WORKER.pid, exe, cmdline, 1)


def test_platform_architecture_probe_is_allowed():
    probe = _child("/usr/bin/file", "file -b /usr/bin/python3.12")
    assert procwatch.spawned([WORKER, probe]) == []
    venv = _child("/usr/bin/file", "file -b /work/main/.venv/bin/python")
    assert procwatch.spawned([WORKER, venv]) == []


def test_file_with_other_arguments_or_from_elsewhere_is_a_process():
    cases = [
        _child("/usr/bin/file", "file -b /etc/shadow"),
        _child("/usr/bin/file", "file -b /usr/bin/python3.12 extra"),
        _child("/usr/bin/file", "file -b /sandbox/python"),
        _child("/sandbox/file", "file -b /usr/bin/python3.12"),
        _child("/dev/shm/file", "file -b /usr/bin/python3.12"),
        _child("/usr/bin/bash", "bash -c 'file -b /usr/bin/python3.12'"),
    ]
    for p in cases:
        assert procwatch.spawned([WORKER, p]) == [p], p


def test_compilers_pass_and_a_forked_worker_does_not():
    ptxas = _child("/usr/local/cuda/bin/ptxas", "ptxas -arch=sm_90a x.ptx")
    gcc = _child("/usr/bin/x86_64-linux-gnu-gcc-13", "gcc -shared main.c")
    fork = _child(WORKER.exe, WORKER.cmdline)
    assert procwatch.spawned([WORKER, ptxas, gcc, fork]) == [fork]


def test_the_real_tree_of_a_process_that_calls_platform_architecture(tmp_path):
    """A live child calls ``platform.architecture()``: its real ``file -b <interpreter>`` child,
    read from the real ``/proc``, is classified as allowed; a plain ``sleep`` child is not.

    ``file`` lives about a millisecond, so polling for it was a race (it failed CI). Here its
    magic database (``MAGIC``, which ``file`` inherits) is a FIFO with no writer: ``file`` blocks
    opening it, with its real executable and its real arguments, until the test kills it.
    """
    magic = tmp_path / "magic.mgc"
    os.mkfifo(magic)
    code = "import platform; platform.architecture()\n"
    proc = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "MAGIC": str(magic)})
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        files: list[Proc] = []
        deadline = time.time() + 30
        watch = procwatch.SpawnWatch()
        while time.time() < deadline and not files:
            tree = procwatch.tree(proc.pid)
            files = [p for p in tree if p.exe.endswith("/file")]
            # The interpreter is the root; only started processes are judged. A child caught
            # between fork and exec is a copy of it, forgiven on a first sight.
            assert [p for p in watch.check(tree) if p.pid != proc.pid] == []
            time.sleep(0.01)
        assert files, "no `file` child of platform.architecture() in 30 s"
        (blocked,) = files
        # The child's own interpreter path (a venv's ``python`` may resolve to its base's).
        assert blocked.cmdline.split()[:2] == ["file", "-b"] and blocked.exe in ("/usr/bin/file", "/bin/file")
        assert procwatch.allowed_call(blocked)
        started = [p for p in procwatch.tree(proc.pid) if p.pid != proc.pid]
        assert procwatch.spawned(started) == [] and watch.check(started) == []
        sleep_tree = procwatch.tree(sleeper.pid)
        assert [p.pid for p in procwatch.spawned(sleep_tree)] == [sleeper.pid]
        os.kill(blocked.pid, signal.SIGKILL)  # platform.architecture() falls back to its default
        assert proc.wait(timeout=30) == 0
    finally:
        for p in (proc, sleeper):
            p.kill()
            p.wait()


def test_a_forked_copy_is_reported_only_when_it_lasts():
    """Between fork and exec a child is a copy of its parent: once, forgiven; still a copy on the
    next look (a fork running Python), reported; a different copy pid starts over."""
    worker = procwatch.Proc(10, 1, "/usr/bin/python3", "python3 -m evaluator.worker 3", 1)
    copy = procwatch.Proc(11, 10, "/usr/bin/python3", "python3 -m evaluator.worker 3", 1)
    other_copy = procwatch.Proc(12, 10, "/usr/bin/python3", "python3 -m evaluator.worker 3", 1)
    sleeper = procwatch.Proc(13, 10, "/usr/bin/sleep", "sleep 30", 1)
    watch = procwatch.SpawnWatch()
    assert procwatch.forked_copies([worker, copy, sleeper]) == {11}
    assert watch.check([worker, copy]) == []
    assert watch.check([worker, copy]) == [copy]
    assert watch.check([worker, other_copy]) == []
    assert watch.check([worker, sleeper]) == [sleeper]  # anything else: at once


def test_an_exiting_child_is_reported_only_when_it_lasts():
    """An exiting process keeps its executable but loses its arguments (its memory is gone):
    forgiven on first sight (a CI run's false "started a process (python3.11: '')"); a process
    still blank on the next look, one that hid its arguments while running, is reported."""
    worker = procwatch.Proc(10, 1, "/usr/bin/python3", "python3 -m evaluator.worker 3", 1)
    exiting = procwatch.Proc(14, 10, "/usr/bin/python3", "", 1)
    watch = procwatch.SpawnWatch()
    assert procwatch.spawned([worker, exiting]) == [exiting]  # a started process by itself
    assert watch.check([worker, exiting]) == []
    assert watch.check([worker]) == []  # it exited
    assert watch.check([worker, exiting]) == []
    assert watch.check([worker, exiting]) == [exiting]  # still there, still blank


def test_uname_p_is_the_only_uname_let_through():
    """``platform.processor()`` runs ``uname -p``; any other ``uname``, or one from elsewhere, is not."""
    ok = Proc(20, 10, "/usr/bin/uname", "uname -p", 1)
    assert procwatch.allowed_call(ok)
    for bad in (Proc(21, 10, "/usr/bin/uname", "uname -a", 1), Proc(22, 10, "/sandbox/work/uname", "uname -p", 1),
                Proc(23, 10, "/usr/bin/uname", "uname -p -a", 1)):
        assert not procwatch.allowed_call(bad), bad


def test_the_judges_own_fork_of_a_worker_is_not_an_orphan_on_first_sight():
    """The judge forks to start a worker; until the exec, that child is a copy of the judge and is
    collected with the re-parented orphans. Given the judge as a possible parent, it is forgiven
    once, and reported if it is still a copy on the next look."""
    judge = Proc(5, 1, "/usr/bin/python3", "python3 -m evaluator.child", 1)
    forking = Proc(6, 5, "/usr/bin/python3", "python3 -m evaluator.child", 1)
    watch = procwatch.SpawnWatch()
    assert watch.check([WORKER, forking], parents=[judge]) == []
    assert watch.check([WORKER, forking], parents=[judge]) == [forking]
    assert procwatch.SpawnWatch().check([WORKER, forking]) == [forking]  # without the judge: at once
