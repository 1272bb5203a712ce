"""Device memory shared by the evaluations of one device (parent side): an evaluation holds what its
task may need from its correctness stage until its worker is gone, so eight evaluations of a 6 GB
task wait for each other instead of running the device out of memory and failing honest kernels."""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import Iterator

import torch

# What evaluations may take of a device together: the rest is for the tasks' trusted workers, the
# contexts and what the allocators keep.
_SHARE = {"cuda": 0.85, "cpu": 0.6}


def memory_budget(device: str, index: int = 0) -> int:
    """Bytes the evaluations of one device may hold at once: a share of its memory (the host's for the CPU)."""
    if device == "cuda":
        total = torch.cuda.get_device_properties(index).total_memory
    else:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return int(total * _SHARE[device])


class MemoryBudget:
    """Bytes of one device that evaluations take and give back. A need larger than the whole budget
    takes all of it: the evaluation runs alone."""

    def __init__(self, total_bytes: int) -> None:
        self.total = max(1, total_bytes)
        self.free = self.total
        self._cond = threading.Condition()

    @contextmanager
    def hold(self, nbytes: int) -> Iterator[int]:
        """Wait until `nbytes` (capped at the budget) are free, and hold them for the block."""
        need = min(max(0, nbytes), self.total)
        with self._cond:
            self._cond.wait_for(lambda: self.free >= need)
            self.free -= need
        try:
            yield need
        finally:
            with self._cond:
                self.free += need
                self._cond.notify_all()
