# Class 10, decoy / lazy optimisation (GPU): torch.matmul (cuBLAS) does the whole product; the
# candidate's Triton kernel only rewrites the first 64 elements of C (an "epilogue" that adds
# 0). A custom kernel ran, so "zero launches" does not fire, but its share of device time is
# ~0.01 %. Defence: profiler coverage: flag low_coverage.
import torch
import torch.nn as nn
import triton
import triton.language as tl


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
