# Honest control: ReLU as one Triton kernel (GPU, or CPU through the Triton interpreter).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        # big blocks on CPU: the interpreter's cost is per program, not per element
        block = 1024 if x.is_cuda else 1 << 16
        _relu_kernel[(triton.cdiv(n, block),)](x, out, n, BLOCK=block)
        return out
