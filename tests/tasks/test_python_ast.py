"""Parsing from several threads at once (tasks/python_ast.py, python/cpython#106905).

The race needs a thread switch inside one ``ast.parse``. These tests force one: a garbage
collection during thread A's parse runs a finalizer that wakes thread B and waits for it. With
bare ``ast.parse`` B parses inside A's parse (on CPython 3.11.7, CI's interpreter, A then fails
with ``SystemError``); with :func:`tasks.python_ast.parse` B waits until A is done.
"""

from __future__ import annotations

import ast
import gc
import sys
import threading
from collections.abc import Callable

from tasks import python_ast

#: Enough nodes that a young-generation collection is due while the tree is being built.
SOURCE = "\n".join(f"def f{i}(x):\n    return [x + {i}, (x * {i}, {{'k': x - {i}}})]" for i in range(400))


def _inside_ast_parse() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == "parse" and frame.f_code.co_filename == ast.__file__:
            return True
        frame = frame.f_back
    return False


def interleave(parse: Callable[[str], object]) -> dict[str, object]:
    """Run the forced switch with ``parse``; returns the finishing order and each thread's error."""
    wake_b, b_done = threading.Event(), threading.Event()
    seen: dict[str, object] = {"order": [], "fired_inside_parse": False, "A": None, "B": None}
    order: list[str] = seen["order"]  # type: ignore[assignment]

    class SwitchOnCollect:
        def __init__(self) -> None:
            self.me = self  # a cycle: only the collector frees it, at a moment the allocator picks

        def __del__(self) -> None:
            seen["fired_inside_parse"] = _inside_ast_parse()
            wake_b.set()
            b_done.wait(timeout=1.0)  # releases the GIL: B runs now unless a lock holds it back

    def run(name: str) -> None:
        try:
            parse(SOURCE)
            order.append(name)
        except SystemError as exc:  # the CPython bug
            seen[name] = exc
        finally:
            if name == "B":
                b_done.set()

    def thread_a() -> None:
        gc.collect()
        SwitchOnCollect()  # garbage now; collected once the parse has allocated enough nodes
        run("A")

    def thread_b() -> None:
        wake_b.wait(timeout=30)
        run("B")

    threshold = gc.get_threshold()
    gc.set_threshold(300, threshold[1], threshold[2])
    try:
        threads = [threading.Thread(target=thread_b), threading.Thread(target=thread_a)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    finally:
        gc.set_threshold(*threshold)
    return seen


def test_the_forced_switch_lets_a_second_bare_parse_run_inside_the_first() -> None:
    """The scenario is real: without the lock, B's parse finishes while A's is still under way."""
    seen = interleave(ast.parse)
    assert seen["fired_inside_parse"]
    assert seen["order"][:1] == ["B"] or isinstance(seen["A"], SystemError)


def test_parses_from_two_threads_never_overlap() -> None:
    seen = interleave(python_ast.parse)
    assert seen["fired_inside_parse"]
    assert seen["A"] is None and seen["B"] is None
    assert seen["order"] == ["A", "B"]


def test_a_finalizer_may_parse_on_the_thread_that_holds_the_lock() -> None:
    """Re-entrant: a nested parse on the same thread does not deadlock."""
    inner: list[ast.AST] = []

    class ParseOnCollect:
        def __init__(self) -> None:
            self.me = self

        def __del__(self) -> None:
            inner.append(python_ast.parse("x = 1"))

    outcome: list[object] = []

    def parse_with_a_nested_parse() -> None:
        gc.collect()
        ParseOnCollect()
        try:
            outcome.append(python_ast.parse(SOURCE))
        except SystemError as exc:  # the nested parse may trip CPython's counter: an error, not a hang
            outcome.append(exc)

    threshold = gc.get_threshold()
    gc.set_threshold(300, threshold[1], threshold[2])
    try:
        thread = threading.Thread(target=parse_with_a_nested_parse, daemon=True)
        thread.start()
        thread.join(timeout=30)
    finally:
        gc.set_threshold(*threshold)
    assert not thread.is_alive(), "the nested parse deadlocked on the lock"
    assert inner and isinstance(inner[0], ast.Module)
    assert len(outcome) == 1
