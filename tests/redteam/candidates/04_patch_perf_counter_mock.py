# Class 4, monkeypatching the CPU clock past the static layer (no `import time`):
# time.perf_counter is replaced, through unittest.mock, by a clock that subtracts 99.999 % of
# the time spent inside the candidate's forward: any interval containing a candidate call
# shrinks ~100000x; the reference's intervals are untouched. The real clock comes from
# timeit.default_timer (the same function object, bound before the patch).
# Defence: identity of time.perf_counter (and torch timing functions) checked after import
# and after every call (hack_detected).
from timeit import default_timer as _real_clock
from unittest import mock

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


_hidden = [0.0]


def _fake_perf_counter():
    return _real_clock() - _hidden[0]


mock.patch("time.perf_counter", new=_fake_perf_counter).start()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        t0 = _real_clock()
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        block = 1024 if x.is_cuda else 1 << 16
        _relu_kernel[(triton.cdiv(n, block),)](x, out, n, BLOCK=block)
        _hidden[0] += 0.99999 * (_real_clock() - t0)
        return out
