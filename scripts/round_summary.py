"""Summarize a GPU round (``scripts/device_round.sh``): one table of every task and workload.

Reads the per-task ``check-<slug>.json`` and ``bench-<slug>.json`` results of a round's folder
and writes a Markdown summary (correctness on the real workloads, eager / torch.compile / expert
times, speedups and SOL fractions), plus ``bench-merged.json``: one RunResult holding every
benched task, for docs/results/.

Usage: python scripts/round_summary.py ROUND_DIR [--out summary.md]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evaluator.result import RunResult  # noqa: E402


def _load(path: Path) -> RunResult | None:
    try:
        return RunResult.model_validate(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None


def _us(ms: float | None) -> str:
    return "-" if ms is None else f"{ms * 1e3:,.1f}"


def summarize(folder: Path) -> tuple[str, RunResult | None]:
    lines = ["| task | check | workload | eager µs | compile µs | expert µs | vs eager | vs compile | SOL | note |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    slugs = sorted({p.stem.split("-", 1)[1] for p in folder.glob("*.log") if p.stem.startswith(("check-", "bench-"))})
    merged: RunResult | None = None
    for slug in slugs:
        check = _load(folder / f"check-{slug}.json")
        bench = _load(folder / f"bench-{slug}.json")
        if check is None:
            log = (folder / f"check-{slug}.log")
            tail = log.read_text(errors="replace")[-300:].replace("\n", " ").replace("|", "/") if log.exists() else ""
            lines.append(f"| {slug} | no result | | | | | | | | {tail} |")
        else:
            t = check.tasks[0]
            bad = [f"{w.name}: {next((tr.rule + ' ' + tr.output + ' ' + tr.message for tr in w.trials if not tr.passed), '')}"
                   for w in t.workloads if not w.correct]
            note = (t.reason or "; ".join(bad))[:400].replace("|", "/").replace("\n", " ")
            lines.append(f"| {slug} | {t.status} | | | | | | | | {note} |")
        if bench is None:
            continue
        merged = bench if merged is None else merged.model_copy(update={"tasks": merged.tasks + bench.tasks})
        t = bench.tasks[0]
        if t.status != "correct":
            lines.append(f"| {slug} | bench {t.status} | | | | | | | | {t.reason[:300]} |")
        for w in t.workloads:
            tm = {p: v.median_ms for p, v in w.timings.items()}
            base, comp, exp = tm.get("baseline"), tm.get("compile"), tm.get("candidate")
            vs_c = f"{comp / exp:.2f}x" if comp and exp else "-"
            sol = w.sol_fraction.get("candidate")
            lines.append(f"| {slug} | {'ok' if w.correct else 'WRONG'} | {w.name} | {_us(base)} | {_us(comp)} | "
                         f"{_us(exp)} | {w.speedup.get('candidate', 0):.2f}x | {vs_c} | "
                         f"{'-' if sol is None else f'{sol:.1%}'} | {' '.join(w.findings)[:200]} |")
    return "\n".join(lines) + "\n", merged


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("folder", type=Path)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    text, merged = summarize(args.folder)
    (args.out or args.folder / "summary.md").write_text(text)
    if merged is not None:
        (args.folder / "bench-merged.json").write_text(merged.model_dump_json(indent=1))
    print(text)


if __name__ == "__main__":
    main()
