"""Static scan of a kernel file before it runs: the obvious tricks, with line numbers.

This is the first, cheap layer (EVALUATION.md, Anti-cheat): it flags imports and calls a kernel
has no business making (processes, sockets, ctypes, threads and streams, frame inspection of the
harness) and the task's forbidden Python names. Findings go to moderators; the run-time checks
are what actually catch a cheat.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

SUSPICIOUS_MODULES = {
    "subprocess": "starts processes", "socket": "opens network connections", "ctypes": "calls native code",
    "threading": "runs threads outside the timed region", "multiprocessing": "starts processes",
    "gc": "inspects the garbage collector (the harness's objects)", "inspect": "inspects the harness",
    "requests": "opens network connections", "urllib": "opens network connections", "http": "network",
    "signal": "installs signal handlers", "pickle": "deserializes objects", "cffi": "calls native code",
}
SUSPICIOUS_CALLS = {
    "os.system": "runs a shell command", "os.popen": "runs a shell command", "os.fork": "forks",
    "os._exit": "exits without reporting", "sys.exit": "exits without reporting", "exit": "exits",
    "sys._getframe": "inspects the harness's frames", "torch.cuda.Stream": "launches on a side stream",
    "torch.cuda.stream": "switches streams", "eval": "evaluates dynamic code", "exec": "executes dynamic code",
    "__import__": "imports dynamically", "os.dup2": "rewires file descriptors", "os.write": "writes to raw descriptors",
}


@dataclass(frozen=True)
class ScanFinding:
    kind: str
    message: str
    line: int | None


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else node.attr
    return ""


def scan_source(source: str, forbidden_names: list[str] | tuple[str, ...] = ()) -> list[ScanFinding]:
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [ScanFinding("syntax", f"does not parse: {exc.msg}", exc.lineno)]
    findings: list[ScanFinding] = []
    has_jit = False
    forbidden = set(forbidden_names)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for mod in mods:
                top = mod.split(".")[0]
                if top in SUSPICIOUS_MODULES:
                    findings.append(ScanFinding("import", f"imports {mod}: {SUSPICIOUS_MODULES[top]}", node.lineno))
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.name in forbidden:
                        findings.append(ScanFinding("forbidden", f"imports forbidden name {alias.name}", node.lineno))
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name in SUSPICIOUS_CALLS:
                findings.append(ScanFinding("call", f"calls {name}: {SUSPICIOUS_CALLS[name]}", node.lineno))
            last = name.rsplit(".", 1)[-1]
            if last in forbidden:
                findings.append(ScanFinding("forbidden", f"calls {name}, which this task forbids", node.lineno))
        elif isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
            has_jit = True
    if not has_jit:
        findings.append(ScanFinding("no-kernel", "the file has no @triton.jit kernel", None))
    return findings


def scan_file(path: Path, forbidden_names: list[str] | tuple[str, ...] = ()) -> list[ScanFinding]:
    return scan_source(path.read_text(encoding="utf-8", errors="replace"), forbidden_names)
