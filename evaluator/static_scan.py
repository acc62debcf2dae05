"""Static scan of a kernel bundle at upload time: the obvious tricks, with file and line.

This is the first, cheap layer (EVALUATION.md, Anti-cheat): it flags imports and calls a kernel
has no business making (processes, sockets, ctypes, threads and streams, frame inspection of the
harness), assignments that patch a library or the harness, reaching for the engine's own
modules or the references, and the task's forbidden Python names. Findings go to moderators;
the run-time checks are what actually catch a cheat, so the scan can afford to be blunt.

The portal calls :func:`scan_bundle` on an uploaded bundle's files before anything is queued;
the engine calls :func:`scan_file` on the kernel it judges and stores the findings in the result.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tasks import python_ast

SUSPICIOUS_MODULES = {
    "subprocess": "starts processes", "socket": "opens network connections", "ctypes": "calls native code",
    "threading": "runs threads outside the timed region", "multiprocessing": "starts processes",
    "concurrent": "runs work outside the timed region", "asyncio": "runs work outside the timed region",
    "gc": "inspects the garbage collector (the harness's objects)", "inspect": "inspects the harness",
    "requests": "opens network connections", "urllib": "opens network connections", "http": "network",
    "signal": "installs signal handlers", "pickle": "deserializes objects", "cffi": "calls native code",
    "evaluator": "reaches into the judging engine", "importlib": "loads code from elsewhere",
    "builtins": "patches the builtins", "mmap": "maps memory directly",
}
SUSPICIOUS_CALLS = {
    "os.system": "runs a shell command", "os.popen": "runs a shell command", "os.fork": "forks",
    "os.execv": "replaces the process", "os.execve": "replaces the process", "os.kill": "signals a process",
    "os._exit": "exits without reporting", "sys.exit": "exits without reporting", "exit": "exits",
    "quit": "exits", "os.abort": "aborts the process",
    "sys._getframe": "inspects the harness's frames", "sys.setprofile": "hooks the harness's calls",
    "sys.settrace": "hooks the harness's calls", "torch.cuda.Stream": "launches on a side stream",
    "torch.cuda.stream": "switches streams", "torch.cuda.set_stream": "switches streams",
    "torch.cuda.ExternalStream": "launches on a side stream", "eval": "evaluates dynamic code",
    "exec": "executes dynamic code", "compile": "compiles dynamic code", "__import__": "imports dynamically",
    "os.dup2": "rewires file descriptors", "os.write": "writes to raw descriptors", "os.open": "opens raw descriptors",
    "setattr": "sets attributes dynamically (a patch?)", "globals": "reads module globals dynamically",
}
#: Modules whose attributes a kernel must not assign to: that is monkeypatching.
PATCHABLE_ROOTS = {"torch", "triton", "time", "os", "sys", "builtins", "evaluator", "tasks", "numpy", "json",
                   "socket", "math"}
#: Names that reach the engine or the references (the sandbox hides them; the scan says who tried).
HARNESS_NAMES = {"sys.modules": "reads the loaded modules (the harness's)", "references": "names the references",
                 "evaluator": "names the engine", "_d2k_": "names the harness's private modules"}


@dataclass(frozen=True)
class ScanFinding:
    kind: str
    message: str
    line: int | None
    file: str = ""


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else node.attr
    return ""


def _import_aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> module it stands for (``import torch.nn.functional as F`` -> F: torch...)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    return aliases


def scan_source(source: str, forbidden_names: list[str] | tuple[str, ...] = (), file: str = "") -> list[ScanFinding]:
    """Findings for one Python file's text; ``file`` is copied into each finding."""
    try:
        tree = python_ast.parse(source)
    except SyntaxError as exc:
        return [ScanFinding("syntax", f"does not parse: {exc.msg}", exc.lineno, file)]
    findings: list[ScanFinding] = []
    has_jit = False
    forbidden = set(forbidden_names)
    aliases = _import_aliases(tree)
    docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}

    def add(kind: str, message: str, node: ast.AST | None) -> None:
        findings.append(ScanFinding(kind, message, getattr(node, "lineno", None), file))

    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for mod in mods:
                top = mod.split(".")[0]
                if top in SUSPICIOUS_MODULES:
                    add("import", f"imports {mod}: {SUSPICIOUS_MODULES[top]}", node)
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.name in forbidden:
                        add("forbidden", f"imports forbidden name {alias.name}", node)
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name in SUSPICIOUS_CALLS:
                add("call", f"calls {name}: {SUSPICIOUS_CALLS[name]}", node)
            last = name.rsplit(".", 1)[-1]
            if last in forbidden:
                add("forbidden", f"calls {name}, which this task forbids", node)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute):
                    dotted = _dotted(target)
                    root = dotted.split(".")[0]
                    if aliases.get(root, "").split(".")[0] in PATCHABLE_ROOTS or root in PATCHABLE_ROOTS:
                        add("patch", f"assigns {dotted}: monkeypatching a library or the harness", node)
        elif isinstance(node, ast.Attribute) and _dotted(node) == "sys.modules":
            add("harness", f"reads sys.modules: {HARNESS_NAMES['sys.modules']}", node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            for needle, what in (("references/", "references"), ("/references", "references"),
                                 ("evaluator.", "evaluator"), ("_d2k_", "_d2k_")):
                if needle in node.value:
                    add("harness", f"the string {node.value[:60]!r} {HARNESS_NAMES[what]}", node)
                    break
        elif isinstance(node, ast.Name) and node.id == "evaluator":
            add("harness", "uses the name evaluator: reaches into the judging engine", node)
        if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
            has_jit = True
    if not has_jit:
        findings.append(ScanFinding("no-kernel", "the file has no @triton.jit kernel", None, file))
    return _dedupe(findings)


def _dedupe(findings: list[ScanFinding]) -> list[ScanFinding]:
    seen: set[tuple[str, str, int | None]] = set()
    out = []
    for f in findings:
        key = (f.kind, f.message, f.line)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return sorted(out, key=lambda f: (f.file, f.line or 0, f.kind))


def scan_file(path: Path, forbidden_names: list[str] | tuple[str, ...] = ()) -> list[ScanFinding]:
    return scan_source(path.read_text(encoding="utf-8", errors="replace"), forbidden_names, file=path.name)


def scan_bundle(files: Mapping[str, str | bytes], forbidden_names: list[str] | tuple[str, ...] = ()
                ) -> list[ScanFinding]:
    """Scan every Python file of an uploaded bundle (name -> contents); the portal's entry point.

    Non-Python files are ignored. A bundle whose Python files hold no ``@triton.jit`` kernel at
    all gets one ``no-kernel`` finding (not one per helper module). Undecodable text is scanned
    with replacement characters, so a hostile file cannot make the scan itself fail.
    """
    findings: list[ScanFinding] = []
    any_kernel = False
    py = {name: body for name, body in files.items() if name.endswith(".py")}
    for name in sorted(py):
        body = py[name]
        text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
        found = scan_source(text, forbidden_names, file=name)
        any_kernel |= not any(f.kind == "no-kernel" for f in found)
        findings += [f for f in found if f.kind != "no-kernel"]
    if not any_kernel:
        findings.append(ScanFinding("no-kernel", "the bundle has no @triton.jit kernel", None, ""))
    return findings
