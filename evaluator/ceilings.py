"""Measure this GPU's ceilings: copy bandwidth and dense matmul rates (the profile's numbers).

Bandwidth counts bytes read plus bytes written of a large device-to-device copy; the rates are
8192^3 products on random data (never zeros: zeros run faster than real data). Medians of
``triton.testing.do_bench``.
"""

from __future__ import annotations

import torch
import triton


def measure() -> dict[str, float | str]:
    if not torch.cuda.is_available():
        raise SystemExit("error: ceilings need a GPU")
    dev = torch.device("cuda")
    n = 2 * 2**30
    src = torch.randint(0, 255, (n,), dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda s=src, d=dst: d.copy_(s), warmup=50, rep=500, return_mode="median")
    out: dict[str, float | str] = {"gpu": torch.cuda.get_device_name(dev), "copy_GBps": 2 * n / (ms * 1e-3) / 1e9}
    src = dst = None
    torch.cuda.empty_cache()
    m = 8192
    for name, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        a = torch.randn(m, m, device=dev, dtype=dtype)
        b = torch.randn(m, m, device=dev, dtype=dtype)
        ms = triton.testing.do_bench(lambda a=a, b=b: a @ b, warmup=50, rep=500, return_mode="median")
        out[f"{name}_matmul_TFLOPs"] = 2 * m**3 / (ms * 1e-3) / 1e12
    return out
