"""One check for every planted-bug kernel: the real engine, the smoke workloads, the CPU interpreter.

A planted kernel is a task's expert kernel with one classic mistake. The engine must reject it as
a wrong answer on *every* secret seed, so each case names the failures it may legitimately produce
(which workload, rule and output fail first can depend on the drawn inputs: a kernel reading the
wrong page gives NaN on one seed and a finite wrong value on another) and the test accepts
exactly those. A bug caught only on some seeds is a gap in the task's inputs, not in the test:
fix the generator until it is caught every time.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from evaluator.runner import RunOptions, run
from tasks.registry import get_task

KERNELS = Path(__file__).parent / "kernels"
#: Any smoke workload may fail first (used where the bug shows on all of them).
SMOKE = ("S1", "S2", "S3", "S4", "S5", "S6")


class Planted(NamedTuple):
    slug: str
    kernel: str  # file under kernels/<slug>/
    workloads: tuple[str, ...]  # smoke workloads that may fail first
    rules: tuple[str, ...]  # rules that may reject it
    outputs: tuple[str, ...]  # outputs that may be named ("" for a canonicalize failure)

    @property
    def id(self) -> str:
        return self.kernel.removesuffix(".py")


def assert_caught(case: Planted) -> None:
    """Run the planted kernel through the engine and check how it was rejected."""
    result = run([get_task(case.slug)], lambda _t: KERNELS / case.slug / case.kernel,
                 RunOptions(command="check", smoke=True, interpret=True, timeout_s=300))
    (task,) = result.tasks
    assert task.status == "incorrect", f"{case.kernel} passed {case.slug} (seeds {result.seed_schedule})"
    assert task.error_code == "eval:user:wrong-answer", task.reason
    failed = [(w.name, t) for w in task.workloads for t in w.trials if not t.passed]
    assert failed, "a wrong kernel must fail at least one trial"
    name, first = failed[0]
    assert name in case.workloads, task.reason
    assert first.rule in case.rules, task.reason
    if first.rule == "canonicalize":  # the canonical form's own checks name what went wrong
        assert first.message, task.reason
    else:
        assert first.output in case.outputs, task.reason
        assert first.worst is not None, task.reason
    assert task.reason.startswith(f"workload {name}, trial ")
    assert not result.all_correct
