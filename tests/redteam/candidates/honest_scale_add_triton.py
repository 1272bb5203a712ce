# Honest control: x * 2 + y fused into one Triton kernel.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scale_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.load(y_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, x * 2.0 + y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        x = x.contiguous()
        y = y.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        block = 1024 if x.is_cuda else 1 << 16
        _scale_add_kernel[(triton.cdiv(n, block),)](x, y, out, n, BLOCK=block)
        return out
