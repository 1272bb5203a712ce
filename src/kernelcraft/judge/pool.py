"""`LocalPool`, the executor of one machine: several worker processes per device evaluating at once
(builds, loads and correctness in parallel on the CPU cores), each device's timing serialised by its
lock, builds shared by every device through the one build cache."""

from __future__ import annotations

import itertools
import os
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterable, Iterator

from .config import JudgeConfig
from .device import DeviceDescription, describe_device
from .evaluate import Judge
from .executor import Job, Result, judged_map, run_job
from .sandbox import kill_all_workers


class LocalPool:
    """Evaluate many candidates on the local machine: `workers` concurrent evaluations per device, spread
    over `device_indices` (the GPUs; the CPU is the one device 0)."""

    def __init__(self, device: str, *, cache_dir: Path, config: JudgeConfig | None = None,
                 device_indices: Iterable[int] = (0,), workers: int | None = None) -> None:
        indices = list(device_indices)
        per_device = workers or max(1, min(8, (os.cpu_count() or 2) // (2 * len(indices))))
        self.device = device
        self.device_indices = indices
        self.workers = per_device * len(indices)
        build_jobs = max(1, (os.cpu_count() or 1) // self.workers)
        self.judges = [Judge(device, cache_dir=cache_dir, config=config, device_index=i, build_jobs=build_jobs,
                             spare_workers=per_device) for i in indices]
        self._next = itertools.cycle(self.judges)
        self._executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="kc-judge")

    @property
    def description(self) -> DeviceDescription:
        return describe_device(self.device, self.device_indices[0])

    def __enter__(self) -> "LocalPool":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is not None:  # interrupted: stop the evaluations in flight, not wait for them
            self._executor.shutdown(wait=False, cancel_futures=True)
            kill_all_workers()
        self.close()

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
        for judge in self.judges:
            judge.close()

    def submit(self, job: Job) -> "Future[Result]":
        return self._executor.submit(run_job, next(self._next), job)

    def map(self, jobs: Iterable[Job]) -> Iterator[Result]:
        """Results in completion order (executor.judged_map)."""
        return judged_map(self, jobs)
