"""A pre-call spin that holds every SM of the GPU, not one, and flushes the L2 while it does.

Why: the timing loop can queue a spin between the L2 flush and the start event, so the call's
launches wait behind it and the clocks are up when the timed work starts (the device's A/A,
docs/results/h100-spin-aa.md: two workers' medians of one kernel 0.9% apart with this hold, 5.9%
without it in the same call). ``torch.cuda._sleep`` spins one thread on one SM, so while it runs a candidate's
side-stream kernels have the other SMs, and work done there is hidden from the events and from
the judge's round-trip check. This kernel fills every SM's thread slots instead (blocks of 1,024
threads, as many per SM as the SM holds, each waiting on the global timer), so a side stream's
blocks cannot become resident until the spin is over, and then they compete with the timed work,
where the round-trip check sees them.

The same blocks write the L2 flush before they wait. A separate flush (``zero_``) would leave its
own window: its blocks retire one by one, and a side stream's blocks take the freed slots, so work
could hide for the flush's length (60-90 µs) before the spin even starts. Fused, there is no
moment between the previous call and the start event when an SM is free.

On the H100 (session 12) the A/A agreed as above and the cheat corpus, ``side_stream.py``
included, was caught with it on, so ``TimingConfig.spin_us`` (evaluator/timing_config.py) is
300 µs by default.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import globaltimer

#: Threads per block on the H100 and H200 (2,048 thread slots an SM): the most a block may
#: have, so the fewest blocks fill an SM. Other cards get the largest size that divides theirs.
THREADS = 1024
NUM_WARPS = THREADS // 32


@triton.jit
def _hold_kernel(flush_ptr, n_flush, ns, STEP: tl.constexpr):
    # Each block writes its share of the flush (zeros over a buffer larger than the L2), then
    # waits until ``ns`` nanoseconds of the global timer have passed since it started. No loads:
    # nothing it does brings data back into the L2.
    t0 = globaltimer()
    pid = tl.program_id(0).to(tl.int64)
    stride = tl.num_programs(0).to(tl.int64) * STEP
    offs = tl.arange(0, STEP)
    start = pid * STEP
    while start < n_flush:
        tl.store(flush_ptr + start + offs, 0.0, mask=start + offs < n_flush)
        start += stride
    t = globaltimer()
    while t - t0 < ns:
        t = globaltimer()


def layout_for(device: torch.device) -> tuple[int, int]:
    """(blocks, warps per block) that fill every thread slot of every SM of ``device``:
    264 blocks of 32 warps on an H100 or H200 (132 SMs of 2,048 threads)."""
    props = torch.cuda.get_device_properties(device)
    slots = props.max_threads_per_multi_processor
    threads = next((t for t in (THREADS, 512, 256, 128) if slots % t == 0), 32)
    return props.multi_processor_count * (slots // threads), threads // 32


def hold(flush: torch.Tensor, ns: int, blocks: int, num_warps: int = NUM_WARPS) -> None:
    """Queue the spin on the current stream: zero ``flush`` (fp32; it may be empty), four
    elements a thread per step, then wait until ``ns`` ns have passed, in ``blocks`` blocks of
    ``num_warps`` warps."""
    _hold_kernel[(blocks,)](flush, flush.numel(), ns, STEP=num_warps * 32 * 4, num_warps=num_warps)
