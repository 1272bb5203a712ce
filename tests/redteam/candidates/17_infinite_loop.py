# Class 17, resource abuse: forward never returns (a pure-Python busy loop, so no GIL release
# and no signal-friendly sleep). The judge must end it at the stage's time limit, kill the
# whole process group, and report timeout.
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
        spins = 0
        while True:
            spins += 1
        return x
