# Class 7, input mutation: the kernel never computes x*2+y. It zeroes x and y in place and
# returns zeros. A judge that runs the candidate first and the reference afterwards on the
# same tensors gets 0*2+0 == 0 from the reference too: "correct".
# Defences: each side gets its own input copy (the reference is computed by a trusted process
# anyway), inputs hashed before/after the call (modified: incorrect).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _zero_all_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    z = tl.zeros((BLOCK,), dtype=tl.float32)
    tl.store(x_ptr + offs, z, mask=mask)
    tl.store(y_ptr + offs, z, mask=mask)
    tl.store(out_ptr + offs, z, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        out = torch.empty_like(x)
        n = x.numel()
        block = 1024 if x.is_cuda else 1 << 16
        _zero_all_kernel[(triton.cdiv(n, block),)](x, y, out, n, BLOCK=block)
        return out
