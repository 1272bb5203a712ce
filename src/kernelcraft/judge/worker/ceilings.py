"""Device ceilings for the physical-floor audit, measured in a trusted worker: memory bandwidth and
matmul peak (the judge caches them: judge/ceilings.py)."""

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


def _thread_counts(device: torch.device) -> list[int]:
    # On the CPU the best rate comes from one thread or from all, depending on what else runs: a
    # copy split over every core waits for the slowest, and one core taken by another process
    # halves it, while a single-threaded candidate runs at one core's full rate.
    return sorted({1, torch.get_num_threads()}) if device.type == "cpu" else [torch.get_num_threads()]


def best_of(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """The higher of two measurements of each ceiling: a ceiling is what the device can do at best."""
    if not old:
        return new
    peaks = {k: max(old["peak_flops"].get(k, 0.0), v) for k, v in new["peak_flops"].items()}
    return {"bandwidth_bytes_per_s": max(old["bandwidth_bytes_per_s"], new["bandwidth_bytes_per_s"]),
            "peak_flops": peaks, "max_flops": max(peaks.values())}


def measure_ceilings(device: torch.device) -> dict[str, Any]:
    """Copy bandwidth (bytes read + written per second) and the best matmul rate over dtypes (on the
    CPU, the better of one thread and all of them)."""
    threads = torch.get_num_threads()
    best: dict[str, Any] = {}
    try:
        for n in _thread_counts(device):
            torch.set_num_threads(n)
            best = best_of(best, _measure(device))
    finally:
        torch.set_num_threads(threads)
    return best


def _measure(device: torch.device) -> dict[str, Any]:
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
