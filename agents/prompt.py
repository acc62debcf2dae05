"""The prompts: one builder for every condition, so a guided and an unguided run differ only in
the guidance block (AGENTS.md: that is what makes the pair clean; a test holds it to that).
"""

from __future__ import annotations

from dataclasses import dataclass

from tasks.guidance import CONDITIONS
from tasks.registry import Task
from tasks.spec import TensorArg

GUIDANCE_LEVELS = CONDITIONS  # condition -> the levels it gives
LEVEL_TITLES = {"L1": "L1 (algorithm)", "L2": "L2 (dataflow)", "L3": "L3 (low-level technique)"}
GUIDANCE_START = "<expert-guidance>"
GUIDANCE_END = "</expert-guidance>"

SYSTEM_KERNEL = """You are an expert GPU kernel engineer. You write a Triton kernel for one task and make it
correct and as fast as you can on an {card}. You work only through the tools you are
given: write the kernel file, check it, benchmark it, read the task's public files. Every call to
check or bench runs the real evaluation engine in its sandbox. The kernel file must define the
entry point exactly as the contract says, with its computation in Triton kernels: calling the
forbidden operations listed for the task fails the task. When you are satisfied, answer with a
short summary and no tool call: that ends your run. You have a budget of model turns; each of your
replies is one turn."""

SYSTEM_DESIGN = """You are an expert GPU kernel engineer. For the task below you write a design, not code: how a
fast Triton kernel for an {card} should compute it. Organise it in three levels:
L1 (algorithm: what is computed in what order, what is never materialized), L2 (dataflow: what
lives where, tiling, what each program reads and writes), L3 (low-level technique: the
instructions and scheduling that make it fast). You may read the task's public files with the
tool. Your final answer, with no tool call, is the design document, in Markdown."""


#: The card a hardware profile times on, as the prompt names it. Runs name the profile they will be
#: judged on (``--hardware``); without one the benchmark's reference card, the H200.
CARDS = {"h200": "NVIDIA H200 (Hopper)", "h100": "NVIDIA H100 (Hopper)"}
DEFAULT_HARDWARE = "h200"


def card_name(hardware: str) -> str:
    """The card a profile names (its own name for a profile this table does not know)."""
    hardware = hardware or DEFAULT_HARDWARE
    return CARDS.get(hardware, hardware)


@dataclass(frozen=True)
class Prompt:
    system: str
    user: str


def contract(task: Task) -> str:
    """The entry point's signature and outputs, from task.toml."""
    spec = task.spec
    def access(a: TensorArg) -> str:
        if a.updated:
            return ", updated in place: after the call it must hold the output that may alias it"
        return ", may be overwritten" if a.writable else ", read-only"

    args = [f"{a.name}: Tensor{a.shape} ({a.dtype}{access(a)})" for a in spec.inputs]
    args += [f"{s.name}: scalar (workload parameter {s.param})" for s in spec.scalars]
    outs = [f"{o.name}: Tensor{o.shape} ({o.dtype}{f', may alias {o.may_alias}' if o.may_alias else ''})"
            for o in spec.outputs]
    lines = [f"def {spec.entry_point}(" + ", ".join(a.split(":")[0] for a in args) + ")", "", "Arguments:"]
    lines += [f"- {a}" for a in args]
    lines += ["", "Returns " + ("a tuple, in this order:" if len(outs) > 1 else "one tensor:")]
    lines += [f"- {o}" for o in outs]
    return "\n".join(lines)


def guidance_block(task: Task, condition: str) -> str:
    levels = GUIDANCE_LEVELS[condition]
    if not levels:
        return ""
    texts = task.guidance
    parts = [f"### {LEVEL_TITLES[lv]}\n\n{texts[lv].strip()}" for lv in levels]
    return (f"{GUIDANCE_START}\n## Expert design guidance\n\nAn expert's design for this task, in "
            f"{len(levels)} level(s). Use it as you see fit.\n\n" + "\n\n".join(parts) + f"\n{GUIDANCE_END}\n\n")


def build(task: Task, condition: str = "none", mode: str = "kernel", budget: int = 350,
          hardware: str = "") -> Prompt:
    """System and first user message for ``task`` under a guidance ``condition`` and ``mode``, for
    the card of the ``hardware`` profile the run will be judged on."""
    if condition not in GUIDANCE_LEVELS:
        raise ValueError(f"unknown guidance condition {condition!r}: one of {', '.join(GUIDANCE_LEVELS)}")
    spec = task.spec
    workloads = "\n".join(
        f"- {w.name} ({w.model or 'synthetic'}): " + ", ".join(f"{k}={v}" for k, v in w.params.items())
        for w in task.workloads())
    forbidden = ", ".join(spec.forbidden.aten + spec.forbidden.python) or "none"
    baseline = task.baseline_path.read_text(encoding="utf-8")
    user = (
        f"# Task {spec.id}: {spec.title} (`{spec.slug}`)\n\n{spec.summary.strip()}\n\n"
        f"## Semantics\n\n{spec.semantics.strip()}\n\n"
        f"## Entry-point contract\n\n{contract(task)}\n\n"
        f"## Workloads (timed on the {card_name(hardware).split(' (')[0]})\n\n{workloads}\n\n"
        f"## Forbidden\n\n{forbidden}" + (f" ({spec.forbidden.reason})" if spec.forbidden.reason else "") + "\n\n"
        f"## PyTorch baseline (the speed you are measured against)\n\n```python\n{baseline}```\n\n"
        + guidance_block(task, condition)
        + (f"## Budget\n\nYou have {budget} turns." if mode == "kernel" else
           "## Output\n\nAnswer with the design document (L1, L2, L3 sections).")
    )
    return Prompt((SYSTEM_KERNEL if mode == "kernel" else SYSTEM_DESIGN).format(card=card_name(hardware)), user)
