"""``ast.parse`` made safe to call from several threads of one process.

CPython 3.11 and early 3.12 keep the AST constructor's recursion counter in interpreter-wide
state (python/cpython#106905). When a thread switch lands inside one ``ast.parse`` (a garbage
collection there runs a finalizer, which can release the GIL) and another thread parses
meanwhile, the first one fails with ``SystemError: AST constructor recursion depth mismatch``.
The portal parses uploaded kernels in request threads and Celery threads, so two uploads at once
could fail one of them with a server error; CI saw it in the concurrent-quota test.

Every parse in the engine, the task registry and the portal goes through :func:`parse`, which
holds one process-wide lock. Parsing a kernel takes milliseconds and an upload's other work is
far longer, so the lock costs nothing measurable. It is re-entrant because a finalizer that runs
inside a parse may itself parse on the same thread.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.RLock()


def parse(source: str | bytes, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """``ast.parse(source, filename, mode)`` with no other thread parsing at the same time."""
    with _LOCK:
        return ast.parse(source, filename=filename, mode=mode)
