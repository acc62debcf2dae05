"""The sandbox a worker runs in: bubblewrap namespaces, resource limits, a scrubbed environment.

EVALUATION.md (Sandbox): untrusted code runs under bubblewrap where it is available, with no
network, a read-only view of the Python environment and the task's public files (never
``references/``: an expert kernel judged as a provider is bound in explicitly, file by file),
a private tmpfs, the GPU device nodes only when a GPU is used, a new PID namespace and
``--die-with-parent``. Where bubblewrap is missing or does not work (no user namespaces), the
worker still gets rlimits, a fresh working directory, a scrubbed environment and its own
session, and the result says loudly that it ran unsandboxed; ``D2K_SANDBOX=require`` (the
production setting) refuses to run at all instead.

Settings (environment):
- ``D2K_SANDBOX``: ``auto`` (default: bubblewrap if it works, else a warning), ``require``
  (refuse without it), ``off`` (never; for measuring the sandbox's own overhead).
- ``D2K_SANDBOX_UNSHARE``: the namespaces to unshare, ``all`` (default) or a comma list of
  user, ipc, pid, net, uts, cgroup (an escape hatch for a machine whose driver needs one kept).
- ``D2K_WORKER_MEM_BYTES``: the host memory a worker may use (default: 16 GiB or 3/4 of RAM).
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from evaluator import errors

MODES = ("auto", "require", "off")
NAMESPACES = ("user", "ipc", "pid", "net", "uts", "cgroup")
#: Inside the sandbox: the worker's writable directory and where provider files are bound.
WORKDIR = "/sandbox/work"
PROVIDER_DIR = "/sandbox/providers"
TMP_BYTES = 1 << 30  # the private /tmp
WORK_BYTES = 2 << 30  # the private working directory (Triton's cache lives there)
#: Environment variables a worker inherits (by prefix); everything else (database URLs,
#: tokens, the D2K settings) stays outside.
ENV_PREFIXES = ("CUDA_", "NVIDIA_", "TRITON_", "TORCH_", "TORCHINDUCTOR_", "PYTORCH_", "NCCL_", "NVSHMEM_", "OMP_", "MKL_",
                "LD_LIBRARY_PATH", "PATH", "LANG", "LC_ALL", "PYTHONPATH")
_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "passwd", "group", "nsswitch.conf",
        "localtime", "hosts")
_SYSTEM_DIRS = ("/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/usr/local/nvidia", "/usr/local/cuda",
                "/opt")


@dataclass(frozen=True)
class Limits:
    """Resource limits of one worker (applied before exec, inherited through bubblewrap)."""

    cpu_s: int = 3600
    file_bytes: int = 2 << 30  # Triton's cache and a kernel's scratch files; a flood of writes stops here
    open_files: int = 4096
    processes: int = 4096  # counted per user; has no effect for root, so the judge also watches the tree
    data_bytes: int | None = None  # RLIMIT_DATA; set on the CPU only (the CUDA driver maps large regions)

    def apply(self) -> None:
        pairs = [(resource.RLIMIT_CORE, 0), (resource.RLIMIT_CPU, self.cpu_s),
                 (resource.RLIMIT_FSIZE, self.file_bytes), (resource.RLIMIT_NOFILE, self.open_files),
                 (resource.RLIMIT_NPROC, self.processes)]
        if self.data_bytes:
            pairs.append((resource.RLIMIT_DATA, self.data_bytes))
        for which, value in pairs:
            _, hard = resource.getrlimit(which)
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (value, value))


def worker_memory_cap() -> int:
    """Host memory one worker may use: ``D2K_WORKER_MEM_BYTES``, else min(16 GiB, 3/4 of RAM)."""
    if os.environ.get("D2K_WORKER_MEM_BYTES"):
        return int(os.environ["D2K_WORKER_MEM_BYTES"])
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        ram = 64 << 30
    return min(16 << 30, ram * 3 // 4)


def mode() -> str:
    value = os.environ.get("D2K_SANDBOX", "auto").strip().lower() or "auto"
    if value not in MODES:
        raise errors.EvaluatorError(f"D2K_SANDBOX must be one of {', '.join(MODES)}, not {value!r}",
                                    code=errors.INFRA_SANDBOX)
    return value


def namespaces() -> tuple[str, ...]:
    value = os.environ.get("D2K_SANDBOX_UNSHARE", "all").strip().lower()
    if value in ("", "all"):
        return NAMESPACES
    chosen = tuple(v.strip() for v in value.split(",") if v.strip())
    bad = set(chosen) - set(NAMESPACES)
    if bad:
        raise errors.EvaluatorError(f"D2K_SANDBOX_UNSHARE: unknown namespace(s) {', '.join(sorted(bad))}",
                                    code=errors.INFRA_SANDBOX)
    return chosen


#: Namespaces a required sandbox may not drop: without them a kernel reaches the network, or
#: sees and signals the host's processes (EVALUATION.md, Sandbox).
REQUIRED_NAMESPACES = ("net", "pid")


def dropped_namespaces() -> tuple[str, ...]:
    """The namespaces ``D2K_SANDBOX_UNSHARE`` leaves out, in ``NAMESPACES`` order."""
    chosen = set(namespaces())
    return tuple(ns for ns in NAMESPACES if ns not in chosen)


@functools.cache
def probe() -> tuple[bool, str]:
    """(works, why not): bubblewrap is installed and runs a worker's own command line here.

    The probe is :func:`bwrap_command` itself (every flag a worker gets: ``--size``,
    ``--cap-drop``, ``--new-session``, ``--remount-ro``, ``--clearenv``, the namespaces) starting
    this interpreter. A lighter probe passed where bubblewrap is too old for ``--size`` (before
    0.7) or installed setuid, and then every worker failed, which read as the kernel crashing.
    """
    if not shutil.which("bwrap"):
        return False, "bubblewrap (bwrap) is not installed"
    with tempfile.TemporaryDirectory(prefix="d2k-probe-") as tmp:
        cmd = bwrap_command([sys.executable, "-c", "pass"], workdir=Path(tmp), code_dirs=[], files={}, hidden=[],
                            gpu=False, env={})
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError) as exc:
            return False, f"bubblewrap did not start: {exc}"
    if proc.returncode != 0:
        return False, ("bubblewrap cannot run a worker's command line here (its namespaces, or a flag such as "
                       f"--size, which needs bubblewrap 0.7 and no setuid install): {proc.stderr.strip()[:300]}")
    return True, ""


def decide() -> tuple[bool, str]:
    """Whether workers run under bubblewrap, and the note for the result when they do not.

    Raises :class:`errors.EvaluatorError` (``eval:infra:sandbox-unavailable``) when the sandbox
    is required and does not work: the run must not go ahead unprotected.
    """
    chosen = mode()
    if chosen == "off":
        return False, "sandbox disabled (D2K_SANDBOX=off): the worker ran without bubblewrap"
    dropped = dropped_namespaces()
    if chosen == "require" and (missing := [ns for ns in REQUIRED_NAMESPACES if ns in dropped]):
        raise errors.EvaluatorError(
            f"the sandbox is required (D2K_SANDBOX=require), and D2K_SANDBOX_UNSHARE leaves out the "
            f"{' and '.join(missing)} namespace{'s' if len(missing) > 1 else ''}, which it needs",
            code=errors.INFRA_SANDBOX)
    ok, why = probe()
    if ok:
        # A partial sandbox is recorded on every result, so a moderator sees what it lacked.
        return True, (f"the sandbox ran without the {', '.join(dropped)} namespace(s) (D2K_SANDBOX_UNSHARE)"
                      if dropped else "")
    if chosen == "require":
        raise errors.EvaluatorError(f"the sandbox is required (D2K_SANDBOX=require) but {why}",
                                    code=errors.INFRA_SANDBOX)
    print(f"WARNING: {why}; kernels run WITHOUT the bubblewrap sandbox (rlimits and process isolation "
          "only). Set D2K_SANDBOX=require to refuse instead.", file=sys.stderr)
    return False, f"UNSANDBOXED: {why}; the worker ran with rlimits and a private working directory only"


def scrubbed_env(env: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    # Cache locations are host paths the sandbox cannot write (a read-only bind at best): a
    # torch import inside would fail creating them. The worker gets its own under its workdir.
    kept = {k: v for k, v in env.items() if k.startswith(ENV_PREFIXES) and not k.endswith("_CACHE_DIR")}
    kept.update(extra)
    return kept


def _python_roots() -> list[Path]:
    """Where the interpreter and its packages live (bound read-only)."""
    roots = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix),
             Path(sysconfig.get_paths()["purelib"]), Path(sysconfig.get_paths()["platlib"])}
    roots |= {Path(p) for p in sys.path if p and Path(p).is_dir()}
    roots.add(Path(sys.executable).resolve().parent)
    return sorted(roots)


def gpu_nodes() -> list[str]:
    dev = Path("/dev")
    return sorted(str(p) for p in dev.glob("nvidia*")) + ([str(dev / "nvidia-caps")] if (dev / "nvidia-caps").is_dir() else [])


def bwrap_command(argv: list[str], *, workdir: Path, code_dirs: Iterable[Path], files: Mapping[str, Path],
                  hidden: Iterable[Path], gpu: bool, env: Mapping[str, str]) -> list[str]:
    """The bubblewrap command line that runs ``argv`` as a sandboxed worker.

    ``code_dirs`` are bound read-only at their own paths (the engine and the task tree),
    ``files`` maps a provider name to a kernel file bound read-only at
    ``PROVIDER_DIR/<name>.py``, ``hidden`` are paths masked with an empty tmpfs even if a
    parent got bound (``references/``), and the writable ``WORKDIR`` is a private tmpfs
    (``workdir``, the host directory, is where an unsandboxed worker would write instead).
    """
    cmd = [shutil.which("bwrap") or "bwrap", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
           *[f"--unshare-{ns}" for ns in namespaces()], "--tmpfs", "/"]
    for d in _SYSTEM_DIRS:
        p = Path(d)
        if any(Path(parent) in p.parents for parent in _SYSTEM_DIRS):
            continue  # already visible through its parent's bind (/usr/local/cuda under /usr)
        if p.is_symlink():
            cmd += ["--symlink", os.readlink(p), d]
        elif p.is_dir():
            cmd += ["--ro-bind", d, d]
    for name in _ETC:
        p = Path("/etc") / name
        if p.exists():
            cmd += ["--ro-bind", str(p), str(p)]
    # Private scratch space, sized so that writing to it cannot eat the host's memory.
    cmd += ["--proc", "/proc", "--dev", "/dev", "--size", str(64 << 20), "--tmpfs", "/dev/shm",
            "--size", str(TMP_BYTES), "--tmpfs", "/tmp"]
    bound = [Path(d) for d in _SYSTEM_DIRS if Path(d).is_dir() and not Path(d).is_symlink()]
    code_dirs = [Path(d) for d in code_dirs]
    for root in [*_python_roots(), *code_dirs]:
        # A root that holds the engine's own tree (the repository, say) would expose more than
        # the code (references/, the portal's files): only the code directories are bound.
        if root not in code_dirs and any(c == root or root in c.parents for c in code_dirs):
            continue
        if any(b == root or b in root.parents for b in bound):
            continue
        cmd += ["--ro-bind", str(root), str(root)]
        bound.append(root)
    for path in hidden:
        if Path(path).exists():
            cmd += ["--tmpfs", str(path)]
    if gpu:
        for node in gpu_nodes():
            cmd += ["--dev-bind", node, node]
        cmd += ["--ro-bind", "/sys", "/sys"]  # the CUDA driver reads the PCI topology
    # The working directory is a sized tmpfs too: nothing a kernel writes reaches the host's
    # disk, and the writes are bounded (``workdir`` on the host stays empty).
    cmd += ["--size", str(WORK_BYTES), "--tmpfs", WORKDIR]
    for name, src in files.items():
        cmd += ["--ro-bind", str(src), f"{PROVIDER_DIR}/{name}.py"]
    cmd += ["--remount-ro", "/", "--chdir", WORKDIR, "--clearenv"]
    for k, v in env.items():
        cmd += ["--setenv", k, v]
    return [*cmd, "--", *argv]
