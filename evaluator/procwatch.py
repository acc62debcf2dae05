"""What a worker's process tree is doing, read from ``/proc`` by the judge (outside its reach).

Two watches: the resident memory of the whole tree (a kernel that eats host memory is killed
before the machine's OOM killer picks a victim), and processes the kernel started. Triton
legitimately runs its compilers (``ptxas``, and the C compiler once per cache for its launcher),
so those are allowed; anything else under the worker (a shell, a forked Python, a daemon) fails
the task. A process that lives shorter than the polling interval can slip past this watch, but
not past the PID namespace, which ends with the task.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

#: Executables a worker may start: Triton's assembler and the C toolchain it builds its launcher
#: with, under their distribution names (``x86_64-linux-gnu-gcc-13``, ``ld.bfd``, ...).
ALLOWED_EXE = re.compile(
    r"^(ptxas(-\w+)?|ldconfig(\.real)?|cc1|cc1plus|collect2|lto-wrapper|cuobjdump|nvdisasm|clang(-\d+)?"
    r"|((x86_64|aarch64)-linux-gnu-)?(gcc|g\+\+|cc|c\+\+|as|ld|ld\.bfd|ld\.gold)(-\d+)?)$")


#: Where the system's own tools live; an allowed tool anywhere else could be the kernel's.
SYSTEM_DIRS = ("/usr/bin/", "/bin/", "/usr/local/bin/", "/usr/sbin/", "/sbin/")


def allowed(exe: str) -> bool:
    """A compiler by name, and not one the kernel could have dropped in its working directory."""
    return bool(ALLOWED_EXE.match(Path(exe).name)) and not exe.startswith(("/sandbox/", "/dev/shm/"))


def allowed_call(p: Proc) -> bool:
    """A process a library legitimately starts with exactly these arguments.

    Python's ``platform.architecture()`` runs ``file -b <interpreter>`` when it cannot tell the
    interpreter's bitness otherwise; libraries on the GPU image call it while importing, inside the
    worker, and the full-namespace sandbox on the H200 rejected a legitimate expert for it. Only
    that exact call of the system's ``file`` on a Python interpreter is let through: ``file`` with
    any other argument (or a ``file`` the kernel brought) is still a started process. Likewise
    ``platform.processor()`` runs ``uname -p`` (caught in a CI run, in a worker that only imported
    the usual libraries): exactly that call of the system's ``uname`` is let through.
    """
    args = p.cmdline.split()
    name = Path(p.exe).name
    if name not in ("file", "uname") or p.exe not in {d + name for d in SYSTEM_DIRS} \
            or not args or Path(args[0]).name != name:
        return False
    if name == "uname":
        return args[1:] == ["-p"]
    return (len(args) == 3 and args[1] == "-b" and Path(args[2]).name.startswith("python")
            and args[2].startswith("/") and not args[2].startswith(("/sandbox/", "/dev/shm/")))


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    exe: str
    cmdline: str
    rss_bytes: int


def read(pid: int) -> Proc | None:
    base = Path("/proc") / str(pid)
    try:
        stat = (base / "stat").read_text()
        # The command name may hold spaces and parentheses: split after the last ')'.
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] in ("Z", "X"):
            return None  # exiting or a zombie: no longer running anything
        ppid, rss_pages = int(fields[1]), int(fields[21])
        try:
            exe = os.readlink(base / "exe")
        except OSError:
            exe = ""
        cmdline = (base / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except (OSError, ValueError, IndexError):
        return None
    return Proc(pid, ppid, exe, cmdline[:300], rss_pages * os.sysconf("SC_PAGE_SIZE"))


def tree(root: int) -> list[Proc]:
    """``root`` and all its descendants."""
    procs = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            p = read(int(entry))
            if p is not None:
                procs[p.pid] = p
    children: dict[int, list[int]] = {}
    for p in procs.values():
        children.setdefault(p.ppid, []).append(p.pid)
    out, stack = [], [root]
    while stack:
        pid = stack.pop()
        if pid in procs:
            out.append(procs[pid])
        stack.extend(children.get(pid, []))
    return out


def spawned(procs: list[Proc]) -> list[Proc]:
    """Processes in a worker's tree that are neither the sandbox (bubblewrap), the worker itself
    (the topmost Python running ``evaluator.worker``) nor one of Triton's compilers."""
    pids = {p.pid for p in procs}
    out = []
    for p in procs:
        if not p.exe and not p.cmdline:
            continue  # a process in the middle of exiting: its exe and arguments are gone
        name = Path(p.exe).name
        if name == "bwrap" or allowed(p.exe) or allowed_call(p):
            continue
        if "evaluator.worker" in p.cmdline and name.startswith("python"):
            parent_is_worker = any(q.pid == p.ppid and "evaluator.worker" in q.cmdline
                                   and Path(q.exe).name.startswith("python") for q in procs if q.pid in pids)
            if not parent_is_worker:
                continue  # the worker itself; a forked copy of it has the worker as its parent
        out.append(p)
    return out


def forked_copies(procs: list[Proc]) -> set[int]:
    """Children identical to their parent (same executable, same arguments): a process between
    fork and exec. Every legitimate ``subprocess`` call (Triton's ``ptxas``, ``platform``'s
    ``file``) passes through that state for microseconds, so one sight of it proves nothing."""
    by_pid = {p.pid: p for p in procs}
    return {p.pid for p in procs
            if (parent := by_pid.get(p.ppid)) is not None and (p.exe, p.cmdline) == (parent.exe, parent.cmdline)}


class SpawnWatch:
    """:func:`spawned` over successive looks at one tree, with transient states judged on time.

    Two states every legitimate short-lived child passes through are reported only when the same
    pid is still in one on the next look (the watcher's interval later):
    - a forked copy of its parent, between fork and exec: a fork that goes on running Python is
      caught, a fork on its way to exec is not (seen on the H200 and on a loaded two-core CI
      machine as a false "started a process" for ``platform.architecture()``);
    - a process with its executable but no arguments: one that is exiting, whose address space
      (and so its ``cmdline``) is gone before it becomes a zombie (seen in a CI run as "started a
      process (python3.11: '')"). A running process that blanks its own arguments to hide is
      still there, blank, on the next look.
    """

    def __init__(self) -> None:
        self._copies: set[int] = set()

    def check(self, procs: list[Proc], parents: list[Proc] = ()) -> list[Proc]:
        """``parents``: processes not judged here that may be a process's parent (the judge, whose
        own fork of a new worker is, until it execs, a child of the judge that is no worker)."""
        found = spawned(procs)
        transient = forked_copies([*procs, *parents]) | {p.pid for p in found if not p.cmdline}
        flagged = [p for p in found if p.pid not in transient or p.pid in self._copies]
        self._copies = {p.pid for p in found if p.pid in transient}
        return flagged


def rss(procs: list[Proc]) -> int:
    return sum(p.rss_bytes for p in procs)
