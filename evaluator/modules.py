"""Importing a Python file under a name of our choosing: one rule for every process that does it.

The judge's child imports each task's baseline this way and the worker each provider (candidate,
expert, baseline): every file gets its own private module name, so two tasks' ``baseline.py``
never share a module and a submission cannot reach another's by ``import``. It lives alone so
the worker, which imports as little of the engine as it can, takes nothing else with it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_module(path: str | Path, name: str) -> ModuleType:
    """Import the file at ``path`` as module ``name`` (registered in ``sys.modules`` before it
    runs, as a normal import does, so its dataclasses and pickling find it)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
