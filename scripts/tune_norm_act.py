# ruff: noqa: B023 - the closures run inside the loop iteration that defines them
"""Sweep the launch configurations of the T15 and T16 expert kernels on the GPU.

Prints, per workload, the median time of each configuration under two L2 flushes (writing a
256 MiB buffer, reading one) so the choice in each expert's launch table and the engine's flush
are both backed by one measurement. Run on the device: ``python3 scripts/tune_norm_act.py``.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import statistics
import sys

import torch
import triton


def load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def bench(fn, reset, flush_mode: str, reps: int = 60) -> float:
    buf = torch.empty(256 * 2**20 // 4, dtype=torch.float32, device="cuda")
    times = []
    for i in range(reps + 5):
        reset()
        if flush_mode == "write":
            buf.zero_()
        else:
            buf.sum()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        if i >= 5:
            times.append(s.elapsed_time(e))
    return statistics.median(times) * 1e3


def main() -> None:
    out = {}
    rms = load("references/fused-add-rmsnorm/expert.py", "rms")
    silu = load("references/silu-and-mul/expert.py", "silu")
    bw = float(sys.argv[1]) if len(sys.argv) > 1 else 4273.0
    for T, H in ((16384, 4096), (8192, 8192), (16384, 7168)):
        x0 = torch.randn(T, H, device="cuda", dtype=torch.bfloat16)
        r0 = torch.randn(T, H, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(H, device="cuda", dtype=torch.bfloat16)
        x, r = x0.clone(), r0.clone()
        block = triton.next_power_of_2(H)
        nbytes = 8 * T * H + 2 * H

        def reset():
            x.copy_(x0)
            r.copy_(r0)

        for rows, warps in itertools.product((1, 2, 4), (4, 8, 16, 32)):
            if rows * block // (warps * 32) < 4 or rows * block // (warps * 32) > 64:
                continue

            def fn(rows=rows, warps=warps):
                rms._fused_add_rmsnorm_fwd_kernel[(triton.cdiv(T, rows),)](
                    x, r, w, T, H, x.stride(0), r.stride(0), 1e-5, ROWS=rows, BLOCK_H=block, num_warps=warps)
            for mode in ("write", "read"):
                us = bench(fn, reset, mode)
                key = f"T15 T={T} H={H} rows={rows} warps={warps} flush={mode}"
                out[key] = us
                print(f"{key}: {us:.1f} us, {nbytes / us / 1e3 / bw:.1%} of copy")
    for T, d in ((16384, 14336), (8192, 28672), (131072, 768)):
        x = torch.randn(T, 2 * d, device="cuda", dtype=torch.bfloat16)
        o = torch.empty(T, d, device="cuda", dtype=torch.bfloat16)
        nbytes = 6 * T * d
        for block_d, rows, warps in itertools.product((256, 512, 1024, 2048, 4096), (1, 2, 4, 8, 16, 32), (4, 8, 16)):
            per_thread = rows * block_d // (warps * 32)
            if d % block_d and block_d < d or per_thread < 4 or per_thread > 32:
                continue

            def fn(block_d=block_d, rows=rows, warps=warps):
                silu._silu_and_mul_fwd_kernel[(triton.cdiv(T, rows), triton.cdiv(d, block_d))](
                    x, o, T, d, x.stride(0), o.stride(0), ROWS=rows, BLOCK_D=block_d, num_warps=warps)
            for mode in ("write", "read"):
                us = bench(fn, lambda: None, mode)
                key = f"T16 T={T} d={d} block_d={block_d} rows={rows} warps={warps} flush={mode}"
                out[key] = us
                print(f"{key}: {us:.1f} us, {nbytes / us / 1e3 / bw:.1%} of copy")
    with open(os.path.join(os.environ.get("OUT", "."), "tune.json"), "w") as fh:
        json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
