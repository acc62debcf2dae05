"""Dense bf16 product rates on this GPU, by shape and by how they are timed.

Why: until session 32 ``python -m evaluator ceilings`` took the bf16 ceiling from one 8192^3
product timed back to back for half a second. On an H100 in session 32 the fused-linear-cross-entropy expert then ran
at 1.04x and 1.05x of "the speed of light" (W1, W3: 739 TFLOP/s against a 700 TFLOP/s
ceiling), which the engine reports as impossible. Either the ceiling's shape is not the card's
best, or its back-to-back timing ran hotter (and slower) than the bench's calls, which each
follow an L2 flush and a short hold. This measures both, with torch's own products (cuBLAS):

- ``sustained``: ``triton.testing.do_bench``'s median of calls back to back;
- ``burst``: single calls timed with CUDA events, each after 20 ms of idle, as isolated calls are
  (the median, and the best).

``evaluator.ceilings`` times them the same way (its ``back_to_back_ms`` and ``isolated_ms``) and,
since this probe, takes each rate as the better of the two at two sizes.

    python3 scripts/matmul_rate_probe.py [--json FILE] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evaluator.ceilings import back_to_back_ms, isolated_ms  # noqa: E402

#: (M, N, K): the ceilings' square product, a larger and a smaller one, and the three products of
#: FLCE W3 as one chunk (logits, dX, dW), whose real rates exceeded the ceiling.
SHAPES = [(8192, 8192, 8192), (16384, 16384, 16384), (4096, 4096, 4096), (2048, 128256, 8192),
          (2048, 8192, 128256), (128256, 8192, 2048), (8192, 8192, 32768)]


def _rates(m: int, n: int, k: int, dev: torch.device) -> dict[str, float]:
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
    c = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
    flop = 2 * m * n * k

    def run() -> None:
        torch.matmul(a, b, out=c)

    out = {"sustained": flop / (back_to_back_ms(run) * 1e-3) / 1e12}
    times = isolated_ms(run)
    out["burst"] = flop / (statistics.median(times) * 1e-3) / 1e12
    out["burst_best"] = flop / (min(times) * 1e-3) / 1e12
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    dev = torch.device("cuda")
    rows = []
    for m, n, k in SHAPES:
        r = _rates(m, n, k, dev)
        rows.append({"M": m, "N": n, "K": k, **r})
        print(f"{m} x {n} x {k}: " + ", ".join(f"{name} {v:.1f} TFLOP/s" for name, v in r.items()), flush=True)
        torch.cuda.empty_cache()
    gpu = torch.cuda.get_device_name(dev)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"gpu": gpu, "torch": torch.__version__, "rows": rows}, fh, indent=1)
    if args.markdown:
        lines = [f"# Dense bf16 product rates, {gpu} (torch {torch.__version__}, cuBLAS)", "",
                 "| M | N | K | sustained TFLOP/s | burst median | burst best |", "|---|---|---|---|---|---|"]
        lines += [f"| {r['M']} | {r['N']} | {r['K']} | {r['sustained']:.1f} | {r['burst']:.1f} | {r['burst_best']:.1f} |"
                  for r in rows]
        with open(args.markdown, "w") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
