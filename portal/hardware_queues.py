"""Which hardware profiles a deployment evaluates on, and the Celery queue of each.

Read once by the settings from ``D2K_HARDWARE_PROFILES``. A profile must exist in
:data:`evaluator.hardware.PROFILES` (its measured ceilings make its SOL fractions); its queue is
``gpu.<profile>``, the queue ``ops.gpu_workers`` starts a node's workers on, and ``cpu.interpret``
for the interpreter. Naming a profile here is what opens uploads for it, so list only profiles that
have workers.
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from evaluator.hardware import PROFILES


def queue_of(profile: str) -> str:
    return "cpu.interpret" if profile == "cpu-interpret" else f"gpu.{profile}"


def hardware_queues(spec: str) -> dict[str, str]:
    """``"h200,h100"`` -> ``{"h200": "gpu.h200", "h100": "gpu.h100"}``; refuses an unknown profile."""
    names = list(dict.fromkeys(n.strip() for n in spec.split(",") if n.strip()))
    unknown = [n for n in names if n not in PROFILES]
    if not names or unknown:
        raise ImproperlyConfigured(f"D2K_HARDWARE_PROFILES={spec!r}: "
                                   + (f"no profile {', '.join(map(repr, unknown))}; " if unknown else "no profile; ")
                                   + f"known: {', '.join(sorted(PROFILES))}")
    return {n: queue_of(n) for n in names}
