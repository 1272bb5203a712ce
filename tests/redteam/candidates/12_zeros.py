# Class 12, degenerate task: the reference of tasks/degenerate_zero.py is relu(-|x|) == 0 for
# every input, so this candidate writes zeros without reading x and is genuinely "correct".
# The judge cannot tell; the defence is task vetting (`kernelcraft tasks vet` flags the task).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _zeros_kernel(out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros((BLOCK,), dtype=tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        n = out.numel()
        block = 1024 if x.is_cuda else 1 << 16
        _zeros_kernel[(triton.cdiv(n, block),)](out, n, BLOCK=block)
        return out
