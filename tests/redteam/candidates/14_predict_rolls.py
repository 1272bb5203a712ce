# Class 14, the first call does all the work, by predicting the timed inputs (issue 27, attack 2:
# on the CPU a 0.1x candidate was judged correct at 1.24x this way). The timing loop rolls each
# round's inputs with a random generator that lives in the candidate's process. In the first
# timed round (discarded by the judge) forward finds the loop on the call stack, copies the
# generator's state, replays the rolls of every later round, and computes all their answers;
# each later round returns a copy of its precomputed answer (~2x faster than the reference).
# Where it finds no generator to copy it precomputes the answers for the unrolled input sets.
# Correctness and the profiled calls run the honest Triton softmax.
# Defence: the judge draws each round's input set and roll outside the candidate's process, at
# the round's start, and the trusted worker checks timed calls on inputs it makes itself
# (incorrect).
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
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


def _timing_loop():
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "run_interleaved":
            return frame.f_locals
        frame = frame.f_back
    return None


def _replica(rng):
    """A generator in the same state as the judge's, or None."""
    try:
        twin = type(rng)()
        twin.setstate(rng.getstate())
        return twin
    except Exception:  # noqa: BLE001 - none there, or one whose state cannot be read (OS randomness)
        return None


def _predict(loop):
    """Every later round's answer, from the loop's input sets and a copy of its roll generator."""
    sets, iters = loop["input_sets"], loop["iters"]
    twin = _replica(loop.get("rng"))
    answers = {}
    for j in range(1, iters + 1):
        xs = []
        for t in sets[j % len(sets)]:
            if twin is not None and isinstance(t, torch.Tensor) and t.numel() > 1:
                t = torch.roll(t.reshape(-1), twin.randrange(1, t.numel())).reshape(t.shape)
            xs.append(t)
        answers[j] = F.softmax(xs[0], dim=-1)
    return answers


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.answers = {}

    def forward(self, x):
        x = x.contiguous()
        loop = _timing_loop()
        if loop is None:
            return _softmax(x)
        i = loop.get("i")
        if i == 0:
            self.answers = _predict(loop)
        if i in self.answers:
            return self.answers[i].clone()
        return F.softmax(x, dim=-1)  # warm-up and the discarded round: neither is checked
