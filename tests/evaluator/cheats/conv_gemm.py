"""Planted cheat (task w4a16-awq-gemm): dequantizes the weight with PyTorch ops and hands the GEMM
to a 1x1 convolution, a library GEMM (cuDNN on a GPU) under another name, behind a fig-leaf Triton
launch. task.toml lists the matmul routes by name; a convolution is not among them.
Caught by: the forbidden-op family (tasks/spec.py GEMM_FAMILY): a task that forbids aten::mm
forbids every library matrix product, so the recorder sees aten::convolution in the checked
calls (eval:user:forbidden-op), and on a GPU the op block refuses cudnn_convolution in every call.
"""

import torch
import triton
import triton.language as tl

AWQ_NIBBLE = [0, 4, 1, 5, 2, 6, 3, 7]


@triton.jit
def _touch(x_ptr):
    tl.load(x_ptr)


def _unpack(packed):
    shifts = torch.arange(0, 32, 4, dtype=torch.int32, device=packed.device)
    nibbles = (packed.unsqueeze(-1) >> shifts) & 0xF
    return nibbles[:, :, torch.tensor(AWQ_NIBBLE, device=packed.device)].reshape(packed.shape[0], -1)


def awq_gemm(x, qweight, qzeros, scales, group_size):
    _touch[(1,)](x)
    zeros = _unpack(qzeros).repeat_interleave(group_size, dim=0)
    w = (_unpack(qweight) - zeros).to(torch.float32) * scales.float().repeat_interleave(group_size, dim=0)
    # out[m, n] = sum_k x[m, k] w[k, n]: a 1x1 convolution with K input and N output channels.
    out = torch.nn.functional.conv1d(x.float().unsqueeze(-1), w.t().unsqueeze(-1)).squeeze(-1)
    return out.to(x.dtype)
