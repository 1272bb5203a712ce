# Honest control: numerically stable row softmax in Triton (a block of rows per program).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, rows, cols, stride,
                    BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    pid = tl.program_id(0)
    r = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    c = tl.arange(0, BLOCK_C)
    mask = (r[:, None] < rows) & (c[None, :] < cols)
    x = tl.load(x_ptr + r[:, None] * stride + c[None, :], mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=1)[:, None]
    e = tl.exp(x)
    e = tl.where(mask, e, 0.0)
    y = e / tl.sum(e, axis=1)[:, None]
    tl.store(out_ptr + r[:, None] * stride + c[None, :], y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty_like(x)
        block_c = triton.next_power_of_2(cols)
        block_r = 4 if x.is_cuda else 1024
        _softmax_kernel[(triton.cdiv(rows, block_r),)](x, out, rows, cols, x.stride(0),
                                                       BLOCK_R=block_r, BLOCK_C=block_c)
        return out
