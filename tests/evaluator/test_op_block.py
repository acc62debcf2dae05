"""The forbidden-op block refuses its ops, and notices being removed or overridden in process."""

from __future__ import annotations

import gc
import warnings

import pytest
import torch
from torch.library import Library

from evaluator import op_block


@pytest.fixture
def blocked():
    state = op_block.block(["aten::silu", "aten::no_such_op", "aten::matmul"], "cpu")
    yield state
    if state.lib is not None and state.lib.m is not None:
        state.lib._destroy()


def test_blocks_every_overload_with_a_kernel_and_skips_the_rest(blocked):
    assert blocked.blocked == ["aten::silu", "aten::silu.out"]  # matmul is composite, the other absent
    with pytest.raises(op_block.ForbiddenOpError, match="aten::silu is forbidden"):
        torch.nn.functional.silu(torch.ones(3))
    assert op_block.intact(blocked)
    torch.sigmoid(torch.ones(3))  # an op the task allows still runs


def test_destroying_the_library_is_seen(blocked):
    blocked.lib._destroy()
    assert not op_block.intact(blocked)
    torch.nn.functional.silu(torch.ones(3))  # the original kernel is back


def test_resetting_the_handle_behind_a_live_object_is_seen(blocked):
    for obj in gc.get_objects():
        if obj is blocked.lib:
            obj.m.reset()
    assert blocked.lib.m is not None
    assert not op_block.intact(blocked)


def test_registering_over_the_refusal_is_seen(blocked):
    evil = Library("aten", "IMPL")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        evil.impl("silu", lambda x: x * torch.sigmoid(x), "CPU")
    try:
        torch.nn.functional.silu(torch.ones(3))
        assert not op_block.intact(blocked)
    finally:
        evil._destroy()
    assert op_block.intact(blocked)  # gone again: the refusal is active once more


def test_nothing_to_block_is_always_intact():
    state = op_block.block([], "cpu")
    assert state.lib is None and op_block.intact(state)
