"""Small template filters for the submission pages."""

from __future__ import annotations

from django import template

from evaluator.scoring import workload_speedup

register = template.Library()


@register.filter
def get(mapping: dict, key: object) -> object:
    return mapping.get(key) if mapping else None


@register.filter
def percent(value: float | None) -> str:
    return "" if value is None else f"{value:.1%}"


@register.filter
def capped_at_sol(speedup: float, sol_fraction: float) -> float:
    """The speedup the score counts for a workload measured faster than the speed of light:
    t_baseline / t_SOL (:func:`evaluator.scoring.workload_speedup`'s clamp), which is the measured
    speedup divided by its SOL fraction."""
    # In units of the baseline's time: the kernel took 1/speedup, the speed of light sol_fraction/speedup.
    return workload_speedup(1.0, 1.0 / speedup, sol_fraction / speedup)
