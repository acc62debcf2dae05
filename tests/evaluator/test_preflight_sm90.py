"""The sm_90 preflight (scripts/preflight_sm90.py): experts compiled for the H200 on a CPU-only
machine, through their GPU paths, with registers, spills and shared memory read from ptxas."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest
import torch

from tasks.registry import REPO_ROOT, get_task, load_tasks

SCRIPT = REPO_ROOT / "scripts/preflight_sm90.py"


def _script():
    spec = importlib.util.spec_from_file_location("preflight_sm90", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["preflight_sm90"] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def pf():
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.fail("this test compiles for sm_90: run it without TRITON_INTERPRET")
    return _script()


def test_an_expert_takes_its_gpu_path_and_compiles_for_sm90(pf) -> None:
    """fp8-blockwise-gemm's expert picks interpreter tiles on a CPU tensor (a 32x32 tile, no
    wgmma); through the preflight its tensors say cuda, so the Hopper tiles are built."""
    seen: dict = {}
    (report,) = pf.preflight(get_task("fp8-blockwise-gemm"), ["S1"], True, seen)
    assert report.error == "", report.error
    gemm = [b for b in report.builds if b.kernel == "_fp8_block_gemm_kernel"]
    assert gemm and all(b.registers > 0 and b.shared > 0 for b in gemm)
    assert any(b.wgmma for b in gemm), pf.markdown([report])
    assert "BM=32 BN=32" not in pf.markdown([report])  # the interpreter's tile is not what was built


def test_the_real_torch_and_triton_are_restored_afterwards(pf) -> None:
    run, bench, props = pf.JITFunction.run, pf.triton.testing.do_bench, torch.cuda.get_device_properties
    report = pf.WorkloadReport("t", "w")
    with pf.compile_only(report, {}):
        assert torch.cuda.is_available()
        x = torch.empty(4, device="cuda")
        assert x.device.type == "cuda" and x.is_cuda
    assert (pf.JITFunction.run, pf.triton.testing.do_bench, torch.cuda.get_device_properties) == (run, bench, props)
    assert torch.empty(4).device.type == "cpu"
    assert torch.cuda.is_available() is False


def test_a_kernel_that_does_not_compile_for_sm90_fails_the_run(pf, tmp_path) -> None:
    """A copy of silu-and-mul whose kernel fails a compile-time assertion: the workload stops
    with the compiler's error, and the run fails."""
    shutil.copytree(REPO_ROOT / "tasks/silu-and-mul", tmp_path / "tasks/silu-and-mul")
    shutil.copytree(REPO_ROOT / "guidance/silu-and-mul", tmp_path / "guidance/silu-and-mul")
    expert = tmp_path / "references/silu-and-mul/expert.py"
    expert.parent.mkdir(parents=True)
    source = (REPO_ROOT / "references/silu-and-mul/expert.py").read_text()
    body = "    rows = tl.program_id(0)"
    assert source.count(body) == 1
    expert.write_text(source.replace(body, '    tl.static_assert(BLOCK_D < 0, "planted")\n' + body))
    (report,) = pf.preflight(get_task("silu-and-mul", tmp_path), ["S1"], True, {})
    assert report.error.startswith("CompileTimeAssertionFailure") and report.builds == [], report.error
    assert pf.failures([report]) == [f"silu-and-mul S1: {report.error}"]


def test_a_kernel_with_no_build_that_fits_an_sm_fails_and_a_pruned_config_does_not(pf) -> None:
    def build(kernel: str, shared: int):
        return pf.Build(kernel, "", 8, 3, 128, 0, 0, shared, True, True)

    report = pf.WorkloadReport("attn", "W5", [build("_fwd", 295_936), build("_fwd", 173_056),
                                              build("_bwd", 300_000)])
    problems = pf.unplaceable([report])
    assert problems == ["attn W5: `_bwd` needs 300000 B of shared memory at least (an sm_90 block may use 232448)"]
    assert "**295936 (over)**" in pf.markdown([report])


def test_every_experts_gpu_path_compiles_for_sm90(tmp_path) -> None:
    """The interpreter never compiles the experts' GPU paths (TMA descriptors, wgmma tiles, the
    autotune and per-shape candidates): this does, for sm_90, on each task's first smoke workload,
    so a change that breaks a GPU-only path fails CI instead of a device call (about 2 min)."""
    md = tmp_path / "pf.md"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--workloads", "S1", "--md", str(md)],
                          capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [ln.split("|") for ln in md.read_text().splitlines() if ln.startswith("| ") and "| S1 |" in ln]
    compiled = {r[1].strip() for r in rows if "(none compiled)" not in r[3]}
    assert compiled == {t.slug for t in load_tasks().tasks}, proc.stderr[-3000:]


def test_dump_writes_each_builds_ir_for_reading(pf, tmp_path) -> None:
    """--dump: the TTGIR and PTX of every new build, named by kernel, so a miss's cause can be read
    on a CPU machine (w4a16's dequantized tile round-trips through shared memory before its dot)."""
    seen: dict = {}
    (report,) = pf.preflight(get_task("w4a16-awq-gemm"), ["S1"], True, seen, tmp_path)
    assert report.error == "", report.error
    ttgir = sorted(tmp_path.glob("_awq_gemm_kernel-*.ttgir"))
    assert ttgir and (tmp_path / ttgir[0].name.replace(".ttgir", ".ptx")).read_text().startswith("//")
    body = ttgir[0].read_text()
    assert "tt.dot" in body and "ttg.local_alloc" in body
