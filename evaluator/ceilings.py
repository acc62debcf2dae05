"""Measure this GPU's ceilings: copy bandwidth and dense matmul rates (the profile's numbers).

Bandwidth counts bytes read plus bytes written of a large device-to-device copy. Each matmul rate
(bf16, fp16, fp8 e4m3, int8; random data, never zeros: zeros run faster than real data) is the
best of square products of ``RATE_SIZES``, each timed two ways: back to back
(``triton.testing.do_bench``'s median) and as isolated calls after an idle gap (the median of
``BURSTS`` calls timed by CUDA events), as the bench's calls are isolated.

Why the best of several: a ceiling is the speed of light, and a SOL fraction above 1 is reported
as impossible. Until session 32 the rates were one 8192^3 product timed back to back, and on an
H100 the fused-linear-cross-entropy expert then ran at 1.04-1.05x of it (739 TFLOP/s against
700). The same node's cuBLAS reached 766 TFLOP/s at 16384^3 and 767-774 at FLCE's own shapes when
timed as isolated calls, 700-737 back to back (``scripts/matmul_rate_probe.py``,
docs/results/h100-runs/s32-rate-probe.md): the back-to-back figure is the card running hot, and
the 8192^3 product is not its best shape.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
import triton

#: Sides of the square products each rate is the best of.
RATE_SIZES = (8192, 16384)
#: Isolated calls timed per product, each after ``IDLE_S`` of idle.
BURSTS, IDLE_S = 15, 0.02


def back_to_back_ms(product: Callable[[], object]) -> float:
    """Median ms of ``product`` called back to back (``do_bench``)."""
    return triton.testing.do_bench(product, warmup=50, rep=500, return_mode="median")


def isolated_ms(product: Callable[[], object]) -> list[float]:
    """Ms of ``BURSTS`` calls of ``product``, each after ``IDLE_S`` of idle, timed by CUDA events."""
    times = []
    for _ in range(BURSTS):
        torch.cuda.synchronize()
        time.sleep(IDLE_S)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        product()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


def _rate(product: Callable[[], object], flop: int) -> float:
    """TFLOP/s of ``product``: the better of its back-to-back median and its isolated-call median."""
    ms = min(back_to_back_ms(product), statistics.median(isolated_ms(product)))
    return flop / (ms * 1e-3) / 1e12


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
    errors: dict[str, str] = {}
    for m in RATE_SIZES:
        products: dict[str, Callable[[], object]] = {}
        for name, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
            a = torch.randn(m, m, device=dev, dtype=dtype)
            b = torch.randn(m, m, device=dev, dtype=dtype)
            products[name] = lambda a=a, b=b: a @ b
        products.update(_eight_bit_products(m, dev))
        for name, product in products.items():
            try:
                rate = _rate(product, 2 * m**3)
            except (RuntimeError, TypeError) as exc:  # a torch build without the kernel: say so, keep the rest
                errors[name] = f"{type(exc).__name__}: {exc}"[:300]
                continue
            out[f"{name}_matmul_TFLOPs"] = max(rate, float(out.get(f"{name}_matmul_TFLOPs", 0.0)))
        products.clear()
        torch.cuda.empty_cache()
    for name, error in errors.items():
        if f"{name}_matmul_TFLOPs" not in out:
            out[f"{name}_error"] = error
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
