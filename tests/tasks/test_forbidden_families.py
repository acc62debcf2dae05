"""A forbidden op that heads a family forbids the family: a GEMM task every library GEMM, an
attention task every fused attention kernel, whatever its task.toml names by hand."""

from __future__ import annotations

import pytest
import torch

from evaluator import op_block
from tasks.registry import load_tasks
from tasks.spec import ATTENTION_FAMILY, FAMILIES, GEMM_FAMILY, Forbidden


def test_the_head_of_a_family_brings_every_member_once() -> None:
    spec = Forbidden(aten=["aten::mm", "aten::addmm", "aten::softmax"])
    assert spec.aten[:3] == ["aten::mm", "aten::addmm", "aten::softmax"]  # the task's own list first
    assert set(GEMM_FAMILY) <= set(spec.aten) and len(spec.aten) == len(set(spec.aten))
    assert not set(ATTENTION_FAMILY) & set(spec.aten)
    assert Forbidden(aten=["aten::silu"]).aten == ["aten::silu"]


def test_every_task_that_names_a_head_forbids_its_family() -> None:
    tasks = load_tasks(strict=True).tasks
    heads = {head: [t.slug for t in tasks if head in t.spec.forbidden.aten] for head in FAMILIES}
    assert len(heads["aten::mm"]) >= 4 and len(heads["aten::scaled_dot_product_attention"]) == 6
    for head, slugs in heads.items():
        for slug in slugs:
            task = next(t for t in tasks if t.slug == slug)
            assert set(FAMILIES[head]) <= set(task.spec.forbidden.aten), slug


def test_a_gemm_the_list_never_named_is_refused_in_an_untrusted_worker() -> None:
    state = op_block.block(Forbidden(aten=["aten::mm"]).aten, "cpu")
    try:
        with pytest.raises(op_block.ForbiddenOpError, match="aten::addmv"):
            torch.addmv(torch.zeros(3), torch.ones(3, 4), torch.ones(4))
        with pytest.raises(op_block.ForbiddenOpError, match="aten::_addmm_activation"):
            torch.ops.aten._addmm_activation(torch.zeros(3), torch.ones(3, 4), torch.ones(4, 3))
    finally:
        state.lib._destroy()
