"""Record the ATen ops a kernel's Python launcher runs, to catch PyTorch doing the real work.

A Triton launch does not pass through the ATen dispatcher, so during a correct submission's call
the only ATen ops are allocation, views and copies. Anything else (``aten::mm``, ``aten::add``)
means PyTorch computed part of the answer: a forbidden op of the task fails the trial, any other
compute op is a finding for the moderators ("fig-leaf" kernels around torch compute).
"""

from __future__ import annotations

from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode

#: Ops a launcher may use to allocate, reshape and move data; none of them computes an answer.
LAUNCHER_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "fill_", "zero_",
    "view", "_unsafe_view", "reshape", "as_strided", "t", "transpose", "permute", "expand", "slice",
    "select", "unsqueeze", "squeeze", "split", "split_with_sizes", "chunk", "narrow", "unbind",
    "contiguous", "clone", "copy_", "detach", "alias", "lift_fresh", "_to_copy", "to", "view_as",
    "arange", "resize_", "set_", "_reshape_alias", "unflatten", "flatten", "item", "_local_scalar_dense",
    "is_nonzero", "record_stream", "size", "stride", "numel", "dim", "_has_compatible_shallow_copy_type",
})


def short_name(func: Any) -> str:
    """``aten::name`` without the overload, as tasks list them."""
    name = getattr(func, "_schema", None)
    text = name.name if name is not None else str(func)
    return text if text.startswith("aten::") else f"aten::{text.split('.')[0]}"


class AtenRecorder(TorchDispatchMode):
    """Collects the names of ATen ops dispatched while active."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        self.ops.add(short_name(func))
        return func(*args, **(kwargs or {}))

    def compute_ops(self) -> set[str]:
        return {op for op in self.ops if op.removeprefix("aten::") not in LAUNCHER_OPS}
