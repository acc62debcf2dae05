"""The planted-bug corpus is whole and applies to the experts as they are now (fast, no interpreter).

Every file under ``kernels/`` belongs to a case in one of the ``test_planted_*`` modules, every
case's edits apply to its task's current expert, and the result differs from the expert and still
parses as Python: a planted bug that silently stopped applying would leave its test checking
nothing new.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from tasks.registry import REPO_ROOT
from tests.tasks.planted import KERNELS, Planted, planted_kernel

MODULES = sorted(p.stem for p in Path(__file__).parent.glob("test_planted_*.py") if p.stem != "test_planted_edits")
CASES: list[Planted] = [c for m in MODULES for c in importlib.import_module(f"tests.tasks.{m}").PLANTED]


def test_every_edit_file_belongs_to_a_case():
    files = list(KERNELS.glob("*/*"))
    assert all(p.suffix == ".toml" for p in files), "kernels/ holds only edit files (no whole stored kernels)"
    stored = {(p.parent.name, p.stem) for p in files}
    named = {(c.slug, c.kernel.removesuffix(".py")) for c in CASES}
    assert stored == named
    assert len({c.id for c in CASES}) == len(CASES), "case ids must be unique"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_edits_apply_to_the_current_expert(case: Planted, tmp_path: Path):
    kernel = planted_kernel(case, tmp_path)
    text = kernel.read_text(encoding="utf-8")
    expert = (REPO_ROOT / "references" / case.slug / "expert.py").read_text(encoding="utf-8")
    assert text != expert
    ast.parse(text, filename=str(kernel))
