"""The profiling scripts the next device call runs: the ncu CSV summary and the one-call driver."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

from tasks.registry import REPO_ROOT

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
          '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


def _summary():
    spec = importlib.util.spec_from_file_location("ncu_summary", REPO_ROOT / "scripts/ncu_summary.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _row(kid: str, kernel: str, metric: str, unit: str, value: str) -> str:
    return (f'"{kid}","9","python3","h","{kernel}(int, float *)","1","7","(128, 1, 1)","(56, 4, 1)","0","9.0",'
            f'"S","{metric}","{unit}","{value}"')


def test_summary_reads_ncu_details_after_its_preamble_one_row_per_launch() -> None:
    text = "\n".join([
        "==PROF== Connected to process 9", "a line the program printed", HEADER,
        _row("0", "_gemm", "Duration", "msecond", "1.25"),
        _row("0", "_gemm", "DRAM Throughput", "%", "16.04"),
        _row("0", "_gemm", "Registers Per Thread", "register/thread", "168"),
        _row("0", "_gemm", "Dynamic Shared Memory Per Block", "Kbyte", "65.54"),
        _row("0", "_gemm", "Static Shared Memory Per Block", "byte", "0"),
        _row("0", "_gemm", "Achieved Occupancy", "%", "12.1"),
        _row("0", "_gemm", "Theoretical Occupancy", "%", "12.5"),
        _row("1", "_reduce", "Duration", "nsecond", "4,480"),
    ])
    mod = _summary()
    kernels = mod.parse(text)
    assert [k["name"] for k in kernels] == ["_gemm(int, float *)", "_reduce(int, float *)"]
    page = mod.markdown("fp8-blockwise-gemm W4 (expert)", kernels)
    gemm = next(ln for ln in page.splitlines() if ln.startswith("| `_gemm`"))
    cells = [c.strip() for c in gemm.strip("|").split("|")]
    assert cells[:5] == ["`_gemm`", "(56, 4, 1)", "(128, 1, 1)", "1,250.0", "16.0"]
    assert "| 168 | 64 | 12 / 12.5 |" in gemm  # 65.54 kB of shared memory is 64 KiB
    assert "| `_reduce` | (56, 4, 1) | (128, 1, 1) | 4.5 | - |" in page


def test_summary_refuses_input_without_the_csv_header() -> None:
    try:
        _summary().parse("==PROF== No kernels were profiled.\n")
    except ValueError as exc:
        assert "no ncu CSV header" in str(exc)
    else:
        raise AssertionError("parse accepted input with no CSV")


def _profile(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    return subprocess.run([sys.executable, str(REPO_ROOT / "scripts/profile_kernel.py"), *args, "--device", "cpu",
                           "--warmup", "1"], capture_output=True, text=True, env=env, timeout=300)


def test_profile_driver_runs_the_expert_on_a_workload_without_a_gpu() -> None:
    done = _profile("silu-and-mul", "S1")
    assert done.returncode == 0, done.stderr
    assert "silu-and-mul S1 expert: one profiled call, 1 output(s)" in done.stdout
    bad = _profile("silu-and-mul", "W9")
    assert bad.returncode != 0 and "has no workload 'W9' (it has W1, W2, W3, S1" in bad.stderr
