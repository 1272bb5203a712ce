# Class 11, lower precision through the global TF32 switch (caught statically: assignment to an
# attribute of an imported module). torch.matmul then runs in TF32 on a GPU (~8x faster than
# fp32 on an H100, errors ~1e-3) while a trivial Triton "epilogue" provides a custom launch.
# With static checks off, the runtime layer must catch it: the TF32 / matmul-precision flags
# differ from the judge's after import (hack_detected).
import torch
import torch.nn as nn
import triton
import triton.language as tl

torch.backends.cuda.matmul.allow_tf32 = True


@triton.jit
def _epilogue_kernel(c_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(c_ptr + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, v + 0.0, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        c = torch.matmul(a, b)
        _epilogue_kernel[(1,)](c, 64, BLOCK=64)
        return c
