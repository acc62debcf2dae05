"""The static scan flags what a kernel has no business doing, with line numbers."""

from __future__ import annotations

import pytest

from evaluator.static_scan import scan_file, scan_source

CLEAN = """
import torch
import triton
import triton.language as tl

@triton.jit
def _k(x_ptr):
    pass

def op(x):
    _k[(1,)](x)
    return x
"""


def test_clean_kernel_has_no_findings():
    assert scan_source(CLEAN) == []


def test_suspicious_imports_and_calls_with_lines():
    src = CLEAN + "\nimport subprocess\nimport os\nos.system('ls')\ns = torch.cuda.Stream()\nimport sys\nsys._getframe(1)\n"
    findings = {(f.kind, f.line) for f in scan_source(src)}
    lines = CLEAN.count("\n")
    assert ("import", lines + 2) in findings
    assert ("call", lines + 4) in findings
    assert ("call", lines + 5) in findings
    assert ("call", lines + 7) in findings


def test_forbidden_names_of_the_task():
    src = CLEAN + "\nfrom torch.nn.functional import silu\ny = torch.nn.functional.silu(x)\n"
    kinds = [f.kind for f in scan_source(src, ["silu"])]
    assert kinds.count("forbidden") == 2


def test_no_kernel_and_syntax_error():
    assert [f.kind for f in scan_source("def op(x):\n    return x\n")] == ["no-kernel"]
    assert scan_source("def op(:\n")[0].kind == "syntax"


def test_bundle_scan_names_file_and_line():
    from evaluator.static_scan import scan_bundle

    helper = "import torch\n\ndef helper(x):\n    torch.cuda.Stream()\n    return x\n"
    findings = scan_bundle({"kernel.py": CLEAN, "helpers/util.py": helper.encode(), "README.md": "import os"})
    assert [(f.file, f.kind, f.line) for f in findings] == [("helpers/util.py", "call", 4)]
    assert scan_bundle({"a.py": "def op(x):\n    return x\n"})[0].kind == "no-kernel"
    patched = scan_bundle({"k.py": CLEAN + "\nimport time\ntime.perf_counter = lambda: 0.0\n"})
    assert any(f.kind == "patch" and "time.perf_counter" in f.message for f in patched)


# Renamed uses: every dotted name is resolved through the file's imports and simple assignments
# before it is matched. (case, source appended to CLEAN, forbidden names, (kind, line) expected,
# the line counted from the first appended line.)
MATMUL = ["matmul", "mm", "bmm"]
RENAMED = [
    ("from-import-stream", "from torch.cuda import Stream\ns = Stream()\n", [], ("call", 2)),
    ("module-alias-stream", "import torch.cuda as tc\ns = tc.Stream()\n", [], ("call", 2)),
    ("from-import-system", "from os import system\nsystem('x')\n", [], ("call", 2)),
    ("module-alias-system", "import os as o\no.system('x')\n", [], ("call", 2)),
    ("low-level-threads", "import _thread\n_thread.start_new_thread(print, ())\n", [], ("import", 1)),
    ("assigned-in-function", "def g(a, b):\n    f = torch.matmul\n    return f(a, b)\n", MATMUL, ("forbidden", 3)),
    ("assigned-in-module", "f = torch.matmul\n\ndef g(a, b):\n    return f(a, b)\n", MATMUL, ("forbidden", 4)),
    ("assigned-chain", "import torch.nn.functional as F\nf, g = F.silu, None\nh = f\ny = h(x)\n", ["silu"],
     ("forbidden", 4)),
    ("passed-as-argument", "def g(a, b):\n    return apply(torch.matmul, a, b)\n", MATMUL, ("forbidden", 2)),
    ("imported-name-passed", "from torch import bmm as b\n\ndef g(x):\n    return run(b, x)\n", MATMUL,
     ("forbidden", 4)),
    ("getattr-by-string", "def g(a, b):\n    return getattr(torch, 'matmul')(a, b)\n", MATMUL, ("forbidden", 2)),
    ("aten-overload", "def g(a, b):\n    return torch.ops.aten.mm.default(a, b)\n", MATMUL, ("forbidden", 2)),
    ("matmul-operator", "def g(a, b):\n    return a @ b\n", MATMUL, ("forbidden", 2)),
    ("matmul-operator-in-place", "def g(a, b):\n    a @= b\n    return a\n", ["mm"], ("forbidden", 2)),
    ("matmul-operator-torch-jit", "@torch.jit.script\ndef g(a, b):\n    return a @ b\n", ["bmm"], ("forbidden", 3)),
    ("dispatch-stack-call", "def g(x):\n    return torch._C._len_torch_dispatch_stack()\n", [], ("harness", 2)),
    ("dispatch-getattr", "def g(x):\n    return getattr(torch._C, '_len_torch_dispatch_stack')()\n", [],
     ("harness", 2)),
    ("dispatch-string", "NAME = '_disable_current_modes'\n", [], ("harness", 1)),
    ("dispatch-import", "from torch.utils._python_dispatch import _get_current_dispatch_mode\n", [],
     ("harness", 1)),
    ("dispatch-from-c", "from torch._C import _len_torch_dispatch_stack as n\n", [], ("harness", 1)),
    ("sys-modules-alias", "import sys as s\nm = s.modules\n", [], ("harness", 2)),
]


def _appended(src: str, forbidden: list[str]) -> set[tuple[str, int]]:
    offset = CLEAN.count("\n")
    return {(f.kind, f.line - offset) for f in scan_source(CLEAN + src, forbidden) if f.line}


@pytest.mark.parametrize(("src", "forbidden", "expected"), [c[1:] for c in RENAMED], ids=[c[0] for c in RENAMED])
def test_renamed_uses_are_found(src, forbidden, expected):
    assert expected in _appended(src, forbidden)


def test_resolution_names_what_the_alias_stands_for():
    found = scan_source(CLEAN + "import torch.cuda as tc\ns = tc.Stream()\n", file="k.py")
    assert [(f.file, f.kind, f.message) for f in found] == [
        ("k.py", "call", "calls tc.Stream (torch.cuda.Stream): launches on a side stream")]


def test_what_resolution_must_not_flag():
    """Triton's own ``@`` (tl.dot), local variables named like forbidden ops, attribute chains
    through a module named like one, and a dispatch-like word that is not a probe."""
    src = (
        "from triton import jit\n"
        "@triton.autotune(configs=[], key=[])\n@jit\ndef _mm(a_ptr, b_ptr):\n"
        "    a = tl.load(a_ptr)\n    b = tl.load(b_ptr)\n    c = a @ b\n    c @= b\n"
        "def op(a, b, mm, grad):\n    dy = grad\n    mask = mm\n    m = dy\n"
        "    tf32 = torch.backends.cuda.matmul.allow_tf32\n    e = 'enable_python_dispatcher'\n    return m\n"
    )
    assert scan_source(CLEAN + src, MATMUL + ["grad"]) == []


def test_expert_kernels_have_no_findings():
    """A legitimate fast kernel is never flagged: every expert, with its task's forbidden names."""
    from tasks.registry import load_tasks

    tasks = load_tasks(strict=True).tasks
    assert tasks
    for task in tasks:
        assert scan_file(task.expert_path, task.spec.forbidden.python) == [], task.slug


def test_triton_device_ops_named_like_forbidden_ones_are_the_kernels_own_work():
    """Inside a Triton kernel ``tl.sort`` and ``tl.topk`` are the selection written in Triton, not
    the library op the task forbids; a jit helper named like one is a device function. The same
    names called on tensors outside the kernel are still found."""
    forbidden = ["sort", "topk", "dot"]
    src = (
        "@triton.jit\ndef topk(x):\n    return tl.sort(x)\n"
        "@triton.jit\ndef _k(x_ptr):\n    x = tl.load(x_ptr)\n    y = tl.topk(x, 4)\n"
        "    z = topk(x)\n    w = tl.dot(x, x)\n    s = tl.sort\n"
    )
    assert scan_source(CLEAN + src, forbidden) == []
    found = scan_source(CLEAN + src + "def host(x):\n    return x.sort()\n", forbidden)
    assert [(f.kind, f.line) for f in found] == [("forbidden", 24)]


def test_registering_kernels_on_aten_is_found_and_a_custom_namespace_is_not():
    src = (
        "from torch.library import Library\nimport torch.library as tlib\n"
        "lib = Library('aten', 'IMPL')\n"
        "tlib.impl('aten::mm', 'CUDA')\n"
        "mine = Library('mykernels', 'DEF')\n"
    )
    found = scan_source(CLEAN + src)
    assert [(f.kind, f.line) for f in found] == [("harness", 15), ("harness", 16)]
    assert "aten ops" in found[0].message and "Library('aten')" in found[0].message
