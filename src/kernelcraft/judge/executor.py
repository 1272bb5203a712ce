"""The executor interface: what search, eval-suite, self-check, tasks vet, baseline, the training environment and
the reward service judge through. Submit a job, get a future of its result; cancel a job by cancelling its future
(a job no worker has taken never runs); close. `LocalPool` (pool.py) runs jobs on this machine's devices,
`RayPool` (ray_pool.py) on every GPU of a Ray cluster; `open_executor` picks one from the CLI's options."""

from __future__ import annotations

import time
from concurrent.futures import Future, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal, Protocol, runtime_checkable

from ..tasks import Task
from .config import JudgeConfig
from .device import DeviceDescription, gpu_indices
from .evaluate import Judge, baseline_kind
from .reference import TaskRunError
from .verdict import TimingStats, Verdict

# evaluate: a candidate's verdict; self_check: the task's reference judged as its own candidate (source "");
# vet: the task's vetting report (Judge.vet); baselines: the reference's baseline times (Judge.baseline)
JobKind = Literal["evaluate", "self_check", "vet", "baselines"]


@dataclass(frozen=True)
class BaselineSpec:
    """Which baselines a `baselines` job times: torch.compile too, TunableOp too, in which timing scenarios; with
    `defaults`, eager at PyTorch's default precision too (and torch.compile at them: without, no compile)."""

    compiled: bool = True
    tunableop: bool = False
    scenarios: tuple[str, ...] = ("offline",)
    defaults: bool = True


@dataclass(frozen=True)
class Job:
    task: Task
    source: str
    tag: Any = None  # caller's handle: a file name, a candidate id
    config: JudgeConfig | None = None  # overrides the executor's configuration for this job
    kind: JobKind = "evaluate"
    vet_seeds: int = 3  # vet: seeds per input distribution
    baselines: BaselineSpec = BaselineSpec()


@dataclass
class Result:
    job: Job
    verdict: Verdict | None  # evaluate and self_check
    error: str | None = None  # the task itself failed to run
    started: float = 0.0  # time.time() when a worker took the job, and when it finished
    finished: float = 0.0
    vet: dict[str, Any] | None = None  # vet: the report (its "env": the trusted worker's)
    baselines: dict[str, TimingStats] | None = None  # baselines: by the store's kind (evaluate.baseline_kind)
    env: dict[str, Any] = field(default_factory=dict)  # baselines: the device's name, torch's version
    warnings: list[str] = field(default_factory=list)  # what went wrong without failing the job


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
    """One job on one judge: what its kind asks for, or the task's own failure as the result's error."""
    result = Result(job, None, started=time.time())
    try:
        if job.kind == "evaluate":
            result.verdict = judge.evaluate(job.task, job.source, config=job.config)
        elif job.kind == "self_check":
            result.verdict = judge.self_check(job.task, config=job.config)
        elif job.kind == "vet":
            result.vet = judge.vet(job.task, seeds=job.vet_seeds)
        else:
            result.env = judge.reference(job.task).env
            result.baselines = _time_baselines(judge, job.task, job.baselines, result.warnings)
    except TaskRunError as e:
        result.error = str(e)
    result.finished = time.time()
    return result


def _time_baselines(judge: Judge, task: Task, spec: BaselineSpec, warnings: list[str]) -> dict[str, TimingStats]:
    """Each scenario's baselines by store kind, all from one trusted worker. Where torch.compile fails, the others
    are timed without it."""
    try:
        by_scenario = judge.baselines(task, spec.compiled, spec.tunableop, spec.scenarios, spec.defaults)
    except TaskRunError as e:
        warnings.append(f"{task.key}: baseline failed: {e}")
        if not spec.compiled:
            return {}
        by_scenario = judge.baselines(task, False, spec.tunableop, spec.scenarios, spec.defaults)
    return {baseline_kind(side, scenario): s for scenario, stats in by_scenario.items() for side, s in stats.items()}


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
