# Class 5, caching keyed by a cheap fingerprint of a few elements: shape plus the signs of the
# first two elements (4 buckets). A naive judge (one input, timed repeatedly) sees a correct
# answer and a huge speedup. With 5 secret seeds at least two inputs share a bucket (pigeonhole),
# so a replayed answer is compared against a different input.
# Defence: several secret seeds; new contents every timed iteration; timed outputs checked.
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
        head = x.reshape(-1)[:2]
        key = (tuple(x.shape), bool(head[0] > 0), bool(head[1] > 0))
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
