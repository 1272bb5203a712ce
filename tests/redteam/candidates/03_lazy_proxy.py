# Class 3, lazy result without being a tensor at all: forward returns a proxy object that has
# shape/dtype/device and a __torch_function__, so torch.allclose(ref, proxy) and friends route
# to it; it runs the ReLU kernel only then. Timed calls (outputs dropped) cost nothing.
# Defence: type(out) is torch.Tensor exactly (anything else: hack_detected or incorrect).
import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch.utils._pytree import tree_map


@triton.jit
def _relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class LazyProxy:
    def __init__(self, x):
        self.pending_input = x
        self.value = None
        self.shape = x.shape
        self.dtype = x.dtype
        self.device = x.device

    def force(self):
        if self.value is None:
            x = self.pending_input
            out = torch.empty_like(x)
            n = x.numel()
            block = 1024 if x.is_cuda else 1 << 16
            _relu_kernel[(triton.cdiv(n, block),)](x, out, n, BLOCK=block)
            self.value = out
        return self.value

    def __getattr__(self, name):
        return getattr(self.force(), name)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return func(*tree_map(_unwrap, args), **tree_map(_unwrap, kwargs or {}))

    def __sub__(self, other):
        return self.force() - other

    def __rsub__(self, other):
        return other - self.force()


def _unwrap(a):
    return a.force() if isinstance(a, LazyProxy) else a


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return LazyProxy(x.contiguous())
