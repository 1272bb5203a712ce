"""The per-device lock: file locks, so it holds across threads, processes and separate kernelcraft
invocations on one machine. Timing (and profiling) hold it exclusively; the judge's other work on
the device (computing outputs for correctness, making inputs) holds it shared, so nothing of the
judge's runs on the device while a candidate is timed, and the rest still overlaps. `file_lock`: the
same kind of lock on one shared file of the judge's (a build, the ceilings)."""

from __future__ import annotations

import fcntl
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterator

from .device import device_key


@contextmanager
def device_lock(cache_dir: Path, device: str, index: int, *, shared: bool = False) -> Iterator[None]:
    """Hold the device's lock, exclusively or `shared`. A waiting exclusive holder goes first: it takes
    a turnstile that new shared holders pass through, so a stream of correctness checks cannot
    keep timing waiting forever."""
    base = cache_dir / "locks" / device_key(device, index)
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


@contextmanager
def file_lock(path: Path, timeout: float, *, shared: bool = False) -> Iterator[bool]:
    """Hold a lock on `path` (made if missing), exclusively or `shared`, waiting at most `timeout`
    seconds; yields whether it was taken. A holder that never lets go (a judge stopped for hours)
    must not stall every other judge: past the timeout the caller goes on without it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout
    with open(path, "a") as f:
        while True:
            try:
                fcntl.flock(f, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.1)
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
