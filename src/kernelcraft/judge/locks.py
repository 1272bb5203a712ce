"""The per-device lock: file locks, so it holds across threads, processes and separate kernelcraft
invocations on one machine. Timing (and profiling) hold it exclusively; the judge's other work on
the device (computing outputs for correctness, making inputs) holds it shared, so nothing of the
judge's runs on the device while a candidate is timed, and the rest still overlaps."""

from __future__ import annotations

import fcntl
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def device_lock(cache_dir: Path, device: str, index: int, *, shared: bool = False) -> Iterator[None]:
    """Hold the device's lock, exclusively or `shared`. A waiting exclusive holder goes first: it takes
    a turnstile that new shared holders pass through, so a stream of correctness checks cannot
    keep timing waiting forever."""
    base = cache_dir / "locks" / f"{device}-{index}"
    base.parent.mkdir(parents=True, exist_ok=True)
    with ExitStack() as held:
        gate = held.enter_context(open(f"{base}.turnstile", "w"))
        lock = held.enter_context(open(f"{base}.lock", "w"))
        fcntl.flock(gate, fcntl.LOCK_EX)
        held.callback(fcntl.flock, gate, fcntl.LOCK_UN)
        fcntl.flock(lock, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        held.callback(fcntl.flock, lock, fcntl.LOCK_UN)
        if shared:  # through the turnstile: let the next one in
            fcntl.flock(gate, fcntl.LOCK_UN)
        yield
