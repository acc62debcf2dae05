"""One check for every planted-bug kernel: the real engine, the smoke workloads, the CPU interpreter.

A planted kernel is stored as the edits that turn the task's *current* expert into the wrong
kernel (``kernels/<slug>/<name>.toml``: ``[[edit]]`` tables of ``old``/``new`` text, applied in
order, each ``old`` found exactly once). So the planted bug always sits in the expert as it is
now, and an edit that no longer applies (the expert changed at that spot) fails loudly instead of
testing a stale copy.

A planted kernel is a task's expert kernel with one classic mistake. The engine must reject it as
a wrong answer on *every* secret seed, so each case names the failures it may legitimately produce
(which workload, rule and output fail first can depend on the drawn inputs: a kernel reading the
wrong page gives NaN on one seed and a finite wrong value on another) and the test accepts
exactly those. A bug caught only on some seeds is a gap in the task's inputs, not in the test:
fix the generator until it is caught every time.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import NamedTuple

from evaluator.runner import RunOptions, run
from tasks.registry import REPO_ROOT, get_task

KERNELS = Path(__file__).parent / "kernels"
#: Any smoke workload may fail first (used where the bug shows on all of them).
SMOKE = ("S1", "S2", "S3", "S4", "S5", "S6")


class Planted(NamedTuple):
    slug: str
    kernel: str  # the planted kernel's file name; its edits are kernels/<slug>/<stem>.toml
    workloads: tuple[str, ...]  # smoke workloads that may fail first
    rules: tuple[str, ...]  # rules that may reject it
    outputs: tuple[str, ...]  # outputs that may be named ("" for a canonicalize failure)

    @property
    def id(self) -> str:
        return self.kernel.removesuffix(".py")


def apply_edits(text: str, edits: list[dict[str, str]], where: str) -> str:
    """``text`` with each edit applied in turn; an ``old`` that is missing or ambiguous is an error."""
    for n, edit in enumerate(edits, 1):
        found = text.count(edit["old"])
        if found != 1:
            raise AssertionError(f"{where}: edit {n}'s old text occurs {found} times in the expert "
                                 f"(exactly once needed); the expert changed there: re-plant the bug")
        text = text.replace(edit["old"], edit["new"])
    return text


def planted_kernel(case: Planted, dest: Path) -> Path:
    """Write the planted kernel under ``dest``: the expert with the case's edits applied."""
    stem = case.kernel.removesuffix(".py")
    edits_file = KERNELS / case.slug / f"{stem}.toml"
    edits = tomllib.loads(edits_file.read_text(encoding="utf-8"))["edit"]
    expert = (REPO_ROOT / "references" / case.slug / "expert.py").read_text(encoding="utf-8")
    out = dest / case.slug / f"{stem}.py"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(apply_edits(expert, edits, str(edits_file.relative_to(REPO_ROOT))), encoding="utf-8")
    return out


def assert_caught(case: Planted, workdir: Path) -> None:
    """Run the planted kernel through the engine and check how it was rejected."""
    kernel = planted_kernel(case, workdir)
    result = run([get_task(case.slug)], lambda _t: kernel,
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
