"""A pre-call spin that holds every SM of the GPU, not one.

Why: the timing loop can queue a spin between the L2 flush and the start event, so the call's
launches wait behind it and the clocks are up when the timed work starts (the device's A/A,
docs/results/h100-spin-aa.md: two workers' medians of one kernel 0.9% apart with a spin, 14.5%
without). ``torch.cuda._sleep`` spins one thread on one SM, so while it runs a candidate's
side-stream kernels have the other SMs, and work done there is hidden from the events and from
the judge's round-trip check. This kernel fills every SM's thread slots instead (blocks of 1,024
threads, as many per SM as the SM holds, each waiting on the global timer), so a side stream's
blocks cannot become resident until the spin is over, and then they compete with the timed work,
where the round-trip check sees them.

Not yet run on a GPU: docs/engine.md ("The pre-call spin") lists what the device must show
before ``TimingConfig.spin_us`` may become the default.
"""

from __future__ import annotations

import torch
import triton
from triton.language.extra.cuda import globaltimer

#: Threads per block on the H100 and H200 (2,048 thread slots an SM): the most a block may
#: have, so the fewest blocks fill an SM. Other cards get the largest size that divides theirs.
THREADS = 1024
NUM_WARPS = THREADS // 32


@triton.jit
def _hold_kernel(ns):
    # Every warp waits until ``ns`` nanoseconds of the global timer have passed since its block
    # started; the loop has no memory traffic, so the flush before it keeps the L2 empty.
    t0 = globaltimer()
    t = t0
    while t - t0 < ns:
        t = globaltimer()


def layout_for(device: torch.device) -> tuple[int, int]:
    """(blocks, warps per block) that fill every thread slot of every SM of ``device``:
    264 blocks of 32 warps on an H100 or H200 (132 SMs of 2,048 threads)."""
    props = torch.cuda.get_device_properties(device)
    slots = props.max_threads_per_multi_processor
    threads = next((t for t in (THREADS, 512, 256, 128) if slots % t == 0), 32)
    return props.multi_processor_count * (slots // threads), threads // 32


def hold(ns: int, blocks: int, num_warps: int = NUM_WARPS) -> None:
    """Queue the spin on the current stream: ``blocks`` blocks of ``num_warps`` warps, ``ns`` ns."""
    _hold_kernel[(blocks,)](ns, num_warps=num_warps)
