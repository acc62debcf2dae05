"""Compile every expert's kernels for the H200 (sm_90) on a machine without a GPU, at the real
workloads' shapes, and report registers, spills, shared memory and whether ``tl.dot`` became
wgmma.

Why: device time is 30 minutes a session, and a call that finds a kernel which does not compile
for sm_90 (or needs more shared memory than an SM has) loses its whole warm-up. Triton compiles
for any target without a driver; only the launch needs one. This script runs each expert's
Python on CPU tensors of the workload's real shapes with Triton's launches replaced by
compile-only calls for an sm_90 target, so the constexpr specializations (tile sizes picked per
shape, every autotune config, every per-shape candidate) are the ones the device will build.

What it cannot see: the kernels do not run, so their outputs are uninitialised memory. Host code
that reads a kernel's output to size the next launch (``.item()``) sees garbage and may fail;
such a workload is reported with the error and the kernels compiled before it (no expert does
this today). Timing picks (``do_bench``) return a constant, so every candidate is compiled but
none is chosen by speed.

    python scripts/preflight_sm90.py [--tasks slug,slug] [--workloads W1,W2] [--smoke] [--md FILE] [--dump DIR]

Exits 1 when a workload stops with an error (a kernel that does not compile among them), or a
kernel has no build that fits in an sm_90 SM's shared memory.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

if os.environ.get("TRITON_INTERPRET") == "1":
    sys.exit("preflight_sm90 compiles for the GPU: unset TRITON_INTERPRET")

import torch  # noqa: E402
import triton  # noqa: E402
import triton.testing  # noqa: E402
from torch.overrides import TorchFunctionMode  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.backends.driver import DriverBase  # noqa: E402
from triton.runtime import driver as driver_config  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from evaluator.inputs import make_inputs  # noqa: E402
from evaluator.modules import load_module  # noqa: E402
from tasks.registry import Task, load_tasks  # noqa: E402

#: The H200 as the kernels' host code may ask for it (Triton's driver utils and torch.cuda).
SM_COUNT = 132
#: Shared memory one block may use on sm_90 (227 KiB, the opt-in maximum).
MAX_SHARED = 232_448
TARGET = GPUTarget("cuda", 90, 32)
REGISTERS_LINE = re.compile(r"Used (\d+) registers")
SPILL_LINE = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


@dataclass
class Build:
    """One compiled specialization of one kernel."""

    kernel: str
    constexprs: str
    num_warps: int
    num_stages: int
    registers: int
    spill_stores: int
    spill_loads: int
    shared: int
    wgmma: bool
    dots: bool

    @property
    def fits(self) -> bool:
        """Whether an SM can hold it; an autotune config that does not is pruned at run time."""
        return self.shared <= MAX_SHARED


@dataclass
class WorkloadReport:
    task: str
    workload: str
    builds: list[Build] = field(default_factory=list)
    launches: int = 0
    error: str = ""
    seconds: float = 0.0


class _Sm90Driver(DriverBase):
    """Just enough of a CUDA driver for Triton to compile for an H200 and for host code to size
    its grids; it launches nothing."""

    def __init__(self) -> None:
        self.utils = SimpleNamespace(get_device_properties=lambda device: {
            "multiprocessor_count": SM_COUNT, "max_shared_mem": MAX_SHARED, "max_num_regs": 65536,
            "warpSize": 32, "sm_clock_rate": 1_980_000, "mem_clock_rate": 3_201_000, "mem_bus_width": 6144})

    @classmethod
    def is_active(cls) -> bool:
        return False

    def map_python_to_cpp_type(self, ty: str) -> str:
        return ty

    def get_current_target(self) -> GPUTarget:
        return TARGET

    def get_active_torch_device(self) -> torch.device:
        return torch.device("cpu")

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_benchmarker(self) -> Any:
        return _constant_bench

    def get_device_interface(self) -> Any:
        return SimpleNamespace(synchronize=lambda: None)


def _constant_bench(fn: Any, *args: Any, quantiles: Any = None, **kwargs: Any) -> Any:
    """Calls ``fn`` once (which compiles it) and reports a constant time."""
    fn()
    return [1.0] * len(quantiles) if quantiles else 1.0


def _ptxas_usage(ptx: str, arch: str = "sm_90a") -> tuple[int, int, int]:
    """(registers, spill store bytes, spill load bytes) from ``ptxas -v`` on the kernel's PTX."""
    from triton.backends.nvidia.compiler import get_ptxas

    ptxas = get_ptxas(90).path
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "k.ptx"
        src.write_text(ptx)
        log = subprocess.run([ptxas, "-v", f"--gpu-name={arch}", str(src), "-o", str(Path(d) / "k.cubin")],
                             capture_output=True, text=True, check=True).stderr
    regs = max((int(m) for m in REGISTERS_LINE.findall(log)), default=0)
    spills = [(int(a), int(b)) for a, b in SPILL_LINE.findall(log)]
    return regs, sum(a for a, _ in spills), sum(b for _, b in spills)


def _constexprs_of(kernel: Any, fn: JITFunction) -> str:
    """The compiled specialization's scalar constexprs, by parameter name."""
    constexprs = getattr(getattr(kernel, "src", None), "constants", None) or {}
    names = [p.name for p in fn.params]
    parts = []
    for path, value in sorted(constexprs.items(), key=lambda kv: kv[0]):
        name = names[path[0]] if path and path[0] < len(names) else str(path)
        if isinstance(value, (int, float, bool, str)) and not name.startswith("_"):
            parts.append(f"{name}={value}")
    return " ".join(parts)


class FakeCudaTensor(torch.Tensor):
    """A CPU tensor that says it is on ``cuda:0``, so the experts take their GPU paths (most
    branch on ``device.type``: the CPU path is the interpreter's, with other tiles)."""

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return _CUDA

    @property
    def is_cuda(self) -> bool:  # type: ignore[override]
        return True


_CUDA = torch.device("cuda", 0)


def _on_cpu(device: Any) -> Any:
    if isinstance(device, (str, torch.device)) and torch.device(device).type == "cuda":
        return torch.device("cpu")
    return device


def _as_fake(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and not isinstance(value, FakeCudaTensor):
        return value.as_subclass(FakeCudaTensor)
    if isinstance(value, (tuple, list)):
        return type(value)(_as_fake(v) for v in value)
    return value


class _CudaOnCpu(TorchFunctionMode):
    """Every torch call made while it is active: a ``cuda`` device becomes the CPU, and every
    tensor that comes out says it is on ``cuda:0``."""

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = dict(kwargs or {})
        if "device" in kwargs:
            kwargs["device"] = _on_cpu(kwargs["device"])
        name = getattr(func, "__name__", "")
        if name == "cuda":
            return args[0]
        if name == "to":
            args = tuple(_on_cpu(a) for a in args)
        with torch._C.DisableTorchFunctionSubclass():
            return _as_fake(func(*args, **kwargs))


#: torch.cuda as the experts' host code uses it, answered as an H200 would.
_CUDA_STUBS: dict[str, Any] = {
    "is_available": lambda: True,
    "current_device": lambda: 0,
    "device_count": lambda: 1,
    "synchronize": lambda *a, **k: None,
    "get_device_capability": lambda *a, **k: (9, 0),
    "current_stream": lambda *a, **k: SimpleNamespace(cuda_stream=0, synchronize=lambda: None),
    "device": lambda *a, **k: nullcontext(),
    "get_device_properties": lambda *a, **k: SimpleNamespace(
        multi_processor_count=SM_COUNT, total_memory=141 * 2**30, name="NVIDIA H200 (preflight)",
        major=9, minor=0, shared_memory_per_block_optin=MAX_SHARED),
}


@contextmanager
def compile_only(report: WorkloadReport, seen: dict[tuple[str, str], Build], dump: Path | None = None) -> Iterator[None]:
    """Triton launches become compile-only calls for sm_90 while the block runs. With ``dump``, each
    new build's TTGIR and PTX are written there too, named by kernel and build hash (what to read
    for the layout conversions and shared-memory round trips a kernel pays for)."""
    original_run = JITFunction.run
    original_bench = triton.testing.do_bench
    original_cuda = {name: getattr(torch.cuda, name) for name in _CUDA_STUBS}

    def run(self: JITFunction, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        kernel = original_run(self, *args, grid=grid, warmup=True, **kwargs)
        report.launches += 1
        if kernel is None:
            return None
        if hasattr(kernel, "result"):
            kernel = kernel.result()
        key = (self._fn_name, kernel.hash)
        if key not in seen:
            regs, stores, loads = _ptxas_usage(kernel.asm["ptx"])
            ptx = kernel.asm["ptx"]
            if dump is not None:
                stem = f"{self._fn_name.rsplit('.', 1)[-1]}-{kernel.hash[:10]}"
                (dump / f"{stem}.ttgir").write_text(kernel.asm["ttgir"])
                (dump / f"{stem}.ptx").write_text(ptx)
            seen[key] = Build(
                kernel=self._fn_name.rsplit(".", 1)[-1], constexprs=_constexprs_of(kernel, self),
                num_warps=kernel.metadata.num_warps, num_stages=kernel.metadata.num_stages,
                registers=regs, spill_stores=stores, spill_loads=loads, shared=kernel.metadata.shared,
                wgmma="wgmma.mma_async" in ptx, dots=("mma." in ptx or "wgmma" in ptx))
        if seen[key] not in report.builds:
            report.builds.append(seen[key])
        return kernel

    previous_driver = driver_config._active  # not .active: that would probe for a real GPU
    driver_config.set_active(_Sm90Driver())
    JITFunction.run = run  # type: ignore[method-assign]
    triton.testing.do_bench = _constant_bench
    for name, stub in _CUDA_STUBS.items():
        setattr(torch.cuda, name, stub)
    try:
        with _CudaOnCpu():
            yield
    finally:
        JITFunction.run = original_run  # type: ignore[method-assign]
        triton.testing.do_bench = original_bench
        for name, original in original_cuda.items():
            setattr(torch.cuda, name, original)
        driver_config._active = previous_driver


def preflight(task: Task, workload_names: list[str] | None, smoke: bool,
              seen: dict[tuple[str, str], Build], dump: Path | None = None) -> list[WorkloadReport]:
    """Every workload of one task, compiled for sm_90."""
    baseline = load_module(task.baseline_path, f"_pf_baseline_{task.slug.replace('-', '_')}")
    expert = load_module(task.expert_path, f"_pf_expert_{task.slug.replace('-', '_')}")
    entry = getattr(expert, task.spec.entry_point)
    reports = []
    for w in task.workloads(smoke):
        if workload_names and w.name not in workload_names:
            continue
        report = WorkloadReport(task.slug, w.name)
        started = time.perf_counter()
        try:
            inputs = make_inputs(task, w.params, seed=0, device=torch.device("cpu"), baseline_module=baseline)
            with compile_only(report, seen, dump):
                entry(**{k: _as_fake(v) for k, v in inputs.items()})
            del inputs
        except Exception as exc:  # reported per workload; the next one still runs
            last = traceback.extract_tb(exc.__traceback__)[-1]
            report.error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]} ({Path(last.filename).name}:{last.lineno})"
        report.seconds = time.perf_counter() - started
        reports.append(report)
    return reports


def markdown(reports: list[WorkloadReport]) -> str:
    lines = ["Shared memory over the sm_90 limit is marked **(over)**: an autotune config that the device prunes.", "",
             "| task | workload | kernel | constexprs | warps | stages | regs | spill st/ld (B) | shared (B) | wgmma |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in reports:
        if not r.builds:
            lines.append(f"| {r.task} | {r.workload} | (none compiled) | | | | | | | |")
        for b in r.builds:
            mma = "yes" if b.wgmma else ("mma.sync" if b.dots else "no dot")
            shared = str(b.shared) if b.fits else f"**{b.shared} (over)**"
            lines.append(f"| {r.task} | {r.workload} | `{b.kernel}` | {b.constexprs} | {b.num_warps} | "
                         f"{b.num_stages} | {b.registers} | {b.spill_stores}/{b.spill_loads} | {shared} | {mma} |")
    errors = [r for r in reports if r.error]
    if errors:
        lines += ["", "Workloads whose host code stopped (kernels compiled before it are listed above):", ""]
        lines += [f"- {r.task} {r.workload}: {r.error}" for r in errors]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", default="", help="comma-separated slugs (default: every task)")
    ap.add_argument("--workloads", default="", help="comma-separated workload names")
    ap.add_argument("--smoke", action="store_true", help="the smoke workloads instead of the real ones")
    ap.add_argument("--md", type=Path, help="write the markdown table here too")
    ap.add_argument("--dump", type=Path, help="write every build's TTGIR and PTX into this folder")
    args = ap.parse_args(argv)
    if args.dump:
        args.dump.mkdir(parents=True, exist_ok=True)
    tasks = load_tasks(strict=True).tasks
    wanted = [s for s in args.tasks.split(",") if s]
    tasks = [t for t in tasks if not wanted or t.slug in wanted]
    seen: dict[tuple[str, str], Build] = {}
    reports: list[WorkloadReport] = []
    for task in tasks:
        for r in preflight(task, [w for w in args.workloads.split(",") if w] or None, args.smoke, seen, args.dump):
            reports.append(r)
            state = r.error or "ok"
            print(f"{r.task} {r.workload}: {len(r.builds)} builds, {r.launches} launches, "
                  f"{r.seconds:.1f} s: {state}", file=sys.stderr, flush=True)
    text = markdown(reports)
    print(text)
    if args.md:
        args.md.write_text(text)
    failed = failures(reports)
    for line in failed:
        print(f"FAIL {line}", file=sys.stderr)
    return 1 if failed else 0


def failures(reports: list[WorkloadReport]) -> list[str]:
    """What makes the exit status 1: a workload that stopped (a compile error among the causes),
    and a kernel the device could not place."""
    return [f"{r.task} {r.workload}: {r.error}" for r in reports if r.error] + unplaceable(reports)


def unplaceable(reports: list[WorkloadReport]) -> list[str]:
    """Kernels of a workload none of whose builds fits in an SM's shared memory: the device would
    fail them (one build over the limit among others is an autotune config that gets pruned)."""
    out = []
    for r in reports:
        for kernel in dict.fromkeys(b.kernel for b in r.builds):
            builds = [b for b in r.builds if b.kernel == kernel]
            if not any(b.fits for b in builds):
                out.append(f"{r.task} {r.workload}: `{kernel}` needs {min(b.shared for b in builds)} B of shared "
                           f"memory at least (an sm_90 block may use {MAX_SHARED})")
    return out


if __name__ == "__main__":
    raise SystemExit(main())
