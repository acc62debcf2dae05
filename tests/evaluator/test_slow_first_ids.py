"""Every test that ``tests/conftest.py`` moves to the front of the run (``SLOW_FIRST``) exists.

The list names tests by node id so that the longest start first on CI's two workers. A renamed or
removed test would drop out of it silently (the sort just stops matching it) and the run would
grow longer again with nothing failing; this names the stale entry instead.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.conftest import SLOW_FIRST

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("nodeid", SLOW_FIRST)
def test_every_slow_first_entry_names_a_test_that_exists(nodeid: str) -> None:
    path, name = nodeid.split("::")
    function, param = re.fullmatch(r"([A-Za-z_]\w*)(?:\[(.+)\])?", name).groups()
    source = ROOT / path
    assert source.is_file(), f"{path} is gone"
    tree = ast.parse(source.read_text())
    defs = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert function in defs, f"{path} has no {function}"
    if param is not None:  # a parametrized case: its id must still be written in the module
        assert param in source.read_text(), f"{path} no longer parametrizes {function} with {param!r}"
