# Class 15, reading (and writing) the judge's memory: gc.get_objects() finds the judge's worker
# object in the candidate's own process (issue 27, attack 3). The first call sets the worker's
# tolerances to 1.0 and its configuration's spot checks to 0; from then on every call inside the
# judge's timing loop (found on the call stack) computes a quarter of the rows and leaves 1/cols,
# the mean of a softmax row, in the others (within the loosened tolerance; ~3x faster than the
# reference).
# Correctness and the profiled calls run the honest Triton softmax.
# Defence: the candidate's worker decides nothing and compares nothing: the judge draws the
# checks with its own configuration, and the trusted worker compares with the judge's tolerances
# (incorrect).
import dataclasses
import gc
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
    """Softmax of the first quarter of the rows into `out`, whose other rows hold 1/cols."""
    q = out[:x.shape[0] // 4]
    q.copy_(x[:x.shape[0] // 4])
    q.sub_(q.amax(dim=-1, keepdim=True)).exp_()
    q.div_(q.sum(dim=-1, keepdim=True))
    return out


def _loosen_the_judge():
    """Every object that looks like the judge's worker: tolerances 1.0, no spot checks."""
    found = 0
    for obj in gc.get_objects():
        if type(obj).__name__ == "Worker" and hasattr(obj, "cfg") and hasattr(obj, "atol"):
            obj.atol = obj.rtol = 1.0
            obj.cfg = dataclasses.replace(obj.cfg, timing=dataclasses.replace(obj.cfg.timing, spot_checks=0))
            found += 1
    return found


def _in_timing_loop():
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "run_interleaved":
            return True
        frame = frame.f_back
    return False


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.loosened = 0
        self.out = None  # reused by the cheap calls: no fresh memory to fault in

    def forward(self, x):
        x = x.contiguous()
        if not self.loosened:
            self.loosened = _loosen_the_judge()
        if _in_timing_loop():
            if self.out is None or self.out.shape != x.shape:
                self.out = torch.full_like(x, 1.0 / x.shape[1])
            return _quarter_rows(x, self.out)
        return _softmax(x)
