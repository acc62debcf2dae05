"""The agent's tools: write the kernel, check it, benchmark it, read the task's public files.

``check`` and ``bench`` run the real engine (:func:`evaluator.runner.run`, one sandboxed child
process per task), so what the model hears is what the leaderboard will measure. Every result is
capped before it goes back to the model, and a bad call (malformed JSON arguments, arguments
of the wrong type, an unknown tool, a path outside the task's public files) gets an error result
instead of stopping the run, as does a tool that fails unexpectedly (the error's class and
message): the refusal is itself in the transcript for moderators to read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from agents.prompt import GUIDANCE_LEVELS
from agents.providers.base import ToolSpec
from evaluator.result import RunResult
from evaluator.runner import RunOptions, run
from tasks.registry import Task

MAX_RESULT_CHARS = 8000
MAX_KERNEL_BYTES = 512 * 1024

WRITE = ToolSpec("write_kernel", "Write (replace) your kernel file. It must define the entry point and its Triton kernels.",
                 {"type": "object", "properties": {"source": {"type": "string", "description": "the whole Python file"}},
                  "required": ["source"], "additionalProperties": False})
CHECK = ToolSpec("check", "Check your kernel's correctness with the evaluation engine (smoke workloads, or all of them).",
                 {"type": "object", "properties": {"smoke": {"type": "boolean", "default": True}},
                  "additionalProperties": False})
BENCH = ToolSpec("bench", "Benchmark your kernel against the PyTorch baseline on every workload (needs a GPU).",
                 {"type": "object", "properties": {}, "additionalProperties": False})
READ = ToolSpec("read_file", "Read one of the task's public files: task.toml, baseline.py, or a guidance file you were given.",
                {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"],
                 "additionalProperties": False})


def check_arguments(spec: ToolSpec, args: dict[str, Any]) -> str:
    """What is wrong with ``args`` against the tool's JSON Schema (unknown, missing or wrong-typed
    keys), each problem as jsonschema words it; "" if nothing."""
    errors = sorted(Draft202012Validator(spec.parameters).iter_errors(args), key=lambda e: list(e.path))
    if not errors:
        return ""
    props: dict[str, Any] = spec.parameters.get("properties", {})
    expected = ", ".join(f"{k} ({v.get('type', 'any')})" for k, v in props.items())
    problems = [f"{'.'.join(map(str, e.path)) + ': ' if e.path else ''}{e.message}" for e in errors]
    return "; ".join([*problems, f"it takes: {expected or 'no arguments'}"])


def cap(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 60] + f"\n... [{len(text) - limit + 60} characters cut]"


def summarize(result: RunResult) -> str:
    """What the model is told about an engine run: status, reasons, per-workload outcome and times."""
    lines = [f"engine {result.command} ({result.mode}): {result.note}".rstrip(": ")]
    for t in result.tasks:
        lines.append(f"task {t.slug}: {t.status}" + (f" [{t.error_code}] {t.reason}" if t.reason else ""))
        for f in t.findings:
            lines.append(f"  finding ({f.kind}{', line ' + str(f.line) if f.line else ''}): {f.message}")
        for w in t.workloads:
            bad = next((tr for tr in w.trials if not tr.passed), None)
            line = f"  {w.name}: {'correct' if w.correct else 'WRONG'}"
            if bad is not None:
                line += f" ({bad.rule} on {bad.output or '-'}: {bad.message})"
            if "candidate" in w.timings:
                line += (f"; {w.timings['candidate'].median_ms * 1e3:.1f} us, "
                         f"{w.speedup.get('candidate', 0):.2f}x vs baseline")
            lines.append(line)
    return "\n".join(lines)


@dataclass
class ToolBox:
    """The tools of one task's run; the kernel lives at ``workdir/kernel.py``."""

    task: Task
    workdir: Path
    condition: str = "none"
    interpret: bool = False  # no GPU here: check runs Triton's interpreter on the smoke workloads
    timeout_s: float = 600.0
    design_mode: bool = False

    @property
    def kernel_path(self) -> Path:
        return self.workdir / "kernel.py"

    def specs(self) -> list[ToolSpec]:
        return [READ] if self.design_mode else [WRITE, CHECK, BENCH, READ]

    def public_files(self) -> dict[str, Path]:
        files = {"task.toml": self.task.toml_path, "baseline.py": self.task.baseline_path}
        for level in GUIDANCE_LEVELS[self.condition]:
            files[f"guidance/{level}.md"] = self.task.guidance_path(level)
        return files

    def call(self, name: str, arguments: str) -> str:
        """Run one tool call; always returns text for the model (errors included)."""
        allowed = {t.name for t in self.specs()}
        if name not in allowed:
            return f"error: unknown tool {name!r}; the tools are {', '.join(sorted(allowed))}"
        try:
            args: Any = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return f"error: the arguments of {name} are not valid JSON ({exc.msg} at position {exc.pos}); nothing was done"
        if not isinstance(args, dict):
            return f"error: the arguments of {name} must be a JSON object"
        spec = next(t for t in self.specs() if t.name == name)
        problem = check_arguments(spec, args)
        if problem:
            return f"error: bad arguments for {name}: {problem}; nothing was done"
        try:
            return cap(getattr(self, f"_tool_{name}")(**args))
        except Exception as exc:  # noqa: BLE001 - an engine or file failure is the model's to hear, not a crash
            return cap(f"error: {name} failed: {type(exc).__name__}: {exc}")

    def _tool_write_kernel(self, source: str) -> str:
        data = source.encode("utf-8")
        if len(data) > MAX_KERNEL_BYTES:
            return f"error: the kernel is {len(data):,} bytes; the limit is {MAX_KERNEL_BYTES:,}"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.kernel_path.write_bytes(data)
        return f"wrote kernel.py ({len(data):,} bytes)"

    def _engine(self, command: str, smoke: bool) -> str:
        if not self.kernel_path.is_file():
            return "error: write the kernel first (write_kernel)"
        opts = RunOptions(command=command, smoke=smoke or self.interpret, interpret=self.interpret,
                          timeout_s=self.timeout_s)
        result = run([self.task], lambda _t: self.kernel_path, opts)
        return summarize(result)

    def _tool_check(self, smoke: bool = True) -> str:
        return self._engine("check", smoke)

    def _tool_bench(self) -> str:
        if self.interpret:
            return "bench: no GPU on this machine, so no timing can be taken; use check"
        return self._engine("bench", False)

    def _tool_read_file(self, path: str) -> str:
        files = self.public_files()
        target = files.get(path.strip().lstrip("./"))
        if target is None:
            return f"error: {path!r} is not one of this task's public files: {', '.join(files)}"
        return target.read_text(encoding="utf-8")
