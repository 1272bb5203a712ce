"""Executors. `LocalPool`: several worker processes per device evaluating at once (builds, loads
and correctness in parallel on the CPU cores), each device's timing serialised by its lock.
A distributed executor (Ray) can implement the same `submit`/`map` interface."""

from __future__ import annotations

import itertools
import os
import time
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..tasks import Task
from .config import JudgeConfig
from .evaluate import Judge
from .reference import TaskRunError
from .sandbox import kill_all_workers
from .verdict import Verdict


@dataclass(frozen=True)
class Job:
    task: Task
    source: str
    tag: Any = None  # caller's handle: a file name, a candidate id
    config: JudgeConfig | None = None  # overrides the pool's configuration for this job


@dataclass
class Result:
    job: Job
    verdict: Verdict | None
    error: str | None = None  # the task itself failed to run
    started: float = 0.0  # time.time() when a worker took the job, and when it finished
    finished: float = 0.0


_NATIVE_BUILD = ("load_inline", "cpp_extension")


def _builds_native(job: Job) -> bool:
    """A C++/CUDA extension to compile: tens of seconds, the longest part of most evaluations."""
    return any(word in job.source for word in _NATIVE_BUILD)


class LocalPool:
    """Evaluate many candidates on the local machine: `workers` concurrent evaluations per device."""

    def __init__(self, device: str, *, cache_dir: Path, config: JudgeConfig | None = None,
                 device_indices: Iterable[int] = (0,), workers: int | None = None) -> None:
        indices = list(device_indices)
        per_device = workers or max(1, min(8, (os.cpu_count() or 2) // 2))
        self.workers = per_device * len(indices)
        build_jobs = max(1, (os.cpu_count() or 1) // self.workers)
        self.judges = [Judge(device, cache_dir=cache_dir, config=config, device_index=i, build_jobs=build_jobs,
                             spare_workers=per_device) for i in indices]
        self._next = itertools.cycle(self.judges)
        self._executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="kc-judge")

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

    @staticmethod
    def _run(judge: Judge, job: Job) -> Result:
        started = time.time()
        try:
            result = Result(job, judge.evaluate(job.task, job.source, config=job.config))
        except TaskRunError as e:
            result = Result(job, None, str(e))
        result.started, result.finished = started, time.time()
        return result

    def submit(self, job: Job) -> "Future[Result]":
        return self._executor.submit(self._run, next(self._next), job)

    @staticmethod
    def _run_self_check(judge: Judge, job: Job) -> Result:
        started = time.time()
        try:
            result = Result(job, judge.self_check(job.task, config=job.config))
        except TaskRunError as e:
            result = Result(job, None, str(e))
        result.started, result.finished = started, time.time()
        return result

    def submit_self_check(self, task: Task) -> "Future[Result]":
        """The task's reference judged as its own candidate (Judge.self_check); the job's source is empty."""
        return self._executor.submit(self._run_self_check, next(self._next), Job(task, ""))

    def map(self, jobs: Iterable[Job]) -> Iterator[Result]:
        """Results in completion order. Jobs that compile an extension start first, so that the
        longest evaluations overlap the others instead of trailing at the end."""
        futures = [self.submit(j) for j in sorted(jobs, key=lambda j: not _builds_native(j))]
        for f in as_completed(futures):
            yield f.result()
