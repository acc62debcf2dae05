"""Forbidden ATen ops refused in an untrusted worker, on every call, not only the recorded ones.

The op recorder (:mod:`evaluator.aten_record`) sees what a kernel dispatches during its
correctness trials, through a Python dispatch mode. A kernel can tell that mode is on (the
dispatch-mode stack is not empty, or it disables the current modes) and use a forbidden op (a
cuBLAS GEMM, a library attention) only when it is off: in the timed calls, where the values
are right and so the judge's checked timed calls pass. This module closes that: in the workers
that run untrusted code (the candidate's, and the expert's set up like it) each forbidden op's
kernel for the worker's device is replaced, in the dispatcher itself, by one that raises
:class:`ForbiddenOpError`. A dispatch mode cannot hide a call from the dispatcher, so the op
fails whenever it is called. The trusted workers (the baseline, torch.compile of it) never get
the block: the baseline is exactly the code that uses those ops.

Ops whose kernels are composite (``matmul``, ``linear``, ``scaled_dot_product_attention``) have
no device kernel to replace; they reach the device kernels they decompose into, which the task
lists too. Ops this torch does not have are skipped.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.library import Library

#: The exception's class name, which the judge maps to the rule "forbidden-op" (judge.call_failure).
ERROR_NAME = "ForbiddenOpError"


class ForbiddenOpError(RuntimeError):
    """A kernel called an ATen op its task forbids."""


def _refusal(op: str) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise ForbiddenOpError(f"{op} is forbidden in this task")
    return refuse


@dataclass
class Block:
    """The registrations that refuse the forbidden ops, and what the dispatcher said about them.

    ``lib`` must stay alive: destroying it restores the original kernels. ``registrations`` is
    the dispatcher's own listing of every kernel registered for the blocked key on each blocked
    overload (ours active, the original inactive under it), taken right after the block: code
    that registers its own kernel over ours (``Library("aten", "IMPL").impl("mm", ...)``, the
    way back to cuBLAS through a function of its own) adds a line there, so :func:`intact` sees it.
    """

    lib: Library | None = None
    key: str = ""
    blocked: list[str] = field(default_factory=list)
    registrations: dict[str, list[str]] = field(default_factory=dict)


def _registered(qualified: str, key: str) -> list[str]:
    """The dispatcher's lines for ``key`` on one op overload (``aten::mm``): active and inactive."""
    dump = torch._C._dispatch_dump(qualified)
    return [line for line in dump.splitlines() if line.startswith((f"{key}:", f"{key} (inactive):"))]


def block(ops: Iterable[str], device_type: str) -> Block:
    """Replace the kernels of ``ops`` (``aten::name``) for ``device_type`` with refusals.

    Returns the :class:`Block`, which the worker keeps for its life and checks after every call.
    """
    key = {"cuda": "CUDA", "cpu": "CPU"}[device_type]
    out = Block(key=key)
    for op in ops:
        namespace, _, name = op.partition("::")
        if namespace != "aten" or not hasattr(torch.ops.aten, name):
            continue
        packet = getattr(torch.ops.aten, name)
        for overload in packet.overloads():
            qualified = name if overload == "default" else f"{name}.{overload}"
            try:
                has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{qualified}", key)
            except RuntimeError:  # a TorchScript-only overload (mul.left_t): not a dispatcher op
                continue
            if not has_kernel:
                continue  # composite here: it decomposes into ops that have kernels
            if out.lib is None:
                out.lib = Library("aten", "IMPL")
            with warnings.catch_warnings():  # "overriding a previously registered kernel": the point
                warnings.simplefilter("ignore")
                out.lib.impl(qualified, _refusal(op), key)
            out.blocked.append(f"aten::{qualified}")
    out.registrations = {op: _registered(op, key) for op in out.blocked}
    return out


def intact(state: Block) -> bool:
    """Whether the block still stands: its library is alive and nothing registered over it."""
    if not state.blocked:
        return True
    if state.lib is None or state.lib.m is None:
        return False
    return all(_registered(op, state.key) == lines for op, lines in state.registrations.items())
