"""`LocalPool`, the executor of one machine: several worker processes per device evaluating at once
(builds, loads and correctness in parallel on the CPU cores), each device's timing serialised by its
lock, builds shared by every device through the one build cache, and each task kept to one device while
that device has work (affinity.py)."""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Iterable, Iterator

from .affinity import AffinityQueue, Pending
from .config import JudgeConfig
from .device import DeviceDescription, cpu_slices, describe_device
from .evaluate import Judge
from .executor import Job, Result, judged_map, run_job
from .sandbox import kill_all_workers


class LocalPool:
    """Evaluate many candidates on the local machine: `workers` concurrent evaluations per device, spread
    over `device_indices` (the GPUs; the CPU is the one device 0). Each device's `workers` threads take the
    jobs of the tasks it judges first."""

    def __init__(self, device: str, *, cache_dir: Path, config: JudgeConfig | None = None,
                 device_indices: Iterable[int] = (0,), workers: int | None = None) -> None:
        indices = list(device_indices)
        per_device = workers or max(1, min(8, (os.cpu_count() or 2) // (2 * len(indices))))
        self.device = device
        self.device_indices = indices
        self.workers = per_device * len(indices)
        build_jobs = max(1, (os.cpu_count() or 1) // self.workers)
        # Each GPU's untrusted processes on host CPUs of its own: a measurement stops only its own device's
        # (sandbox.hold_still), and the others' must not share a core with the timed call.
        slices = cpu_slices(len(indices)) if device == "cuda" else None
        self.judges = [Judge(device, cache_dir=cache_dir, config=config, device_index=i, build_jobs=build_jobs,
                             spare_workers=per_device, cpus=slices[n] if slices else None) for n, i in enumerate(indices)]
        self._queue = AffinityQueue()
        self._cv = threading.Condition()
        self._closed = False
        self._threads = [threading.Thread(target=self._serve, args=(j,), name=f"kc-judge-{indices[j]}-{n}", daemon=True)
                         for j in range(len(self.judges)) for n in range(per_device)]
        for t in self._threads:
            t.start()

    @property
    def description(self) -> DeviceDescription:
        return describe_device(self.device, self.device_indices[0])

    def __enter__(self) -> "LocalPool":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is not None:  # interrupted: stop the evaluations in flight, not wait for them
            self._cancel_pending()
            kill_all_workers()
        self.close()

    def close(self) -> None:
        """Cancel what no worker has taken, wait for the evaluations in flight, stop the judges."""
        self._cancel_pending()
        for t in self._threads:
            t.join()
        for judge in self.judges:
            judge.close()

    def _cancel_pending(self) -> None:
        with self._cv:
            self._closed = True
            left = self._queue.drain()
            self._cv.notify_all()
        for item in left:
            item.future.cancel()

    def submit(self, job: Job) -> "Future[Result]":
        item = Pending(job)
        with self._cv:
            if self._closed:
                raise RuntimeError("the pool is closed")
            self._queue.put(item)
            self._cv.notify_all()
        return item.future

    def map(self, jobs: Iterable[Job]) -> Iterator[Result]:
        """Results in completion order (executor.judged_map)."""
        return judged_map(self, jobs)

    def _serve(self, j: int) -> None:
        """One of judge `j`'s threads: its jobs, one at a time, until the pool closes."""
        while True:
            with self._cv:
                item = None
                while not self._closed and (item := self._queue.take(j)) is None:
                    self._cv.wait()
                if item is None:
                    return
            if not item.future.set_running_or_notify_cancel():
                continue
            try:
                item.future.set_result(run_job(self.judges[j], item.job))
            except Exception as e:  # noqa: BLE001 - the caller's future carries it
                item.future.set_exception(e)
