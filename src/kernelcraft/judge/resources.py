"""What an evaluation took of the machine (parent side): the peak disk of its worker's directory,
the peak resident memory of a process, the bytes of the builds it made. Reported per verdict, so
the judge's own bounds are measured, not assumed."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any


def dir_bytes(path: Path) -> int:
    """Bytes of the files under `path` (0 when it is gone)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def peak_rss(pid: int) -> int:
    """The peak resident memory of a live process (VmHWM), in bytes; 0 where it cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def builds_bytes(cache_dir: Path, verdict: Any) -> int:
    """Bytes of the extension builds the verdict's build stage names (shared with later candidates)."""
    stage = verdict.stage("build")
    keys = stage.details.get("keys", []) if stage else []
    return sum(dir_bytes(cache_dir / "builds" / f"kc_{key}") for key in keys)


class PeakDisk:
    """Samples a directory's size twice a second while in use; `peak` is the largest seen."""

    def __init__(self, path: Path, every_s: float = 0.5) -> None:
        self.path, self.every_s = path, every_s
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True, name="kc-disk")

    def _watch(self) -> None:
        while True:
            self.peak = max(self.peak, dir_bytes(self.path))
            if self._stop.wait(self.every_s):
                return

    def __enter__(self) -> "PeakDisk":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
