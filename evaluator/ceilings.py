"""Measure this GPU's ceilings: copy bandwidth and dense matmul rates (the profile's numbers).

Bandwidth counts bytes read plus bytes written of a large device-to-device copy; the rates are
8192^3 products on random data (never zeros: zeros run faster than real data), in bf16, fp16, fp8
e4m3 and int8. Medians of ``triton.testing.do_bench``.
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
    a = b = None
    torch.cuda.empty_cache()
    for name, product in _eight_bit_products(m, dev).items():
        try:
            ms = triton.testing.do_bench(product, warmup=50, rep=500, return_mode="median")
        except (RuntimeError, TypeError) as exc:  # a torch build without the kernel: say so, keep the rest
            out[f"{name}_error"] = f"{type(exc).__name__}: {exc}"[:300]
            continue
        out[f"{name}_matmul_TFLOPs"] = 2 * m**3 / (ms * 1e-3) / 1e12
    return out


def _eight_bit_products(m: int, dev: torch.device) -> dict:
    """The 8-bit dense rates the fp8 and int8 tasks' SOL needs, from torch's own kernels (cuBLASLt):
    an fp8 e4m3 product with unit scales and bf16 output (``torch._scaled_mm`` wants B column-major),
    and an int8 product with int32 output (``torch._int_mm``), B column-major for both: cuBLASLt's
    8-bit tensor-core kernels want that layout, and with a row-major B ``_int_mm`` measured
    132 TFLOP/s on an H100 (bf16: 692). Random values, as for the 16-bit rates."""
    a8 = torch.randn(m, m, device=dev).to(torch.float8_e4m3fn)
    b8 = torch.randn(m, m, device=dev).to(torch.float8_e4m3fn).t()
    one = torch.ones((), device=dev)
    ai = torch.randint(-128, 128, (m, m), dtype=torch.int8, device=dev)
    bi = torch.randint(-128, 128, (m, m), dtype=torch.int8, device=dev).t()
    return {
        "fp8e4m3": lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
        "int8": lambda: torch._int_mm(ai, bi),
    }
