"""Checks on one kernel file before it is stored: it decodes, it parses, it has a Triton kernel,
and the engine's static anti-cheat scan finds nothing (EVALUATION.md, Anti-cheat).

Every scan finding refuses the upload: the scan flags only things a kernel has no business doing
(processes, sockets, native code, side streams, frame inspection, the task's forbidden names), so
a legitimate kernel never trips it, and a refusal with the line number is cheaper for everyone
than a moderator's rejection after an hour of GPU time.
"""

from __future__ import annotations

from evaluator.bundle_problems import Problem
from evaluator.static_scan import scan_source
from tasks import python_ast


def check_kernel(path: str, data: bytes, *, max_bytes: int, forbidden: list[str]) -> tuple[str, list[Problem]]:
    """The decoded source and the problems found (empty when the kernel may be queued)."""
    if len(data) > max_bytes:
        return "", [Problem(path, "kernel-size", f"is {len(data):,} bytes; the limit is {max_bytes:,}")]
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return "", [Problem(path, "encoding", f"is not UTF-8 (byte {exc.start})")]
    try:
        python_ast.parse(source, filename=path)
        findings = scan_source(source, tuple(forbidden))
    except SyntaxError as exc:
        where = f"line {exc.lineno}: " if exc.lineno else ""
        return source, [Problem(path, "python-syntax", f"{where}{exc.msg}")]
    except (RecursionError, MemoryError):  # the parser's and the scan's recursion: hostile nesting
        return source, [Problem(path, "python-syntax", "expressions nested too deeply to parse")]
    problems = []
    for finding in findings:
        if finding.kind == "no-kernel":
            problems.append(Problem(path, "triton-kernel", "has no @triton.jit function"))
        else:
            where = f"line {finding.line}: " if finding.line else ""
            problems.append(Problem(path, f"anti-cheat:{finding.kind}", f"{where}{finding.message}"))
    return source, problems
