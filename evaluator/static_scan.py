"""Static scan of a kernel bundle at upload time: the obvious tricks, with file and line.

This is the first, cheap layer (EVALUATION.md, Anti-cheat): it flags imports and calls a kernel
has no business making (processes, sockets, ctypes, threads and streams, frame inspection of the
harness, probes of torch's dispatch modes), assignments that patch a library or the harness,
reaching for the engine's own modules or the references, and the task's forbidden Python names
(called, referenced, or the ``@`` operator where the task forbids matmul). Every dotted name is
resolved through the file's imports (``import torch.cuda as tc``, ``from os import system``)
and simple assignments (``f = torch.matmul``) before it is matched, so renaming a forbidden
callable does not hide it. Findings go to moderators; the run-time checks are what actually
catch a cheat, so the scan can afford to be blunt.

The portal calls :func:`scan_bundle` on an uploaded bundle's files before anything is queued;
the engine calls :func:`scan_file` on the kernel it judges and stores the findings in the result.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tasks import python_ast

SUSPICIOUS_MODULES = {
    "subprocess": "starts processes", "socket": "opens network connections", "ctypes": "calls native code",
    "threading": "runs threads outside the timed region", "_thread": "runs threads outside the timed region",
    "multiprocessing": "starts processes",
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
#: torch's dispatch-mode introspection: a kernel that asks whether a mode (the engine's op
#: recorder) is active can behave differently while it is recorded. Matched in names and strings.
DISPATCH_PROBES = ("_len_torch_dispatch_stack", "_disable_current_modes", "_get_current_dispatch_mode",
                   "_python_dispatch")
DISPATCH_WHY = "probes torch's dispatch modes: can tell when the op recorder is active"
_DISPATCH_RE = re.compile(r"(?<![A-Za-z0-9])(" + "|".join(DISPATCH_PROBES) + r")(?![A-Za-z0-9])")
#: torch.library entry points that register kernels; aimed at ``aten`` they replace PyTorch's own
#: kernels, which only the engine's forbidden-op block has a reason to do.
REGISTRATIONS = ("torch.library.Library", "torch.library.impl", "torch.library.register_kernel",
                 "torch.library._scoped_library", "torch.library.fallthrough_kernel")
REGISTRATION_WHY = "registers kernels on PyTorch's own aten ops (where the forbidden-op block sits)"
#: The task forbids one of these -> the ``@`` operator (outside Triton kernels) is a matmul call.
MATMUL_NAMES = ("matmul", "mm", "bmm")
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_MAX_RESOLVED = 64


@dataclass(frozen=True)
class ScanFinding:
    kind: str
    message: str
    line: int | None
    file: str = ""


def _dotted(node: ast.AST) -> str:
    """``a.b.c`` of a name or attribute chain; a chain on a call or subscript keeps its tail."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _pure_dotted(node: ast.AST) -> str | None:
    """``a.b.c`` when the node is only names and attributes (``f().b`` is not), else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _probe(text: str) -> bool:
    """Whether ``text`` names a dispatch-mode probe (as a whole word: not enable_python_dispatcher)."""
    return _DISPATCH_RE.search(text) is not None


class _Resolver:
    """What a dotted name may stand for, through imports and simple assignments.

    Each function is a scope (its own imports and ``name = a.b`` assignments, tuples pairwise);
    a name is looked up in its function, the enclosing ones and the module, and every binding
    found counts (the scan is flow-insensitive, so it errs towards a finding). Relative imports
    resolve to a name with a leading dot, which matches no library name.
    """

    def __init__(self, tree: ast.AST):
        self.owner: dict[int, ast.AST | None] = {}  # node -> innermost enclosing function
        self.parent: dict[int, ast.AST | None] = {}  # function -> its enclosing function
        self.bindings: dict[int | None, dict[str, set[str]]] = {}
        stack: list[tuple[ast.AST, ast.AST | None]] = [(tree, None)]
        while stack:  # iterative: a hostile file can nest deeper than the recursion limit
            node, fn = stack.pop()
            for child in ast.iter_child_nodes(node):
                self.owner[id(child)] = fn
                if isinstance(child, _FUNCS):
                    self.parent[id(child)] = fn
                    stack.append((child, child))
                else:
                    stack.append((child, fn))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self._bind(node, a.asname, a.name)
            elif isinstance(node, ast.ImportFrom):
                base = "." * node.level + (node.module or "")
                for a in node.names:
                    if a.name != "*":
                        full = base + a.name if base.endswith(".") or not base else f"{base}.{a.name}"
                        self._bind(node, a.asname or a.name, full)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    self._assign(node, target, node.value)
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                self._assign(node, node.target, node.value)

    def _bind(self, at: ast.AST, name: str, target: str) -> None:
        if name != target:
            fn = self.owner.get(id(at))
            self.bindings.setdefault(None if fn is None else id(fn), {}).setdefault(name, set()).add(target)

    def _assign(self, at: ast.AST, target: ast.AST, value: ast.AST) -> None:
        if isinstance(target, ast.Name):
            dotted = _pure_dotted(value)
            if dotted:
                self._bind(at, target.id, dotted)
        elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
                and len(target.elts) == len(value.elts):
            for t, v in zip(target.elts, value.elts, strict=True):
                self._assign(at, t, v)

    def scopes(self, node: ast.AST) -> list[ast.AST | None]:
        out: list[ast.AST | None] = []
        fn = self.owner.get(id(node))
        while fn is not None:
            out.append(fn)
            fn = self.parent.get(id(fn))
        return [*out, None]

    def resolve(self, dotted: str, node: ast.AST) -> list[str]:
        """``dotted`` first, then everything it may stand for (bounded, cycles cut)."""
        keys = [None if s is None else id(s) for s in self.scopes(node)]
        out, frontier = [dotted], [dotted]
        while frontier and len(out) < _MAX_RESOLVED:
            head, _, rest = frontier.pop().partition(".")
            for key in keys:
                for target in sorted(self.bindings.get(key, {}).get(head, ())):
                    new = f"{target}.{rest}" if rest else target
                    if new not in out:
                        out.append(new)
                        frontier.append(new)
        return out

    def in_triton_jit(self, node: ast.AST) -> bool:
        """Whether ``node`` is inside a ``@triton.jit`` function (not ``@torch.jit.script``)."""
        for scope in self.scopes(node):
            for d in scope.decorator_list if isinstance(scope, _FUNCS) else ():
                name = _pure_dotted(d.func if isinstance(d, ast.Call) else d)
                if name and any(r.split(".")[0] == "triton" and r.endswith(".jit") for r in self.resolve(name, d)):
                    return True
        return False


def scan_source(source: str, forbidden_names: list[str] | tuple[str, ...] = (), file: str = "") -> list[ScanFinding]:
    """Findings for one Python file's text; ``file`` is copied into each finding."""
    try:
        tree = python_ast.parse(source)
    except SyntaxError as exc:
        return [ScanFinding("syntax", f"does not parse: {exc.msg}", exc.lineno, file)]
    findings: list[ScanFinding] = []
    has_jit = False
    forbidden = set(forbidden_names)
    names = _Resolver(tree)
    docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    call_funcs = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    bases = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    matmul_forbidden = forbidden.intersection(MATMUL_NAMES)

    def add(kind: str, message: str, node: ast.AST | None) -> None:
        findings.append(ScanFinding(kind, message, getattr(node, "lineno", None), file))

    def shown(raw: str, resolved: str) -> str:
        return raw if resolved == raw else f"{raw} ({resolved})"

    def check_use(raw: str, resolved: list[str], node: ast.AST, verb: str) -> None:
        """A call of, or a reference to, ``raw``, which may stand for any of ``resolved``."""
        for r in resolved:
            if r in SUSPICIOUS_CALLS and (verb == "calls" or "." in r):
                add("call", f"{verb} {shown(raw, r)}: {SUSPICIOUS_CALLS[r]}", node)
                break
        # Triton's own ops (tl.sort, tl.topk, tl.dot) and anything a @triton.jit body calls run
        # on the device as the kernel's work: no library op the task forbids can be reached there.
        on_device = forbidden and names.in_triton_jit(node)
        for r in resolved:
            parts = r.split(".")
            if on_device or parts[0] == "triton":
                break
            # torch.ops.aten.mm.default names the op in the middle of the chain
            if parts[-1] in forbidden or (parts[:2] == ["torch", "ops"] and forbidden.intersection(parts[2:])):
                add("forbidden", f"{verb} {shown(raw, r)}, which this task forbids", node)
                break
        for r in resolved:  # the literal sys.modules is its own check below
            if r != raw and (r == "sys.modules" or r.startswith("sys.modules.")):
                add("harness", f"{verb} {shown(raw, r)}: {HARNESS_NAMES['sys.modules']}", node)
                break
        for r in resolved:
            if _probe(r):
                add("harness", f"{verb} {shown(raw, r)}: {DISPATCH_WHY}", node)
                break

    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for mod in mods:
                top = mod.split(".")[0]
                if top in SUSPICIOUS_MODULES:
                    add("import", f"imports {mod}: {SUSPICIOUS_MODULES[top]}", node)
                if _probe(mod):
                    add("harness", f"imports {mod}: {DISPATCH_WHY}", node)
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}" if node.module and not node.level else alias.name
                    if alias.name in forbidden:
                        add("forbidden", f"imports forbidden name {alias.name}", node)
                    if full in SUSPICIOUS_CALLS and "." in full:
                        add("import", f"imports {full}: {SUSPICIOUS_CALLS[full]}", node)
                    if _probe(alias.name) and not _probe(node.module or ""):
                        add("harness", f"imports {full}: {DISPATCH_WHY}", node)
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            pure = _pure_dotted(node.func)
            resolved = names.resolve(pure, node) if pure else [name]
            check_use(name, resolved, node, "calls")
            first = node.args[0] if node.args else None
            if set(REGISTRATIONS).intersection(resolved) and isinstance(first, ast.Constant) \
                    and isinstance(first.value, str) and first.value.split("::")[0] == "aten":
                add("harness", f"calls {name}({first.value!r}): {REGISTRATION_WHY}", node)
            attr = node.args[1] if len(node.args) > 1 else None
            if {"getattr", "builtins.getattr"}.intersection(resolved) and isinstance(attr, ast.Constant) \
                    and isinstance(attr.value, str):  # getattr(torch, "matmul") is torch.matmul
                base = _pure_dotted(node.args[0])
                looked_up = [f"{r}.{attr.value}" for r in names.resolve(base, node)] if base else [attr.value]
                check_use(f"{base or '?'}.{attr.value}", looked_up, node, "looks up")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute):
                    dotted = _dotted(target)
                    root = dotted.split(".")[0]
                    if any(r.split(".")[0] in PATCHABLE_ROOTS for r in names.resolve(root, node)):
                        add("patch", f"assigns {dotted}: monkeypatching a library or the harness", node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            for needle, what in (("references/", "references"), ("/references", "references"),
                                 ("evaluator.", "evaluator"), ("_d2k_", "_d2k_")):
                if needle in node.value:
                    add("harness", f"the string {node.value[:60]!r} {HARNESS_NAMES[what]}", node)
                    break
            if _probe(node.value):
                add("harness", f"the string {node.value[:60]!r} {DISPATCH_WHY}", node)
        elif isinstance(node, ast.Name) and node.id == "evaluator":
            add("harness", "uses the name evaluator: reaches into the judging engine", node)
        if isinstance(node, ast.Attribute) and _dotted(node) == "sys.modules":
            add("harness", f"reads sys.modules: {HARNESS_NAMES['sys.modules']}", node)
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load) \
                and id(node) not in call_funcs and id(node) not in bases:
            # A reference, not a call: ``f = torch.matmul`` or ``apply(torch.matmul, a, b)`` is the
            # same use. A bare name counts only where it stands for a dotted one (an import, an alias).
            raw = _pure_dotted(node)
            if raw:
                resolved = names.resolve(raw, node)
                if isinstance(node, ast.Name):
                    resolved = [r for r in resolved[1:] if "." in r]
                if resolved:
                    check_use(raw, resolved, node, "refers to")
        if matmul_forbidden and isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, ast.MatMult) \
                and not names.in_triton_jit(node):  # in a Triton kernel, ``a @ b`` is tl.dot: the kernel's own work
            add("forbidden", f"uses the @ operator (matmul), which this task forbids "
                f"({', '.join(sorted(matmul_forbidden))})", node)
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
