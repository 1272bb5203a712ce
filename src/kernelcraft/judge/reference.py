"""Trusted reference data for a task on a device (parent side): what the trusted worker learned of
the reference (protocol.Facts), FLOPs and bytes, the reference timed alone, and the trusted worker
itself, kept alive per task to compare candidates' outputs with the seeds' expected outputs."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

from .protocol import CompareRound, CompareSeed, Facts, Failure, Mismatch, RoundOutputs, SeedRun, Timed
from .sandbox import awake
from .worker_process import WorkerDied, WorkerProcess, WorkerTimeout
from .verdict import TimingStats


class TaskRunError(Exception):
    """The task itself (not a candidate) failed to run; one line for the user."""


class JudgeFault(Exception):
    """The judge's own failure, never the candidate's: a full disk, a trusted worker out of memory or
    killed, a worker that cannot start, a lost device. `reference`: the task's trusted worker failed
    (a retry starts a new one); `oom`: the candidate ran out of device memory on a device it shared
    (a retry holds the device alone)."""

    def __init__(self, cause: str, *, reference: bool = False, oom: bool = False) -> None:
        super().__init__(cause)
        self.reference = reference
        self.oom = oom


@dataclass(frozen=True)
class SpotCheck:
    """What the trusted worker needs to check one timed round: the round's input set (its seed) and
    roll, whether inputs are rolled at all, and the rule (tolerance, float64 truth, truth factor)."""

    seed: int
    roll: int
    fresh: bool
    tolerance: tuple[float, float]
    truth: bool
    k: float


class ReferenceServer:
    """The trusted worker of one task: it surveyed the reference, holds (or recomputes) each secret
    seed's expected outputs and their float64 truth, and compares candidates' outputs with them, one
    comparison at a time. Evictable only while no evaluation uses it. Whoever sends it a command
    holds `lock` (after the device lock, never before: the order every holder keeps)."""

    def __init__(self, worker: WorkerProcess, where: str) -> None:
        self.worker = worker
        self.where = where
        self.lock = threading.Lock()
        self._users = 0
        self._users_lock = threading.Lock()

    @contextmanager
    def in_use(self) -> Iterator["ReferenceServer"]:
        with self._users_lock:
            self._users += 1
        try:
            yield self
        finally:
            with self._users_lock:
                self._users -= 1

    @property
    def idle(self) -> bool:
        with self._users_lock:
            return self._users == 0

    def compare(self, kind: str, index: int, run: SeedRun, candidate: WorkerProcess, tolerance: tuple[float, float],
                truth_factor: float, timeout: float) -> list[Mismatch]:
        """One seed's outputs as the candidate's worker shared them (`run`: its answer) against what they
        should be. Raises JudgeFault when the trusted worker fails; a description the candidate's process
        forged or broke comes back as a mismatch marked `forged`."""
        cmd = CompareSeed(run.tensors, run.values, tolerance[0], tolerance[1], _on_cpu(run.tensors), kind=kind, index=index,
                          k=truth_factor)
        return self._compare(cmd, candidate, timeout)

    def spot_check(self, check: SpotCheck, shared: RoundOutputs, candidate: WorkerProcess, timeout: float) -> list[Mismatch]:
        """A timed call's outputs as the candidate's worker shared them against the reference on that
        round's inputs, which the trusted worker makes from its own copy of the input set. Runs while the
        measurement holds the other workers still (the timed worker waits for it); failures as `compare`'s."""
        cmd = CompareRound(shared.tensors, shared.values, check.tolerance[0], check.tolerance[1], _on_cpu(shared.tensors),
                           seed=check.seed, roll=check.roll, fresh=check.fresh, truth=check.truth, k=check.k)
        with awake(self.worker):
            return self._compare(cmd, candidate, timeout)

    def _compare(self, cmd: CompareSeed | CompareRound, candidate: WorkerProcess, timeout: float) -> list[Mismatch]:
        with self.lock:
            try:
                if cmd.memfd:
                    self.worker.send_fd(candidate.memfd)
                a = self.worker.call(cmd, timeout=timeout)
            except (WorkerDied, WorkerTimeout, OSError) as e:
                raise JudgeFault(f"the trusted reference worker of {self.where} failed while comparing: {e}",
                                 reference=True) from None
        if isinstance(a, Failure):
            if a.status == "hack_detected":
                return [Mismatch(False, reason=a.message, forged=True)]
            raise JudgeFault(f"the trusted reference worker of {self.where} failed while comparing: {a.message}",
                             reference=True)
        return a.mismatches

    def close(self) -> None:
        self.worker.close()


@dataclass
class ReferenceData:
    facts: Facts
    flops: int
    bytes: int
    param_bytes: int
    trusted_future: Future[TimingStats]  # the reference timed alone; measured after the survey
    server: ReferenceServer
    env: dict[str, Any] = field(default_factory=dict)

    @property
    def trusted(self) -> TimingStats:
        """The trusted time; waits for it (raises TaskRunError if the timing failed)."""
        return self.trusted_future.result()

    @property
    def mutates_inputs(self) -> bool:
        return self.facts.mutates_inputs

    @property
    def aliases_input(self) -> bool:
        return self.facts.aliases_input

    @property
    def output_bytes(self) -> int:
        return self.facts.output_bytes

    @property
    def binary(self) -> list[dict[str, Any]]:
        return self.facts.binary

    def first_output_bytes(self) -> int:
        """Bytes of the first tensor output (the guard_zones check places its canary after it)."""
        for m in self.facts.meta[0] if self.facts.meta else []:
            if "shape" in m:
                n = 1
                for s in m["shape"]:
                    n *= s
                return n * _ITEMSIZE.get(m["dtype"], 4)
        return 0

    def device_need(self, input_sets: int) -> int:
        """Device memory a candidate's evaluation of this task may hold at once: its inputs for every
        timing set and the rounds' fresh copies, both sides' outputs, the model, and a context and
        workspace; plus the trusted worker's while it computes one forward (a seed it does not hold, a
        spot-checked round: timing inputs are never held), and the input set it rolls that round from."""
        f = self.facts
        candidate = (input_sets + 3) * f.input_bytes + 3 * f.output_bytes + self.param_bytes + (1 << 30)
        return candidate + f.peak_bytes + f.input_bytes


def side(answer: Timed, name: str) -> TimingStats:
    """One side's statistics from a timing answer, with its host time and the host probe."""
    return TimingStats.of(answer.samples[name], answer.host_ms.get(name), answer.probe_ms)


def _on_cpu(tensors: list[Any]) -> bool:
    """Outputs shared in a memory file (the CPU's), which goes to the trusted worker over the socket."""
    return any(isinstance(t, dict) and t.get("file_offset") is not None for t in tensors)


_ITEMSIZE = {"torch.float64": 8, "torch.float32": 4, "torch.float16": 2, "torch.bfloat16": 2, "torch.int64": 8,
             "torch.int32": 4, "torch.int16": 2, "torch.int8": 1, "torch.uint8": 1, "torch.bool": 1,
             "torch.complex64": 8, "torch.complex128": 16}
