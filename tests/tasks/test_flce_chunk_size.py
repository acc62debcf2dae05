"""The fused-linear-cross-entropy expert's chunk length (``_chunk_size``).

The chunk sets both the expert's peak memory (the [chunk, V] logits scratch) and how often the
fp32 dW is read back (once per chunk after the first). What must hold at every catalogue
workload: the scratch is no larger than ``SCRATCH_OVER_DW`` times dW, chunks stay within their
bounds, and a chunk is never shortened below what memory allows, since each extra chunk costs a
full read of dW.
"""

from __future__ import annotations

import pytest
import torch

from evaluator.modules import load_module
from tasks.registry import get_task

TASK = get_task("fused-linear-cross-entropy")
CUDA = torch.device("cuda")  # only its type is read: no GPU is needed


@pytest.fixture(scope="module")
def expert():
    return load_module(TASK.expert_path, "_flce_chunk_test")


@pytest.mark.parametrize("workload", TASK.workloads(), ids=lambda w: w.name)
def test_the_scratch_fits_within_its_share_of_dw(expert, workload) -> None:
    p = workload.params
    itemsize = {"bf16": 2, "fp16": 2, "fp32": 4}[p["dtype"]]
    chunk = expert._chunk_size(p["BT"], p["H"], itemsize, CUDA)
    assert 1 <= chunk <= min(p["BT"], expert.MAX_CHUNK)
    assert chunk * p["V"] * itemsize <= expert.SCRATCH_OVER_DW * p["V"] * p["H"] * 4 or chunk == expert.MIN_CHUNK
    # as long as memory allows: one token more per chunk would break the bound or a limit
    longer = chunk + 1
    assert (longer > p["BT"] or longer > expert.MAX_CHUNK
            or longer * itemsize > expert.SCRATCH_OVER_DW * p["H"] * 4)


def test_the_catalogue_chunks(expert) -> None:
    """W1 and W3 run as one chunk (no dW read-back); W2 (8K tokens, H = 2048) as two."""
    got = {w.name: expert._chunk_size(w.params["BT"], w.params["H"], 2, CUDA) for w in TASK.workloads()}
    assert got == {"W1": 4096, "W2": 4096, "W3": 2048}


def test_fp32_inputs_halve_the_chunk_and_the_interpreter_keeps_several(expert) -> None:
    assert expert._chunk_size(65536, 4096, 4, CUDA) == 4096
    assert expert._chunk_size(65536, 8192, 2, CUDA) == expert.MAX_CHUNK  # memory would allow 16K
    assert expert._chunk_size(65536, 256, 2, CUDA) == expert.MIN_CHUNK
    assert expert._chunk_size(37, 48, 4, torch.device("cpu")) == 32
