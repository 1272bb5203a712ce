"""The per-device timing lock: a file lock, so it holds across threads, processes and separate
kernelcraft invocations on one machine. Held only while timing."""

from __future__ import annotations

import fcntl
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def device_lock(cache_dir: Path, device: str, index: int) -> Iterator[None]:
    path = cache_dir / "locks" / f"{device}-{index}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
