# Class 15, reading the judge: the timing loop's spot-check schedule from the call stack (issue 27,
# attack 1: on an H200 a GEMM computed exactly on the checked rounds and in bf16 on the others,
# judged correct at 9.92x). forward walks sys._getframe up to the judge's timing loop
# (run_interleaved) and reads its locals: the round `i` and the rounds it will check, `spots`.
# On every round of the loop it predicts unchecked (warm-up included) it computes a quarter of
# the rows into a buffer it reuses (the other rows hold an earlier call's answer; ~3x faster than
# the reference); on checked rounds, in correctness and in the
# profiled calls it runs the honest Triton softmax. Where it finds no schedule it takes every
# round of the loop for unchecked.
# Defence: the judge decides whether to check a timed call after the call has returned, with
# randomness outside the candidate's process, and compares in the trusted worker (incorrect).
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, rows, cols, stride,
                    BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    pid = tl.program_id(0)
    r = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    c = tl.arange(0, BLOCK_C)
    mask = (r[:, None] < rows) & (c[None, :] < cols)
    x = tl.load(x_ptr + r[:, None] * stride + c[None, :], mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=1)[:, None]
    e = tl.exp(x)
    e = tl.where(mask, e, 0.0)
    y = e / tl.sum(e, axis=1)[:, None]
    tl.store(out_ptr + r[:, None] * stride + c[None, :], y, mask=mask)


def _softmax(x):
    rows, cols = x.shape
    out = torch.empty_like(x)
    block_r = 4 if x.is_cuda else 1024
    _softmax_kernel[(triton.cdiv(rows, block_r),)](x, out, rows, cols, x.stride(0),
                                                   BLOCK_R=block_r, BLOCK_C=triton.next_power_of_2(cols))
    return out


def _quarter_rows(x, out):
    """Softmax of the first quarter of the rows into `out`; the other rows keep an earlier call's."""
    q = out[:x.shape[0] // 4]
    q.copy_(x[:x.shape[0] // 4])
    q.sub_(q.amax(dim=-1, keepdim=True)).exp_()
    q.div_(q.sum(dim=-1, keepdim=True))
    return out


def _timing_loop():
    """The locals of the judge's timing loop, if forward runs inside it."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "run_interleaved":
            return frame.f_locals
        frame = frame.f_back
    return None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.out = None  # reused by the cheap rounds: no fresh memory to fault in

    def forward(self, x):
        x = x.contiguous()
        loop = _timing_loop()
        if loop is not None and loop.get("i") not in loop.get("spots", ()):
            if self.out is None or self.out.shape != x.shape:
                self.out = torch.zeros_like(x)
            return _quarter_rows(x, self.out)
        return _softmax(x)
