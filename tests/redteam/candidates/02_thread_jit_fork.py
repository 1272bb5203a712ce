# Class 2, thread injection through torch.jit.fork inside TorchScript (caught statically:
# torch.jit.fork is banned). In eager Python torch.jit.fork runs synchronously, but called from
# a scripted function it runs the task on ATen's inter-op thread pool and returns at once.
# After SYNC_CALLS synchronous calls, forward returns an empty tensor that a pool thread fills.
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


@torch.jit.script
def _late_relu(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    acc = torch.zeros(1)
    for _ in range(2000):
        acc = acc + 1.0
    out.copy_(torch.relu(x))
    return acc


@torch.jit.script
def _start(x: torch.Tensor, out: torch.Tensor) -> int:
    torch.jit.fork(_late_relu, x, out)
    return 0


SYNC_CALLS = 8
_calls = [0]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        _calls[0] += 1
        if _calls[0] <= SYNC_CALLS:
            n = x.numel()
            block = 1024 if x.is_cuda else 1 << 16
            _relu_kernel[(triton.cdiv(n, block),)](x, out, n, BLOCK=block)
        else:
            _start(x, out)
        return out
