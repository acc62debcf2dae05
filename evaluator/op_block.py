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


def block(ops: Iterable[str], device_type: str) -> tuple[Library | None, list[str]]:
    """Replace the kernels of ``ops`` (``aten::name``) for ``device_type`` with refusals.

    Returns the library holding the registrations (it must stay alive: destroying it restores the
    original kernels, which :func:`intact` checks after every call) and the overloads blocked.
    """
    key = {"cuda": "CUDA", "cpu": "CPU"}[device_type]
    lib: Library | None = None
    blocked: list[str] = []
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
            if lib is None:
                lib = Library("aten", "IMPL")
            with warnings.catch_warnings():  # "overriding a previously registered kernel": the point
                warnings.simplefilter("ignore")
                lib.impl(qualified, _refusal(op), key)
            blocked.append(f"aten::{qualified}")
    return lib, blocked


def intact(lib: Library | None, blocked: list[str]) -> bool:
    """Whether the block still stands: the library was not destroyed by the code it guards."""
    return not blocked or (lib is not None and lib.m is not None)
