"""Set each profiled kernel's own GPU time (Nsight Compute) beside the bench's timing of the same
workload, so a results page can tell a kernel that is slow from a call that is slow.

The bench times a whole call between device events, with the L2 flushed and providers
interleaved; ncu times only the kernels. When the bench's median is far above the kernels' sum
while its minimum is close to it, the kernel is not what misses the roofline: the rest is time
the GPU spent outside the kernels during the timed window (launch gaps, clocks ramping up after
the idle time between interleaved calls). Both SOL fractions are printed for that reason.

Usage: python3 scripts/profile_vs_bench.py SUITE_JSON CSV_DIR > table.md
(CSV files are named <task>-<workload>.csv, as scripts/device_profile.sh writes them.)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ncu_summary  # noqa: E402


def kernel_us(csv_text: str) -> float:
    """Sum of the profiled launches' durations, in µs: the GPU time of one call's kernels."""
    return sum(ncu_summary.duration_us(*k["metrics"]["Duration"])  # type: ignore[index]
               for k in ncu_summary.parse(csv_text))


def rows(suite: dict, csv_dir: Path) -> list[dict[str, object]]:
    """One row per profiled (task, workload) that the suite also timed."""
    timed = {(t["slug"], w["name"]): w for t in suite["tasks"] for w in t["workloads"]}
    out = []
    for path in sorted(csv_dir.glob("*.csv")):
        slug, _, name = path.stem.rpartition("-")
        w = timed.get((slug, name))
        if w is None:
            continue
        cand = w["timings"]["candidate"]
        sol_us = w["sol_ms"] * 1e3
        k_us = kernel_us(path.read_text(errors="replace"))
        out.append({
            "task": slug, "workload": name, "kernels_us": k_us,
            "median_us": cand["median_ms"] * 1e3, "min_us": cand["min_ms"] * 1e3, "sol_us": sol_us,
            "sol_bench": sol_us / (cand["median_ms"] * 1e3), "sol_kernels": sol_us / k_us,
        })
    return out


def markdown(table: list[dict[str, object]]) -> str:
    head = ("| task | workload | kernels' GPU µs (ncu) | bench median µs | bench min µs | SOL µs "
            "| SOL fraction, bench median | SOL fraction, kernels alone |")
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for r in table:
        lines.append(
            f"| {r['task']} | {r['workload']} | {r['kernels_us']:,.1f} | {r['median_us']:,.1f} | {r['min_us']:,.1f} "
            f"| {r['sol_us']:,.1f} | {r['sol_bench']:.0%} | {r['sol_kernels']:.0%} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    suite_path, csv_dir = sys.argv[1:3]
    sys.stdout.write(markdown(rows(json.loads(Path(suite_path).read_text()), Path(csv_dir))))


if __name__ == "__main__":
    main()
