"""The judge's worker processes on one device (parent side): fresh ones, with spares started ahead;
their setup; the device lock and the holds each command runs under; and the commands of trusted
workers, whose failures are the task's or the machine's, never a candidate's."""

from __future__ import annotations

import os
import threading
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator

from ..tasks import Task
from .config import JudgeConfig
from .device import gpu_uuid
from .locks import device_lock
from .protocol import Command, Failure, Setup, SetupDone, TimeReference
from .reference import JudgeFault, TaskRunError
from .sandbox import hold_still
from .worker_process import WorkerDied, WorkerProcess, WorkerTimeout


@dataclass(frozen=True)
class SecretSeeds:
    """Drawn once per judge from the OS: the correctness seeds, the timing input sets' seeds, the 0/1
    input sets' seeds, and the seed every model's weights are made with."""

    correctness: list[int]
    timing: list[int]
    binary: list[int]
    init: int


class WorkerSupply:
    """Fresh sandboxed workers for one judge. Spare workers start (import torch and Triton, make their
    CUDA context) while earlier evaluations run, so a new candidate waits only for its task setup;
    each is a fresh process that has run nothing yet."""

    def __init__(self, device: str, device_index: int, cache_dir: Path, build_jobs: int, init_seed: int,
                 capability: Callable[[], str], spare_workers: int = 0, cpus: frozenset[int] | None = None) -> None:
        self.device = device
        self.cpus = cpus  # the host CPUs its workers run on (None: all of the judge's)
        self.device_index = device_index
        self.cache_dir = cache_dir
        self.build_jobs = build_jobs
        self.init_seed = init_seed
        self.capability = capability  # the device's compute capability (asked at the first setup: CUDA starts)
        self._spare_target = spare_workers
        self._spares: list[WorkerProcess] = []
        self._lock = threading.Lock()

    def take(self) -> WorkerProcess:
        """A fresh worker: the oldest spare (the most likely warm), or a new one."""
        with self._lock:
            spare = self._spares.pop(0) if self._spares else None
            while len(self._spares) < self._spare_target:  # for the next callers
                self._spares.append(self.new(spare=True))
        return spare or self.new()

    def new(self, spare: bool = False) -> WorkerProcess:
        try:
            return WorkerProcess(self.device, self.device_index, self.cache_dir, self.build_jobs, cpus=self.cpus, spare=spare)
        except OSError as e:  # no room for its directory, no process or file descriptor left
            raise JudgeFault(f"a worker could not be started: {e}") from None

    def close(self) -> None:
        """Stop the spare workers; start no more."""
        with self._lock:
            spares, self._spares = self._spares, []
            self._spare_target = 0
        for w in spares:
            w.close()

    def setup(self, w: WorkerProcess, role: str, task: Task | None, config: JudgeConfig) -> SetupDone | Failure:
        """The worker's first command: its role, the task (none for the device ceilings) and the configuration."""
        dtype = task.meta.dtype if task else "float32"
        atol, rtol = config.tolerance(dtype, task.meta.atol if task else None, task.meta.rtol if task else None)
        cmd = Setup(role, self.device, config, dtype, atol, rtol, self.init_seed, str(self.cache_dir), os.geteuid(),
                    self.capability(), task.source if task else None, task.sizes_for(self.device) if task else {})
        # The task's model is made on the device: shared device work, held here since no worker may
        # reach the lock files (a candidate's daemon held them and every evaluation waited).
        with self.device_lock(shared=True) if self.device == "cuda" else nullcontext():
            a = w.call(cmd, timeout=config.timeouts.setup)
        # The device whose lock it holds, or its measurements would overlap another device's work unseen.
        uuid = a.env.get("device_uuid") if isinstance(a, SetupDone) else None
        expected = gpu_uuid(self.device, self.device_index)
        if uuid is not None and uuid != expected:
            return Failure("judge_error", f"the worker runs on GPU {uuid}, not on the judge's device {expected} "
                                          "(CUDA_VISIBLE_DEVICES?)")
        return a

    def device_lock(self, shared: bool = False) -> AbstractContextManager[None]:
        """The device lock: exclusive while timing and profiling, `shared` for the judge's other work on
        the device, which must not run next to a measurement."""
        return device_lock(self.device, self.device_index, shared=shared)

    @contextmanager
    def measuring(self, w: WorkerProcess, cfg: JudgeConfig) -> Iterator[None]:
        """What a measurement holds: the device alone, and (unless configured off) the judge's other
        workers stopped."""
        with ExitStack() as held:
            held.enter_context(self.device_lock())
            if cfg.timing.hold_others_still:
                held.enter_context(hold_still(w))
            yield

    @staticmethod
    def trusted(w: WorkerProcess, where: str, cmd: Command, timeout: float) -> Any:
        """One command of a trusted worker, its answer. Its failure is the task's (TaskRunError), unless the
        machine failed it: out of memory or disk, or killed from outside (JudgeFault)."""
        try:
            a = w.call(cmd, timeout=timeout)
        except WorkerTimeout as e:
            raise TaskRunError(f"{where}: the reference timed out ({e})") from None
        except WorkerDied as e:
            if e.outside:
                raise JudgeFault(f"{where}: the trusted reference worker died: {e}", reference=True) from None
            raise TaskRunError(f"{where}: the reference crashed ({e})") from None
        if isinstance(a, Failure):
            if a.status == "judge_error":
                raise JudgeFault(f"{where}: {a.message}", reference=True, oom=a.oom)
            raise TaskRunError(f"{where}: {a.message}")
        return a

    def trusted_setup(self, w: WorkerProcess, task: Task | None, where: str, config: JudgeConfig) -> SetupDone:
        try:
            a = self.setup(w, "reference", task, config)
        except (WorkerDied, WorkerTimeout) as e:
            raise JudgeFault(f"{where}: a trusted worker did not start: {e}: {w.log_tail(600)}", reference=True) from None
        if isinstance(a, Failure):
            if a.status == "judge_error":
                raise JudgeFault(f"{where}: {a.message}", reference=True)
            raise TaskRunError(f"{where}: {a.message}")
        return a

    def trusted_call(self, task: Task | None, ops: list[Command], config: JudgeConfig,
                     timed_ops: tuple[type, ...] = ()) -> tuple[dict[str, Any], list[Any]]:
        """Run ops in a fresh trusted worker: its environment and their answers. `timed_ops` (command
        types) hold the device lock, the others share it."""
        answers = []
        where = task.key if task else self.device
        with self.take() as w:
            env = self.trusted_setup(w, task, where, config).env
            for op in ops:
                if isinstance(op, TimeReference):  # TunableOp's results go to the worker's own directory
                    op = replace(op, out_dir=str(w.scratch))
                timed = isinstance(op, timed_ops)
                with self.measuring(w, config) if timed else self.device_lock(shared=True):
                    answers.append(self.trusted(w, where, op, config.timeouts.timing if timed else config.timeouts.correctness))
        return env, answers
