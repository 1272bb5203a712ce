"""Device ceilings for the physical-floor audit: memory bandwidth and matmul peak, measured once
per device (in a worker) and cached by the parent in the judge's cache directory."""

from __future__ import annotations

import functools
import time
from typing import Any

import torch


def _times_ms(fn: Any, device: torch.device, reps: int) -> list[float]:
    times = []
    for _ in range(reps):
        if device.type == "cuda":
            torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return sorted(times)


def measure_ceilings(device: torch.device) -> dict[str, Any]:
    """Copy bandwidth (bytes read + written per second) and the best matmul rate over dtypes."""
    cuda = device.type == "cuda"
    # The floor must never exceed what an honest kernel can reach, so the ceiling is the best
    # copy rate over working sets from cache-resident to far larger than any cache.
    sizes = (1 << 21, 1 << 23, 1 << 28) if cuda else (1 << 18, 1 << 21, 1 << 25)  # fp32 elements
    # The best of many copies, not the median: a ceiling is what the machine can do at its best.
    bandwidth = 0.0
    for n in sizes:
        a = torch.empty(n, dtype=torch.float32, device=device).uniform_()
        b = torch.empty_like(a)
        for _ in range(3):
            b.copy_(a)
        ms = _times_ms(functools.partial(b.copy_, a), device, 20 if cuda else 50)[0]
        bandwidth = max(bandwidth, 2 * n * 4 / (ms / 1e3))
        del a, b
    peaks: dict[str, float] = {}
    dtypes = (torch.bfloat16, torch.float16, torch.float32) if cuda else (torch.float32,)
    m = 8192 if cuda else 1024
    for dt in dtypes:
        x = torch.randn(m, m, device=device, dtype=dt)
        y = torch.randn(m, m, device=device, dtype=dt)
        for _ in range(2):
            x @ y
        ms = _times_ms(functools.partial(torch.matmul, x, y), device, 10 if cuda else 3)[0]
        peaks[str(dt).removeprefix("torch.")] = 2 * m**3 / (ms / 1e3)
    return {"bandwidth_bytes_per_s": bandwidth, "peak_flops": peaks, "max_flops": max(peaks.values())}
