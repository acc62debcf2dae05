"""Summary statistics of repeated timings, and the stopping rule that uses them."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile of already-sorted values."""
    if not sorted_values:
        raise ValueError("no values")
    pos = (len(sorted_values) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def rel_stderr(values: Sequence[float]) -> float:
    """Standard error of the mean divided by the median; inf with fewer than two values."""
    if len(values) < 2:
        return math.inf
    med = statistics.median(values)
    if med <= 0:
        return math.inf
    return statistics.stdev(values) / math.sqrt(len(values)) / med


def converged(values: Sequence[float], target: float, min_count: int) -> bool:
    return len(values) >= min_count and rel_stderr(values) < target
