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
