"""Sizing and creating the shared arena's host memory, without importing torch.

The judge creates the candidate's arena and starts its worker before it imports torch itself,
so that the two imports (about two seconds each) overlap; that needs this much without torch.
"""

from __future__ import annotations

import math
import os

ALIGN = 256  # bytes; every tensor in the arena starts on this boundary


def round_size(nbytes: int) -> int:
    """Arena sizes are whole 2 MiB pages (the CUDA granularity; harmless on the CPU)."""
    page = 2 << 20
    return max(page, math.ceil(nbytes / page) * page)


def set_bytes(sizes: dict[str, int]) -> int:
    """Arena bytes of one set of a workload's inputs and outputs (``Task.nbytes``), aligned."""
    return sum(sizes.values()) + ALIGN * (len(sizes) + 1)


def rotation_sets(most: int, one_set: int, pool_bytes: int) -> int:
    """How many input sets a worker rotates through for timing: the fewest, up to ``most``, whose
    bytes together reach ``pool_bytes``.

    The rotation is there so that a call does not find its inputs in the L2 cache, or at the
    addresses of the call before; a pool larger than the L2 (60 MB on the H200) does that, so a
    workload whose one set is already that large keeps one copy, not two of gigabytes in every
    worker's arena (and the judge flushes the L2 before every timed call anyway).
    """
    return max(1, min(most, math.ceil(pool_bytes / max(one_set, 1))))


def host_memfd(size: int) -> int:
    """An anonymous shared-memory file of ``size`` bytes, to be mapped by the judge and a worker."""
    fd = os.memfd_create("d2k-arena", 0)
    os.ftruncate(fd, size)
    return fd


class ArenaHandle:
    """An arena not mapped yet: what a worker needs to start (its descriptor and size)."""

    def __init__(self, fd: int, size: int):
        self.fd = fd
        self.size = size
