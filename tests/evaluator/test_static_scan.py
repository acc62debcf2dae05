"""The static scan flags what a kernel has no business doing, with line numbers."""

from __future__ import annotations

from evaluator.static_scan import scan_source

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
