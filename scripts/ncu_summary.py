"""Turn Nsight Compute's per-kernel CSV (``ncu --import R --csv --page details``) into a markdown table.

One row per profiled kernel launch, with the figures that decide why a kernel misses its
roofline: how long it ran, how much of the DRAM and SM peaks it reached, how many waves its grid
makes on the GPU, and how occupancy was limited (registers, shared memory). scripts/device_profile.sh
calls it for every (task, workload) it profiles.

Usage: python3 scripts/ncu_summary.py TITLE CSV [CSV ...] > summary.md
"""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

#: (column title, ncu metric name); the metric's unit is taken from the CSV. A name ncu writes in
#: two sections with different units carries the one meant, as ``name [unit]``: "Memory
#: Throughput" is a percentage of peak in Speed Of Light and a rate (Gbyte/s) in Memory Workload
#: Analysis, and until session 29 the rate, written last, filled the "memory %" column.
COLUMNS = (
    ("µs", "Duration"),
    ("DRAM %", "DRAM Throughput"),
    ("memory %", "Memory Throughput [%]"),
    ("SM %", "Compute (SM) Throughput"),
    ("waves/SM", "Waves Per SM"),
    ("regs", "Registers Per Thread"),
    ("smem KiB", "Dynamic Shared Memory Per Block"),
    ("occupancy % (achieved / theoretical)", "Achieved Occupancy"),
    ("cycles/issue", "Warp Cycles Per Issued Instruction"),
)
_TIME_TO_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6}
_BYTES_TO_KIB = {"byte": 1 / 1024, "Kbyte": 1000 / 1024, "KB": 1000 / 1024, "Mbyte": 1e6 / 1024, "KiB": 1.0}


def duration_us(value: str, unit: str) -> float:
    """A kernel duration in µs; an unknown unit is an error, not a silent factor of one."""
    if unit not in _TIME_TO_US:
        raise ValueError(f"unknown duration unit {unit!r}")
    return (_number(value) or 0.0) * _TIME_TO_US[unit]


def _kib(value: str, unit: str) -> float:
    """A shared-memory size in KiB. ncu 2025 writes launch sizes per block ("Kbyte/block"),
    so the "/block" suffix is dropped before the unit is looked up; an unknown unit is an error
    rather than a silent zero (the first device profile printed 0 KiB for every kernel)."""
    base = unit.split("/")[0].strip()
    if base not in _BYTES_TO_KIB:
        raise ValueError(f"unknown shared-memory unit {unit!r}")
    return (_number(value) or 0.0) * _BYTES_TO_KIB[base]


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def parse(text: str) -> list[dict[str, object]]:
    """Kernels in launch order: name, grid, block and every metric as (value, unit).

    ncu may print its own ``==PROF==`` lines and the program's output before the CSV header;
    those are skipped.
    """
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        raise ValueError("no ncu CSV header (a line starting with \"ID\") in the input")
    kernels: dict[str, dict[str, object]] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        k = kernels.setdefault(row["ID"], {"name": row["Kernel Name"], "grid": row["Grid Size"],
                                           "block": row["Block Size"], "metrics": {}})
        value = (row["Metric Value"], row["Metric Unit"])
        k["metrics"][row["Metric Name"]] = value
        k["metrics"][f"{row['Metric Name']} [{row['Metric Unit']}]"] = value
    return list(kernels.values())


def _cell(metrics: dict[str, tuple[str, str]], name: str) -> str:
    if name not in metrics:
        return "-"
    value, unit = metrics[name]
    v = _number(value)
    if v is None:
        return value
    if name == "Duration":
        return f"{duration_us(value, unit):,.1f}"
    if name == "Dynamic Shared Memory Per Block":
        static = _kib(*metrics.get("Static Shared Memory Per Block", ("0", "byte")))
        return f"{_kib(value, unit) + static:,.1f}"
    if name == "Achieved Occupancy":
        theo = metrics.get("Theoretical Occupancy", ("-", ""))[0]
        return f"{v:.0f} / {theo}"
    return f"{v:,.1f}" if v != int(v) else f"{int(v):,}"


def markdown(title: str, kernels: list[dict[str, object]]) -> str:
    head = "| kernel | grid | block | " + " | ".join(c for c, _ in COLUMNS) + " |"
    rule = "|" + "---|" * (3 + len(COLUMNS))
    rows = []
    for k in kernels:
        name = str(k["name"]).split("(")[0][:48]
        cells = [_cell(k["metrics"], m) for _, m in COLUMNS]  # type: ignore[arg-type]
        rows.append(f"| `{name}` | {k['grid']} | {k['block']} | " + " | ".join(cells) + " |")
    return "\n".join([f"### {title}", "", head, rule, *rows, ""]) + "\n"


def main() -> None:
    title, *paths = sys.argv[1:]
    kernels = [k for p in paths for k in parse(Path(p).read_text(errors="replace"))]
    sys.stdout.write(markdown(title, kernels))


if __name__ == "__main__":
    main()
