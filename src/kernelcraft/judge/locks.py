"""The per-device lock: file locks, so it holds across threads, processes and separate kernelcraft
invocations on one machine. Timing (and profiling) hold it exclusively; the judge's other work on
the device (computing outputs for correctness, making inputs) holds it shared, so nothing of the
judge's runs on the device while a candidate is timed, and the rest still overlaps. The lock is the
machine's, not a cache directory's: judges with caches of their own (two runs, two CI test processes)
share the one device, and two measurements side by side slowed each other 2.5x on a 2-core host.
`file_lock`: the same kind of lock on one shared file of the judge's (a build, the ceilings)."""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterator

from .device import device_key


def machine_lock_dir() -> Path:
    """Where the device locks of this machine live: one directory for every user's judges (sticky and
    open to all, as /tmp is), outside any workspace and out of the workers' reach (isolation.policy)."""
    root = Path(tempfile.gettempdir()) / "kernelcraft-locks"
    try:
        root.mkdir(mode=0o1777)
        os.chmod(root, 0o1777)  # mkdir's mode passes through the umask
    except FileExistsError:
        pass
    return root


def _open_lock(path: Path) -> int:
    """A descriptor to flock `path` through, made if missing. Read-only: another user's lock file (0644
    after their umask) is locked as well through one."""
    return os.open(path, os.O_RDONLY | os.O_CREAT, 0o666)


@contextmanager
def device_lock(device: str, index: int, *, shared: bool = False) -> Iterator[None]:
    """Hold the device's lock, exclusively or `shared`. A waiting exclusive holder goes first: it takes
    a turnstile that new shared holders pass through, so a stream of correctness checks cannot
    keep timing waiting forever."""
    base = machine_lock_dir() / device_key(device, index)
    with ExitStack() as held:
        gate = _open_lock(Path(f"{base}.turnstile"))
        held.callback(os.close, gate)
        lock = _open_lock(Path(f"{base}.lock"))
        held.callback(os.close, lock)
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
