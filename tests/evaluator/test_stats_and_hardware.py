"""Timing statistics, the stopping rule, hardware profiles and SOL time."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from evaluator import hardware, stats

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_quantiles_interpolate():
    values = [1.0, 2.0, 3.0, 4.0]
    assert stats.quantile(values, 0.5) == 2.5
    assert stats.quantile(values, 0.25) == 1.75
    assert stats.quantile([7.0], 0.75) == 7.0
    with pytest.raises(ValueError):
        stats.quantile([], 0.5)


def test_relative_standard_error_and_stopping_rule():
    assert stats.rel_stderr([1.0]) == math.inf
    tight = [100.0 + (i % 3) * 0.1 for i in range(30)]
    loose = [100.0 + (i % 2) * 40 for i in range(30)]
    assert stats.rel_stderr(tight) < 0.005 < stats.rel_stderr(loose)
    assert stats.converged(tight, 0.005, 20)
    assert not stats.converged(tight[:10], 0.005, 20)  # the floor on the count holds
    assert not stats.converged(loose, 0.005, 20)


def test_sol_is_the_larger_of_memory_and_math_time():
    h200 = hardware.PROFILES["h200"]
    bw = h200.memory_bandwidth_gbs * 1e9
    assert h200.sol_seconds(0, 1e9, "bf16") == pytest.approx(1e9 / bw)
    flops = 1e15
    assert h200.sol_seconds(flops, 1.0, "bf16") == pytest.approx(flops / (h200.peak_tflops["bf16"] * 1e12))
    assert hardware.PROFILES["cpu-interpret"].sol_seconds(1e9, 1e9, "bf16") is None


def test_detect_by_gpu_name_and_calibration(tmp_path, monkeypatch):
    assert hardware.detect(None).name == "cpu-interpret"
    assert hardware.detect("NVIDIA H200").name == "h200"
    with pytest.raises(hardware.UnknownHardware):
        hardware.detect("Some Other GPU")
    path = tmp_path / "ceilings.json"
    path.write_text(json.dumps({"gpu": "NVIDIA H200", "copy_GBps": 4273.1, "bf16_matmul_TFLOPs": 686.7}))
    monkeypatch.setenv(hardware.CEILINGS_ENV, str(path))
    calibrated = hardware.detect("NVIDIA H200")
    assert calibrated.memory_bandwidth_gbs == 4273.1 and calibrated.peak_tflops["bf16"] == 686.7
    assert "calibrated" in calibrated.provenance
    assert calibrated.peak_tflops["fp8e4m3"] == hardware.PROFILES["h200"].peak_tflops["fp8e4m3"]  # not measured
    path.write_text(json.dumps({"gpu": "NVIDIA H100 80GB HBM3", "copy_GBps": 3018.3, "bf16_matmul_TFLOPs": 683.2,
                                "fp8e4m3_matmul_TFLOPs": 1301.04, "int8_matmul_TFLOPs": 1402.96}))
    h100 = hardware.detect("NVIDIA H100 80GB HBM3")
    assert h100.peak_tflops["fp8e4m3"] == 1301.0 and h100.peak_tflops["int8"] == 1403.0  # the 8-bit rates too
    # The H100's own ceilings file of session 11: torch._int_mm took a slow path (132 TFLOP/s,
    # under bf16's 692). That figure is refused, the profile's stays, and the provenance says so.
    path.write_text((REPO_ROOT / "docs/results/h100-runs/s11-ceilings.json").read_text())
    slow = hardware.detect("NVIDIA H100 80GB HBM3")
    assert slow.peak_tflops["int8"] == hardware.PROFILES["h100"].peak_tflops["int8"]
    assert slow.peak_tflops["fp8e4m3"] == 1274.0 and slow.peak_tflops["bf16"] == 692.0
    assert "int8's measured 132 TFLOP/s, below bf16, was not adopted" in slow.provenance
    # Session 13's: torch._int_mm at 894 TFLOP/s, above bf16 but under fp8's 1,267, while the
    # task's Triton int8 GEMM ran at 1,210. The tensor cores run both at one rate: int8 takes fp8's.
    path.write_text((REPO_ROOT / "docs/results/h100-runs/s13-ceilings.json").read_text())
    lifted = hardware.detect("NVIDIA H100 80GB HBM3")
    assert lifted.peak_tflops["int8"] == lifted.peak_tflops["fp8e4m3"] == 1267.5
    assert "int8 at fp8's rate (int8 measured: 893.8 TFLOP/s)" in lifted.provenance
    assert hardware.int8_at_fp8_rate(lifted) is lifted  # idempotent: nothing to raise twice
    path.write_text(json.dumps({"gpu": "NVIDIA H100 80GB HBM3", "copy_GBps": 1.0}))
    assert hardware.detect("NVIDIA H200").memory_bandwidth_gbs == hardware.PROFILES["h200"].memory_bandwidth_gbs
