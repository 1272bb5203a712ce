# Class 13, partial check (one known seed): KernelBench-style judges seed the RNG with 42 and
# build the inputs with the task's get_inputs() (here randn(M, K) * 0.05, then randn(K, N)).
# The candidate regenerates exactly those inputs itself from the shapes it is given, computes
# their product ONCE, and afterwards returns that stored answer for any input (copied out by a
# kernel, so a launch happens). One-seed judge: correct, at the cost of an M*N copy instead
# of a 2*M*N*K matmul.
# Defence: several SECRET seeds (incorrect).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask, other=0.0), mask=mask)


_answers = {}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        key = (tuple(a.shape), tuple(b.shape), a.device)
        ans = _answers.get(key)
        if ans is None:
            g = torch.Generator().manual_seed(42)
            a_guess = torch.randn(tuple(a.shape), generator=g) * 0.05
            b_guess = torch.randn(tuple(b.shape), generator=g)
            ans = torch.mm(a_guess, b_guess).to(a.device)
            _answers[key] = ans
        out = torch.empty_like(ans)
        n = ans.numel()
        block = 1024 if a.is_cuda else 1 << 16
        _copy_kernel[(triton.cdiv(n, block),)](ans, out, n, BLOCK=block)
        return out
