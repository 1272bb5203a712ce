# Class 5, caching keyed by input shape: the first call computes ReLU with a Triton kernel, every
# later call with the same shape/dtype/device returns the stored result (no work at all). A
# naive judge that checks one input and then times the same input sees a correct answer and a
# huge speedup.
# Defence: several secret seeds for correctness and new input contents every timed iteration,
# with timed outputs spot-checked: the replayed answer is wrong (incorrect).
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


_cache = {}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        key = (tuple(x.shape), x.dtype, x.device)
        hit = _cache.get(key)
        if hit is not None:
            return hit
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        block = 1024 if x.is_cuda else 1 << 16
        _relu_kernel[(triton.cdiv(n, block),)](x, out, n, BLOCK=block)
        _cache[key] = out
        return out
