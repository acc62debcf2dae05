"""The judge's handle on one worker process: start it sandboxed, hand it calls, watch it.

The judge talks to a worker over a private socket pair and shares memory with it through an
arena descriptor; nothing else is inherited. Every answer is parsed with the protocol's models
and must answer the call just sent, so a forged, extra or malformed line is the candidate's
failure (``eval:user:protocol``), never a result. The judge's own clock times each round trip.
A watcher thread reads the worker's process tree from ``/proc`` and kills it when it uses more
host memory than allowed or starts a process that is not one of Triton's compilers.

Who is at fault depends on whose code the worker runs: a failure of the candidate's worker is
the submission's (:class:`WorkerFailure`, ``eval:user:*``); a failure of a worker that runs only
our code (the baseline, torch.compile of it, the expert: ``WorkerConfig.ours``) never is
(:class:`TrustedWorkerFailure`, ``eval:infra:trusted-provider``), whatever it did.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import TypeAdapter, ValidationError

from evaluator import errors, procwatch, sandbox
from evaluator.protocol import (
    LINE_CAP,
    Call,
    Done,
    LoadError,
    OutputSpec,
    ProviderSpec,
    Ready,
    Release,
    Reply,
    Setup,
)
from evaluator.tails import TailBuffer, drain
from tasks.registry import REPO_ROOT

if TYPE_CHECKING:
    from evaluator.arena import Arena
    from evaluator.shm import ArenaHandle

OUTPUT_CAP = 64 * 1024  # bytes of a worker's stdout/stderr kept (the tail)
OUTPUT_LIMIT = 4 * 2**20  # bytes a worker may write to stdout or stderr before it is stopped
WATCH_INTERVAL_S = 0.2
_REPLY = TypeAdapter(Reply)


class WorkerFailure(errors.SubmissionError):
    """The worker died, hung, lied or misbehaved: the task fails with this code and reason."""


class TrustedWorkerFailure(errors.EvaluatorError):
    """A worker that runs only our code (``WorkerConfig.ours``) died, hung or misbehaved: never the
    submission's fault, whatever happened (the message says what)."""

    code = errors.INFRA_TRUSTED


@dataclass
class WorkerConfig:
    """How to start one worker."""

    label: str  # "candidate", "expert", "trusted": shown in reasons
    providers: dict[str, ProviderSpec]  # paths as seen outside the sandbox
    outputs: list[OutputSpec]
    inputs: list[str]
    device: str  # "cpu" | "cuda"
    interpret: bool
    sandboxed: bool
    untrusted: bool = True  # watch for spawned processes
    flush_bytes: int = 0
    spin_us: float = 0.0
    record_ops: bool = True
    forbidden_ops: list[str] = field(default_factory=list)  # refused on every call (evaluator.op_block)
    deadline: float = float("inf")  # time.monotonic() after which every wait gives up
    ours: bool = False  # runs only our code (baseline, torch.compile, expert): its failures are infra


class WorkerProcess:
    def __init__(self, cfg: WorkerConfig, arena: Arena | ArenaHandle):
        self.cfg = cfg
        self.arena: Arena = arena  # type: ignore[assignment]  # an ArenaHandle until the judge maps it
        self.seq = 0
        self.violation: tuple[str, str] | None = None  # (code, reason) found by the watcher
        self.out = TailBuffer(OUTPUT_CAP)
        self.err = TailBuffer(OUTPUT_CAP)
        self._stop = threading.Event()
        self._workdir = tempfile.TemporaryDirectory(prefix=f"d2k-{cfg.label}-")
        self._pending = b""
        self.proc: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self.ready = False  # its providers loaded (wait_ready returned)
        self._spawns = procwatch.SpawnWatch()

    # --- life cycle --------------------------------------------------------------------
    def start(self) -> list[str]:
        """Start the worker and load its providers; returns the providers it loaded.

        Raises :class:`WorkerFailure` with ``eval:user:import`` or ``eval:user:entry-point``
        when a provider does not load, and the usual death codes when the worker dies (a
        :class:`TrustedWorkerFailure` instead for a worker of ours, here and everywhere).
        """
        self.launch()
        return self.wait_ready()

    def launch(self) -> None:
        """Start the worker process and send it its set-up; does not wait for it (no torch needed)."""
        ours, theirs = socket.socketpair()
        self.sock = ours
        workdir = Path(self._workdir.name)
        env_extra = {"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1",
                     "PYTHONPATH": os.pathsep.join(p for p in [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")] if p)}
        if self.cfg.interpret:
            env_extra["TRITON_INTERPRET"] = "1"
        argv = [sys.executable, "-m", "evaluator.worker", str(theirs.fileno())]
        providers = {n: p.model_copy(update={"path": str(Path(p.path).resolve())}) for n, p in self.cfg.providers.items()}
        if not self.cfg.untrusted:
            # The trusted worker (baseline, torch.compile of it) runs no submitted code: it keeps
            # the host's caches (HOME, TMPDIR, Triton's and Inductor's cache directories), so
            # compilations warmed ahead of a run (scripts/warm_compile.py) are cache hits.
            keep = {k: v for k, v in os.environ.items()
                    if k in ("HOME", "TMPDIR", "TRITON_CACHE_DIR", "USER") or k.startswith("TORCHINDUCTOR_")}
            env = {**sandbox.scrubbed_env(os.environ, env_extra), **keep}
            cmd, cwd = argv, str(workdir)
        elif self.cfg.sandboxed:
            files = {}
            for name, spec in providers.items():
                if not spec.compile and not Path(spec.path).resolve().is_relative_to(REPO_ROOT / "tasks"):
                    files[name] = Path(spec.path).resolve()
                    providers[name] = spec.model_copy(update={"path": f"{sandbox.PROVIDER_DIR}/{name}.py"})
            env = sandbox.scrubbed_env(os.environ, {**env_extra, "HOME": sandbox.WORKDIR, "TMPDIR": "/tmp",
                                                    "TRITON_CACHE_DIR": f"{sandbox.WORKDIR}/.triton"})
            cmd = sandbox.bwrap_command(argv, workdir=workdir, code_dirs=[REPO_ROOT / "evaluator", REPO_ROOT / "tasks"],
                                        files=files, hidden=[REPO_ROOT / "references"],
                                        gpu=self.cfg.device == "cuda", env=env)
            env, cwd = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, str(workdir)
        else:
            (workdir / "tmp").mkdir()
            env = sandbox.scrubbed_env(os.environ, {**env_extra, "HOME": str(workdir), "TMPDIR": str(workdir / "tmp"),
                                                    "TRITON_CACHE_DIR": str(workdir / ".triton")})
            cmd, cwd = argv, str(workdir)
        limits = sandbox.Limits(data_bytes=sandbox.worker_memory_cap() if self.cfg.device == "cpu" else None)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     pass_fds=(theirs.fileno(), self.arena.fd), env=env, cwd=cwd,
                                     start_new_session=True, preexec_fn=limits.apply)
        theirs.close()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._drains = [drain(self.proc.stdout, self.out), drain(self.proc.stderr, self.err)]
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()
        setup = Setup(device=self.cfg.device, arena_fd=self.arena.fd, arena_size=self.arena.size,
                      providers=providers, outputs=self.cfg.outputs, inputs=self.cfg.inputs,
                      flush_bytes=self.cfg.flush_bytes, spin_us=self.cfg.spin_us, record_ops=self.cfg.record_ops,
                      forbidden_ops=self.cfg.forbidden_ops)
        self._send(setup.model_dump_json())

    def wait_ready(self) -> list[str]:
        """Wait until the worker has imported its providers (see :meth:`start`)."""
        reply = self._receive("loading its kernel")
        if isinstance(reply, LoadError):
            code = errors.USER_IMPORT if reply.kind == "import" else errors.USER_ENTRY_POINT
            prefix = "the kernel file does not import: " if reply.kind == "import" else ""
            raise self._failure(prefix + reply.message, code)
        if not isinstance(reply, Ready):
            raise self._protocol("expected the worker to report ready")
        self.ready = True
        return reply.providers

    def finish(self) -> None:
        """The last checks once the judge has what it needs: nothing arrived unasked on the
        channel, and no process the kernel started is still alive. Raises :class:`WorkerFailure`
        (:class:`TrustedWorkerFailure` for a worker of ours)."""
        if self.violation:
            raise self._failure(self.violation[1], self.violation[0])
        if self.sock is not None and self.proc is not None and self.proc.poll() is None:
            ready, _, _ = select.select([self.sock], [], [], 0.05)
            if ready or self._pending.strip():
                extra = self._pending
                with contextlib.suppress(OSError):
                    extra += self.sock.recv(65536, socket.MSG_DONTWAIT)
                if extra.strip():
                    raise self._protocol("a line arrived that answered no call")
        if self.cfg.untrusted and self.proc is not None:
            self._check_tree()
        if self.violation:
            raise self._failure(self.violation[1], self.violation[0])

    def close(self) -> None:
        self._stop.set()
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.sendall(b'{"op": "quit"}\n')
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=2)
            self._kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
            for t in self._drains:
                t.join(timeout=2)
        if self.sock is not None:
            self.sock.close()
        self._workdir.cleanup()

    def _kill(self) -> None:
        """SIGKILL the worker's process group and every descendant (a child may have left the group)."""
        if self.proc is None:
            return
        procs = procwatch.tree(self.proc.pid)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        for p in procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p.pid, signal.SIGKILL)

    # --- calls ---------------------------------------------------------------------------
    def call(self, call: Call, limit_s: float | None = None) -> tuple[Done, float]:
        """Send one call; returns the worker's answer and the judge's wall time of the round trip (ms).

        ``limit_s``: the longest this one call may take (the task's deadline still applies); past
        it the worker's process group is killed and the call fails as a timeout.
        """
        self.seq += 1
        call = call.model_copy(update={"seq": self.seq})
        text = call.model_dump_json()
        t0 = time.perf_counter()
        self._send(text)
        reply = self._receive(f"running a call of {call.provider}", limit_s)
        wall_ms = (time.perf_counter() - t0) * 1e3
        return self._check_answer(reply, call.seq), wall_ms

    def release(self) -> None:
        """Ask the worker to hand the device memory its caching allocator keeps back to the driver
        (``torch.cuda.empty_cache``), between workloads: workers take turns on one GPU, and the
        blocks one cached for a workload's temporaries are memory the others may need next."""
        self.seq += 1
        self._send(Release(seq=self.seq).model_dump_json())
        self._check_answer(self._receive("releasing its cached device memory"), self.seq)

    def _check_answer(self, reply: Reply, seq: int) -> Done:
        if not isinstance(reply, Done) or reply.seq != seq:
            raise self._protocol(f"the answer to call {seq} was {reply.model_dump_json()[:200]}")
        if self._pending.strip():
            raise self._protocol("more than one answer arrived for one call")
        if reply.tampered:
            raise self._failure(f"the {self.cfg.label}'s process replaced harness functions: "
                                + ", ".join(reply.tampered), errors.USER_TAMPER)
        return reply

    def _send(self, text: str) -> None:
        assert self.sock is not None
        try:
            self.sock.sendall(text.encode() + b"\n")
        except OSError:
            raise self._death("before taking a call") from None

    def _receive(self, doing: str, limit_s: float | None = None) -> Reply:
        assert self.sock is not None
        deadline = self.cfg.deadline
        if limit_s is not None and time.monotonic() + limit_s < deadline:
            deadline = time.monotonic() + limit_s
        else:
            limit_s = None  # the task's deadline comes first
        while b"\n" not in self._pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._kill()
                limit = (f"its limit of {limit_s:.0f} s per call" if limit_s is not None else
                         "the task's time limit (one limit for every provider and workload of the task)")
                raise self._failure(f"the {self.cfg.label} did not finish {doing} within {limit}; "
                                    "its process group was killed", errors.USER_TIMEOUT)
            ready, _, _ = select.select([self.sock], [], [], min(remaining, 0.5))
            if self.violation:
                raise self._failure(self.violation[1], self.violation[0])
            if not ready:
                continue
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                raise self._death(f"while {doing}")
            self._pending += chunk
            if len(self._pending) > LINE_CAP:
                raise self._protocol("an answer exceeded the size cap")
        line, self._pending = self._pending.split(b"\n", 1)
        try:
            return _REPLY.validate_json(line)
        except ValidationError as exc:
            raise self._protocol(f"an invalid answer: {exc.errors()[0]['msg']}") from None

    def _failure(self, message: str, code: str) -> WorkerFailure | TrustedWorkerFailure:
        """The exception for a failure of this worker: the submission's, or ours (``cfg.ours``)."""
        if self.cfg.ours:
            return TrustedWorkerFailure(message)  # the user code ``code`` does not apply to our worker
        return WorkerFailure(message, code=code)

    def _protocol(self, what: str) -> WorkerFailure | TrustedWorkerFailure:
        self._kill()
        return self._failure(f"the {self.cfg.label}'s process broke the result protocol ({what}): "
                             "a forged or corrupted answer", errors.USER_PROTOCOL)

    def _death(self, when: str) -> WorkerFailure | TrustedWorkerFailure:
        """Why the worker is gone: the watcher's finding, a signal, or an exit."""
        assert self.proc is not None
        try:
            rc = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._kill()
            rc = self.proc.wait()
        if self.violation:
            return self._failure(self.violation[1], self.violation[0])
        tail = " | ".join(self.err.text().strip().splitlines()[-3:])[-1500:]
        tail = f": {tail}" if tail else ""
        # bubblewrap reports a child killed by signal N as exit status 128 + N.
        sig = -rc if rc < 0 else (rc - 128 if self.cfg.sandboxed and 128 < rc < 160 else 0)
        if sig:
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
            code = errors.USER_HOST_OOM if sig == signal.SIGKILL and "MemoryError" in tail else errors.USER_CRASH
            return self._failure(f"the {self.cfg.label}'s process died with {name} {when}{tail}", code)
        if rc == 0:
            return self._failure(f"the {self.cfg.label}'s process exited cleanly {when}, without reporting a "
                             "result (an early exit is a failure, never a success)", errors.USER_EXIT)
        return self._failure(f"the {self.cfg.label}'s process exited with status {rc} {when}{tail}",
                             errors.USER_CRASH)

    # --- the watcher ---------------------------------------------------------------------
    def _watch(self) -> None:
        while not self._stop.wait(WATCH_INTERVAL_S):
            if self.proc is None or self.proc.poll() is not None or self._check_tree():
                return

    def _check_tree(self) -> bool:
        """One look at the worker's processes; records a violation and kills on finding one."""
        assert self.proc is not None
        procs = procwatch.tree(self.proc.pid)
        # Orphans a kernel double-forked are re-parented to the judge (a child subreaper).
        procs += [p for p in procwatch.tree(os.getpid()) if p.ppid == os.getpid() and _is_orphan(p)]
        used = procwatch.rss(procs)
        cap = sandbox.worker_memory_cap()
        flood = max(self.out.total, self.err.total)
        if flood > OUTPUT_LIMIT:
            self.violation = (errors.USER_OUTPUT_FLOOD, f"the {self.cfg.label} wrote {flood / 2**20:.0f} MiB to its "
                              f"output, over the {OUTPUT_LIMIT / 2**20:.0f} MiB limit; stopped")
        elif used > cap:
            self.violation = (errors.USER_HOST_OOM, f"the {self.cfg.label}'s processes used {used / 2**30:.1f} GiB "
                              f"of host memory, over the {cap / 2**30:.1f} GiB limit; killed")
        elif self.cfg.untrusted:
            me = procwatch.read(os.getpid())
            extra = self._spawns.check(procs, parents=[me] if me is not None else [])
            if extra:
                p = extra[0]
                self.violation = (errors.USER_PROCESS, f"the {self.cfg.label} started a process ({p.exe or '?'}: "
                                  f"{p.cmdline[:200]!r}); kernels may not start processes")
        if self.violation:
            self._kill()
            for p in procs:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(p.pid, signal.SIGKILL)
            return True
        return False


def _is_orphan(p: procwatch.Proc) -> bool:
    """A direct child of the judge that is neither a worker nor bubblewrap: a re-parented orphan."""
    name = Path(p.exe).name
    return name != "bwrap" and "evaluator.worker" not in p.cmdline


def become_subreaper() -> None:
    """Make this process the reaper of its descendants' orphans (Linux ``PR_SET_CHILD_SUBREAPER``),
    so a daemon a kernel double-forks stays in view and is killed with its worker."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)
