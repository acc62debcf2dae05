"""Safe evaluation of the arithmetic formulas in ``task.toml`` (FLOPs, bytes, shapes).

Task files are data, not code: a formula may use numbers, names bound by the workload and
``+ - * / // % **``, parentheses and the functions ``min``, ``max``, ``ceil``, ``floor``.
Anything else is refused when the task is loaded, so a typo is reported with its file and
field instead of surfacing as a crash in the middle of a GPU run.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Mapping

from tasks import python_ast

_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_FUNCS = {"min": min, "max": max, "ceil": math.ceil, "floor": math.floor}


class FormulaError(ValueError):
    """A formula that does not parse, uses a forbidden construct, or names an unbound variable."""


def parse(text: str) -> ast.Expression:
    """Parse ``text`` and refuse anything but arithmetic; returns the checked tree."""
    try:
        tree = python_ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise FormulaError(f"does not parse: {exc.msg}") from None
    for node in ast.walk(tree):
        allowed = (
            ast.Expression, ast.BinOp, ast.UnaryOp, ast.USub, ast.UAdd, ast.Constant,
            ast.Name, ast.Load, ast.Call, *_BINOPS,
        )
        if not isinstance(node, allowed):
            raise FormulaError(f"{type(node).__name__} is not allowed in a formula")
        if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float)):
            raise FormulaError(f"constant {node.value!r} is not a number")
        if isinstance(node, ast.Call) and (
            not isinstance(node.func, ast.Name) or node.func.id not in _FUNCS or node.keywords
        ):
            raise FormulaError(f"only {', '.join(sorted(_FUNCS))} may be called")
    return tree


def names(text: str) -> set[str]:
    """The variable names a formula uses (function names excluded)."""
    tree = parse(text)
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call)}  # type: ignore[union-attr]
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - called


def evaluate(text: str | int | float, env: Mapping[str, float | int]) -> float | int:
    """Evaluate a formula (or pass a number through) with the variables in ``env``."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return text
    tree = parse(str(text))

    def ev(node: ast.AST) -> float | int:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise FormulaError(f"unknown name {node.id!r}")
            value = env[node.id]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise FormulaError(f"{node.id!r} is not a number")
            return value
        if isinstance(node, ast.UnaryOp):
            value = ev(node.operand)
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.BinOp):
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.Call):
            return _FUNCS[node.func.id](*(ev(a) for a in node.args))  # type: ignore[union-attr]
        raise FormulaError(f"{type(node).__name__} is not allowed")  # pragma: no cover

    try:
        return ev(tree)
    except ZeroDivisionError:
        raise FormulaError("division by zero") from None
