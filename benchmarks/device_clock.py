"""A call's device time alone, for the benchmarks that set a kernel against cuBLAS's (gemm_gap.py,
cutlass_order.py): the call is queued behind the judge clock's L2 flush, so the host's work for it
(Python, binding, allocation, launch) overlaps the flush and only its kernels are timed. Imports
torch and the judge's clock only, so it runs on a bare GPU machine."""

from __future__ import annotations

from typing import Any, Callable

import torch

from kernelcraft.judge.worker.timing import Clock


def queued_ms(clock: Clock, fn: Callable[..., Any], args: list[Any]) -> float:
    """One call's device time: enqueued while the flush still runs, so the host's work is hidden."""
    clock.flush_buf.zero_()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn(*args)
    end.record()
    end.synchronize()
    return start.elapsed_time(end)
