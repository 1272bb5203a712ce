"""The executor interface: what search, eval-suite, self-check, the training environment and the reward
service judge through. Submit a job, get a future of its result; cancel a job by cancelling its future
(a job no worker has taken never runs); close. `LocalPool` (pool.py) runs jobs on this machine's devices,
`RayPool` (ray_pool.py) on every GPU of a Ray cluster; `open_executor` picks one from the CLI's options."""

from __future__ import annotations

import time
from concurrent.futures import Future, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Protocol, runtime_checkable

from ..tasks import Task
from .config import JudgeConfig
from .device import DeviceDescription, gpu_indices
from .evaluate import Judge
from .reference import TaskRunError
from .verdict import Verdict


@dataclass(frozen=True)
class Job:
    task: Task
    source: str
    tag: Any = None  # caller's handle: a file name, a candidate id
    config: JudgeConfig | None = None  # overrides the executor's configuration for this job
    self_check: bool = False  # judge the task's reference as its own candidate (Judge.self_check); source is ""


@dataclass
class Result:
    job: Job
    verdict: Verdict | None
    error: str | None = None  # the task itself failed to run
    started: float = 0.0  # time.time() when a worker took the job, and when it finished
    finished: float = 0.0


@runtime_checkable
class Executor(Protocol):
    """Judges jobs concurrently. `workers`: how many evaluations run at once (callers keep that many in flight);
    `device`: the device kind ("cuda", "cpu"); `description`: the device the verdicts' context names."""

    workers: int
    device: str

    @property
    def description(self) -> DeviceDescription: ...

    def submit(self, job: Job) -> "Future[Result]": ...

    def close(self) -> None: ...

    def __enter__(self) -> "Executor": ...

    def __exit__(self, exc_type: Any, *exc: Any) -> None: ...


_NATIVE_BUILD = ("load_inline", "cpp_extension")


def builds_native(job: Job) -> bool:
    """A C++/CUDA extension to compile: tens of seconds, the longest part of most evaluations."""
    return any(word in job.source for word in _NATIVE_BUILD)


def judged_map(executor: Executor, jobs: Iterable[Job]) -> Iterator[Result]:
    """Results in completion order. Jobs that compile an extension start first, so that the longest
    evaluations overlap the others instead of trailing at the end."""
    futures = [executor.submit(j) for j in sorted(jobs, key=lambda j: not builds_native(j))]
    for f in as_completed(futures):
        yield f.result()


def run_job(judge: Judge, job: Job) -> Result:
    """One job on one judge: its verdict, or the task's own failure as the result's error."""
    started = time.time()
    run: Callable[[], Verdict] = ((lambda: judge.self_check(job.task, config=job.config)) if job.self_check
                                  else (lambda: judge.evaluate(job.task, job.source, config=job.config)))
    try:
        result = Result(job, run())
    except TaskRunError as e:
        result = Result(job, None, str(e))
    result.started, result.finished = started, time.time()
    return result


def open_executor(device: str, *, cache_dir: Path, config: JudgeConfig | None = None, gpus: str | None = None,
                  ray: str | None = None, workers: int | None = None) -> Executor:
    """The executor the options name: a RayPool when `ray` (auto or a cluster's address) is given, else a
    LocalPool over `gpus` ("all", the default, or "0,1"). Raises DeviceUnavailable or RayUnavailable with one
    line for the user."""
    if ray is not None:
        if gpus is not None:
            from .device import DeviceUnavailable
            raise DeviceUnavailable("--gpus and --ray: a Ray cluster's executor uses every GPU of the cluster")
        from .ray_pool import RayPool
        return RayPool(device, address=ray, config=config, workers=workers)
    from .pool import LocalPool
    return LocalPool(device, cache_dir=cache_dir, config=config, device_indices=gpu_indices(device, gpus),
                     workers=workers)
