"""Hardware profiles: which GPU a run is on and the measured ceilings its SOL figures use.

Ceilings are measured on the device (``python -m evaluator ceilings``: a large device-to-device
copy for bandwidth, a large matrix product for the dense rate), never taken from a datasheet, and
each profile says when and how. Results are always keyed by profile; numbers from different GPUs
are never mixed. ``cpu-interpret`` judges correctness only and never yields a speed figure.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field

from evaluator.result import HardwareProfileRecord, WorkloadResult


@dataclass(frozen=True)
class HardwareProfile:
    name: str
    gpu_match: str  # substring of torch.cuda.get_device_name()
    memory_bandwidth_gbs: float  # bytes read + written per second, measured, in GB/s
    peak_tflops: dict[str, float] = field(default_factory=dict)  # per compute dtype, measured
    l2_flush_bytes: int = 256 * 2**20  # written before every timed call (L2 is 50-60 MiB)
    timing: bool = True
    provenance: str = ""

    def peak_flops(self, dtype: str) -> float | None:
        tf = self.peak_tflops.get(dtype)
        return tf * 1e12 if tf else None

    def sol_seconds(self, flops: float, nbytes: float, dtype: str) -> float | None:
        """max(FLOPs / peak rate of the dtype, bytes / bandwidth); None without ceilings."""
        if not self.timing or self.memory_bandwidth_gbs <= 0:
            return None
        t_mem = nbytes / (self.memory_bandwidth_gbs * 1e9)
        peak = self.peak_flops(dtype)
        t_math = flops / peak if peak else 0.0
        return max(t_mem, t_math)

    @classmethod
    def from_record(cls, rec: HardwareProfileRecord) -> HardwareProfile:
        """The profile a stored result was measured against (its ceilings, not today's)."""
        return cls(name=rec.name, gpu_match=rec.gpu_match, memory_bandwidth_gbs=rec.memory_bandwidth_gbs,
                   peak_tflops=dict(rec.peak_tflops), l2_flush_bytes=rec.l2_flush_bytes, timing=rec.timing,
                   provenance=rec.provenance)

    def record(self) -> HardwareProfileRecord:
        return HardwareProfileRecord(
            name=self.name, gpu_match=self.gpu_match, memory_bandwidth_gbs=self.memory_bandwidth_gbs,
            peak_tflops=dict(self.peak_tflops), l2_flush_bytes=self.l2_flush_bytes, timing=self.timing,
            provenance=self.provenance,
        )


PROFILES: dict[str, HardwareProfile] = {
    "h200": HardwareProfile(
        name="h200",
        gpu_match="H200",
        # `python -m evaluator ceilings` on the lent H200, 2026-12-02 (docs/results/h200-ceilings.json):
        # copy 4,273 GB/s, torch bf16 matmul 687 TFLOP/s, fp16 656. fp8/int8 from GPU-NOTES.md
        # (torch _scaled_mm 8192^3, same day); fp32 is the datasheet's non-tensor rate, unmeasured.
        memory_bandwidth_gbs=4273.0,
        peak_tflops={"bf16": 687.0, "fp16": 656.0, "fp32": 67.0, "fp8e4m3": 1220.0, "int8": 1220.0},
        provenance="measured on an H200 by `python -m evaluator ceilings`, 2026-12-02",
    ),
    "h100": HardwareProfile(
        name="h100",
        gpu_match="H100",
        # `python -m evaluator ceilings` on a lent H100 80GB HBM3, 2026-12-05 (docs/results/h100-ceilings.json):
        # copy 3,018 GB/s, torch bf16 matmul 683 TFLOP/s, fp16 663. A second card the same day
        # (docs/results/h100-runs/s11-ceilings.json) gave fp8 e4m3 1,274 TFLOP/s (torch._scaled_mm);
        # int8 is fp8's rate (see int8_at_fp8_rate): torch._int_mm measured 132 (row-major B) and
        # then 894-900 TFLOP/s (column-major B), and our own Triton int8 GEMM ran at 1,210 in the
        # same call as the 894 (docs/results/h100.md, session 13).
        # A run calibrated by scripts/device_env.sh uses its own card's figures for all of these.
        memory_bandwidth_gbs=3018.0,
        peak_tflops={"bf16": 683.0, "fp16": 663.0, "fp32": 55.0, "fp8e4m3": 1274.0, "int8": 1274.0},
        provenance="measured on an H100 by `python -m evaluator ceilings`, 2026-12-05 (int8 at fp8's rate)",
    ),
    "cpu-interpret": HardwareProfile(
        name="cpu-interpret", gpu_match="", memory_bandwidth_gbs=0.0, timing=False,
        provenance="Triton interpreter on the CPU: correctness only",
    ),
}


class UnknownHardware(LookupError):
    pass


CEILINGS_ENV = "D2K_CEILINGS"


#: Dtypes whose tensor cores run at least at the bf16 rate on every card we profile (Hopper: twice).
EIGHT_BIT = ("fp8e4m3", "int8")


def calibrated(profile: HardwareProfile, ceilings: dict) -> HardwareProfile:
    """``profile`` with the ceilings measured on this node by ``python -m evaluator ceilings``.

    An 8-bit rate measured below the bf16 rate is not adopted: the tensor cores run 8-bit at
    least as fast as bf16, so such a figure says torch's kernel took a slow path (``_int_mm`` at
    132 TFLOP/s on an H100, against 692 for bf16), and a ceiling that low would inflate every
    SOL fraction of that dtype. The profile's figure stays, and the provenance says why.
    """
    peaks = dict(profile.peak_tflops)
    refused = []
    for dtype in ("bf16", "fp16", "fp8e4m3", "int8"):
        if f"{dtype}_matmul_TFLOPs" in ceilings:
            measured = round(float(ceilings[f"{dtype}_matmul_TFLOPs"]), 1)
            if dtype in EIGHT_BIT and measured < peaks.get("bf16", 0.0):
                refused.append(f"{dtype}'s measured {measured:g} TFLOP/s, below bf16, was not adopted")
                continue
            peaks[dtype] = measured
    note = f"calibrated on this node: {ceilings.get('gpu', '?')}"
    if refused:
        note += " (" + "; ".join(refused) + ")"
    return int8_at_fp8_rate(dataclasses.replace(
        profile, memory_bandwidth_gbs=round(float(ceilings["copy_GBps"]), 1), peak_tflops=peaks,
        provenance=note,
    ))


def int8_at_fp8_rate(profile: HardwareProfile) -> HardwareProfile:
    """``profile`` with its int8 ceiling raised to its fp8 e4m3 one where it is lower.

    Every card we profile is a Hopper, whose tensor cores run int8 and fp8 products at one rate.
    torch's int8 product (``torch._int_mm``) is the slower library path on them: on an H100 it
    measured 894 TFLOP/s against 1,267 for fp8 in the same call, and the int8 task's own Triton
    expert then ran at 1,210, a SOL fraction of 135% against the measured figure. A ceiling a
    kernel can beat is no ceiling, so int8 takes the fp8 figure. The results page applies this to
    stored results too (:func:`evaluator.suite_report.reroof`), so a run calibrated before the
    rule reads the same as one calibrated after. Idempotent.
    """
    fp8, int8 = profile.peak_tflops.get("fp8e4m3"), profile.peak_tflops.get("int8")
    if not fp8 or (int8 is not None and int8 >= fp8):
        return profile
    was = f"{int8:g} TFLOP/s" if int8 else "none"
    return dataclasses.replace(
        profile, peak_tflops={**profile.peak_tflops, "int8": fp8},
        provenance=f"{profile.provenance}; int8 at fp8's rate (int8 measured: {was})",
    )


def detect(gpu_name: str | None) -> HardwareProfile:
    """The profile of the GPU named ``gpu_name`` (None: no GPU, the interpreter profile).

    If ``$D2K_CEILINGS`` names a JSON file written by ``python -m evaluator ceilings --output``
    on a GPU of the same name, its measured ceilings replace the profile's.
    """
    if not gpu_name:
        return PROFILES["cpu-interpret"]
    for profile in PROFILES.values():
        if profile.gpu_match and profile.gpu_match in gpu_name:
            path = os.environ.get(CEILINGS_ENV)
            if path:
                with open(path, encoding="utf-8") as fh:
                    ceilings = json.load(fh)
                if ceilings.get("gpu") == gpu_name:
                    return calibrated(profile, ceilings)
            return profile
    raise UnknownHardware(f"no hardware profile matches GPU {gpu_name!r}; add one to evaluator/hardware.py")


SOL_BREACH = "ran faster than the speed of light"


def set_sol(wr: WorkloadResult, profile: HardwareProfile, dtype: str) -> None:
    """Fill a timed workload's ``sol_ms`` and per-provider ``sol_fraction`` from its flops and bytes.

    The one place SOL fractions are made: the judge calls it on a fresh result, and the results
    page calls it again after a task's roofline formula was corrected, so an old measurement is
    re-expressed against today's formula without re-timing. A fraction above 1 is impossible and
    becomes a finding; findings of an earlier call are replaced, never duplicated.
    """
    wr.findings = [f for f in wr.findings if SOL_BREACH not in f]
    sol_s = profile.sol_seconds(wr.flops, wr.bytes, dtype)
    if sol_s is None:
        wr.sol_ms, wr.sol_fraction = None, {}
        return
    wr.sol_ms = sol_s * 1e3
    wr.sol_fraction = {p: wr.sol_ms / t.median_ms for p, t in wr.timings.items() if t.median_ms > 0}
    for p, frac in wr.sol_fraction.items():
        if frac > 1.0:
            wr.findings.append(f"{p} {SOL_BREACH} ({frac:.2f}x SOL): impossible, so not a score")
