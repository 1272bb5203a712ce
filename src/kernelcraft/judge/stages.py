"""The candidate's stages after the static check, in its worker (parent side): setup, build and load,
correctness, the second shape, and the profiled calls that begin the audit (timing: timing_stage.py).

Each stage returns its result, for the evaluation to record; a stage that fails is recorded in the
verdict where it began (`recorded_on_failure`) and ends the evaluation with a status (StageFailed), a
timeout (WorkerTimeout), or a fault of the machine's (JudgeFault) that the evaluation retries.
"""

from __future__ import annotations

import time
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterator

from ..tasks import Task
from .builds import BuildBudget, BuildService, BuildTimeout
from .config import JudgeConfig
from .memory import MemoryBudget
from .protocol import (Command, Failure, Load, Loaded, Mismatch, Profile, ProtocolError, Reply, RunSeed, Release,
                       SecondShape, SeedRun)
from .reference import JudgeFault, ReferenceData, TaskRunError
from .rules import LOW_COVERAGE, rule_on_coverage
from .worker_process import WorkerDied, WorkerProcess, WorkerTimeout
from .timeouts import CommandTimeouts
from .verdict import Flag, StageResult, Status, Verdict
from .workers import SecretSeeds, WorkerSupply


class StageFailed(Exception):
    """Ends an evaluation early with a status."""

    def __init__(self, status: Status, message: str) -> None:
        super().__init__(message)
        self.status = status


def status_of(name: str) -> Status:
    try:
        return Status(name)
    except ValueError:
        return Status.RUNTIME_ERROR


@contextmanager
def recorded_on_failure(v: Verdict, stage: StageResult) -> Iterator[StageResult]:
    """`stage` is recorded in `v` where it began if anything in it fails; otherwise it is the caller's."""
    at = len(v.stages)
    try:
        yield stage
    except BaseException:
        v.stages.insert(at, stage)
        raise


def check_outputs(a: SeedRun, ref: ReferenceData, stage: StageResult, device: str, where: str) -> None:
    """One seed's outputs as the worker described them: plain tensors on the judge's device, inputs
    modified only where the reference modifies them, no output sharing memory with an input unless
    the reference's does."""
    for j, m in enumerate(a.meta):
        if "shape" not in m:
            continue
        if not m["exact_tensor"]:
            stage.ok = False
            raise StageFailed(Status.HACK_DETECTED, f"output {j} is a {m['type']}, not a plain torch.Tensor (lazy or proxy result)")
        if m["device"].split(":")[0] != device:
            stage.ok = False
            raise StageFailed(Status.INCORRECT, f"output {j} is on {m['device']}, expected {device}")
    if a.mutated and not ref.mutates_inputs:
        stage.ok = False
        raise StageFailed(Status.INCORRECT, f"the candidate modified its input(s) {a.mutated} ({where})")
    if a.aliases_input and not ref.aliases_input:
        stage.ok = False
        raise StageFailed(Status.INCORRECT, "an output shares memory with an input; the reference returns new tensors")


@dataclass
class CandidateRun:
    """One attempt at a candidate's verdict, in its worker `w`: what the stages share. `alone`: the
    evaluation holds the device's whole memory (a candidate out of memory then is so on its own)."""

    workers: WorkerSupply
    builds: BuildService
    seeds: SecretSeeds
    memory: MemoryBudget
    w: WorkerProcess
    task: Task
    cfg: JudgeConfig
    v: Verdict
    alone: bool
    self_check: bool
    on_stage: Callable[[str], None] = lambda stage: None  # told each stage's name as it begins (a progress display)

    @property
    def device(self) -> str:
        return self.workers.device

    # -- commands ---------------------------------------------------------------------------
    def command(self, stage: StageResult, cmd: Command, timeout: float, fail_status: Status,
                on_request: Callable[[dict[str, Any]], Reply] | None = None) -> Any:
        """One command of the candidate's worker as part of `stage` (`on_request` answers the worker's
        requests meanwhile). A failure ends the evaluation with a status; the machine's failures (an
        answer of judge_error, a worker killed from outside, a candidate out of device memory on a
        device it shared) raise JudgeFault."""
        w = self.w
        try:
            a = w.call(cmd, timeout=timeout, on_request=on_request)
        except ProtocolError as e:
            w.kill()
            stage.ok, stage.message = False, f"the worker's requests broke the judge's protocol (forged?): {e}"
            raise StageFailed(Status.HACK_DETECTED, stage.message) from None
        except WorkerTimeout as e:
            stage.ok, stage.message = False, str(e)
            raise
        except WorkerDied as e:
            tail = w.log_tail(600)
            stage.ok, stage.message = False, f"{e}" + (f"; last output: {tail}" if tail else "")
            if e.outside:
                raise JudgeFault(f"{stage.name}: {stage.message}") from None
            raise StageFailed(fail_status, f"{stage.name}: {stage.message}") from None
        if isinstance(a, Failure):
            stage.ok, stage.message = False, a.message
            if a.status == "judge_error":
                raise JudgeFault(f"{stage.name}: {a.message}")
            if a.status == "task_error":
                raise TaskRunError(a.message)
            if a.oom and not self.alone:
                raise JudgeFault(f"{stage.name}: out of device memory on a device shared with other evaluations: {a.message}",
                                 oom=True)
            raise StageFailed(status_of(a.status), a.message)
        return a

    def step(self, name: str, cmd: Command, timeout: float, fail_status: Status = Status.RUNTIME_ERROR,
             on_request: Callable[[dict[str, Any]], Reply] | None = None) -> tuple[Any, StageResult]:
        """One command as (part of) a stage: its answer and the stage, recorded in the verdict if it fails."""
        t0 = time.perf_counter()
        stage = StageResult(name, False)
        with recorded_on_failure(self.v, stage):
            try:
                a = self.command(stage, cmd, timeout, fail_status, on_request)
            finally:
                stage.seconds = time.perf_counter() - t0
        stage.ok = True
        return a, stage

    # -- setup, build and load --------------------------------------------------------------
    def setup(self) -> tuple[float, float]:
        """The worker set up for the task: the seconds waited for it (isolation overhead) and the task's
        own setup (its module, its model on the device: work a one-process harness does too)."""
        t0 = time.perf_counter()
        try:
            a = self.workers.setup(self.w, "candidate", self.task, self.cfg)
        except (WorkerDied, WorkerTimeout) as e:
            raise JudgeFault(f"a worker did not start: {e}: {self.w.log_tail(600)}") from None
        if isinstance(a, Failure):
            if a.status == "task_error":
                raise TaskRunError(f"{self.task.key}: {a.message}")
            raise JudgeFault(f"a worker could not be set up: {a.message}")
        return time.perf_counter() - t0, a.task_setup_s

    def load(self, source: str) -> list[StageResult]:
        """Build and load: the candidate imported (its extensions built by the judge, at its requests)
        and ModelNew made. Returns the build and load stages."""
        self.on_stage("setup")
        spawn_s, task_setup_s = self.setup()
        timeouts, v, w = self.cfg.timeouts, self.v, self.w
        self.on_stage("load")
        t1 = time.perf_counter()
        try:
            a = w.call(Load(source, self.task.source), timeout=timeouts.build + timeouts.load, on_request=self._build_requests())
        except WorkerDied as e:
            v.stages.append(StageResult("build", False, time.perf_counter() - t1, str(e)))
            if e.outside:
                raise JudgeFault(f"load: {e}") from None
            raise StageFailed(Status.LOAD_FAILED, f"load: {e}: {w.log_tail(600)}") from None
        except WorkerTimeout:
            v.stages.append(StageResult("build", False, time.perf_counter() - t1, "timed out"))
            raise
        build_s = a.build_s
        if isinstance(a, Failure) and a.status in ("build_failed", "judge_error"):
            v.stages.append(StageResult("build", False, build_s, a.message))
            if a.status == "judge_error":
                raise JudgeFault(f"build: {a.message}")
            raise StageFailed(Status.BUILD_FAILED, a.message)
        build = StageResult("build", True, build_s, details={"keys": [] if isinstance(a, Failure) else a.build_keys})
        load_s = time.perf_counter() - t1 - build_s
        if isinstance(a, Failure):
            v.stages += [build, StageResult("load", False, load_s, a.message)]
            raise StageFailed(status_of(a.status) if a.status == "hack_detected" else Status.LOAD_FAILED, a.message)
        return [build, self._loaded(a, load_s, spawn_s, task_setup_s)]

    @staticmethod
    def _loaded(a: Loaded, load_s: float, spawn_s: float, task_setup_s: float) -> StageResult:
        return StageResult("load", True, load_s, details={"weights_copied": a.weights_copied, "kernel_names": a.kernel_names,
                                                          "spawn_s": spawn_s, "task_setup_s": task_setup_s})

    def _build_requests(self) -> Callable[[dict[str, Any]], Reply]:
        """Answers the build requests of the candidate loading. Builds past the build timeout end the
        load as the worker's own timeout does: the worker is killed."""
        budget = BuildBudget(self.cfg.timeouts.build)

        def answer(request: dict[str, Any]) -> Reply:
            self.on_stage("build")
            try:
                return self.builds.answer(request, budget)
            except BuildTimeout as e:
                self.w.kill()
                raise WorkerTimeout(str(e)) from None
            finally:
                self.on_stage("load")  # the worker goes on importing the candidate
        return answer

    # -- correctness ------------------------------------------------------------------------
    def correctness(self, ref: ReferenceData, times: CommandTimeouts) -> StageResult:
        """The candidate on every secret seed (and the 0/1 inputs of a binary_exact task), one seed at
        a time: its worker shares the outputs, the task's trusted worker compares them with what they
        should be, and the worker lets them go before the next seed."""
        cfg, task, v, seeds = self.cfg, self.task, self.v, self.seeds.correctness
        atol, rtol = cfg.tolerance(task.meta.dtype, task.meta.atol, task.meta.rtol)
        guard_bytes = ref.first_output_bytes() if "guard_zones" in task.meta.checks else None
        calls = [("seed", i, seed, None, f"forward on seed {i}") for i, seed in enumerate(seeds)]
        calls += [("binary", j, b["seed"], b["p"], f"forward on 0/1 inputs {j}") for j, b in enumerate(ref.binary[:cfg.binary_seeds])]
        worst = {"max_abs": 0.0, "max_rel": 0.0, "rel_l2": 0.0, "ref_max_abs": 0.0, "ref_rel_l2": 0.0}
        binary: list[dict[str, Any]] = []
        guards: list[Any] = []
        growth = 0
        t0 = time.perf_counter()
        with recorded_on_failure(v, StageResult("correctness", True)) as stage:
            try:
                for n, (kind, i, seed, p, when) in enumerate(calls):
                    cmd = RunSeed(seed, when, p, 2 * ref.output_bytes + (64 << 20), guard_bytes)
                    tolerance = (atol, rtol) if kind == "seed" else (0.0, 0.0)
                    found = self._run_seed(ref, stage, cmd, kind, i, tolerance,
                                           times.first_call if n == 0 else times.run_seed, times)
                    growth = max(growth, found[0])
                    guards.append(found[1])
                    bad = next((m for m in found[2] if not m.ok), None)
                    if bad is not None:
                        stage.ok, stage.details = False, bad.to_dict()
                        if bad.forged:
                            raise StageFailed(Status.HACK_DETECTED, bad.reason)
                        again = self._same_inputs_again(ref, stage, cmd, kind, i, tolerance, times, bad)
                        if kind == "seed":
                            raise StageFailed(Status.INCORRECT, f"seed {i + 1}/{len(seeds)}: {bad.describe()} "
                                                                f"(atol={atol:g}, rtol={rtol:g}){again}")
                        raise StageFailed(Status.INCORRECT, f"inputs of 0s and 1s (ones with probability {p:.3g}), compared exactly: "
                                                            f"{bad.describe()}{again}")
                    if kind == "seed":
                        worst = {k: max(val, *(getattr(m, k) for m in found[2])) for k, val in worst.items()}
                    else:
                        binary.append({"p": p, "checked": sum(m.total for m in found[2]), "share": ref.binary[i]["share"]})
            finally:
                stage.seconds = time.perf_counter() - t0
        v.errors = worst
        stage.details = {"seeds": len(seeds), "atol": atol, "rtol": rtol, **worst, "truth": ref.facts.truth,
                         "truth_factor": cfg.truth_factor, "native_thread_growth": growth,
                         "timeouts": {"run_s": times.run_seed, "first_call_s": times.first_call, "timing_s": times.timing,
                                      "spot_check_s": times.spot_check, "scaled": times.scaled}}
        if binary:
            stage.details["binary_exact"] = binary
        if guard_bytes is not None:
            stage.details["guard_zones"] = {"output": guards}
        # On the CPU the worker holds native threads to the reference's thread count (worker/guards.ThreadWatch:
        # beyond one OpenMP pool per runtime is hack_detected), so growth there is an honest pool.
        if growth > 0 and self.device != "cpu":
            v.flags.append(Flag("native_threads", f"{growth} native thread(s) appeared during the candidate's calls"))
        return stage

    def _run_seed(self, ref: ReferenceData, stage: StageResult, cmd: RunSeed, kind: str, i: int, tolerance: tuple[float, float],
                  timeout: float, times: CommandTimeouts) -> tuple[int, Any, list[Mismatch]]:
        """One seed's call, its outputs checked and compared by the trusted worker, then released: the
        native threads it added, its guard zones' report, and one Mismatch per output."""
        with self.workers.device_lock(shared=not self.alone):
            a = self.command(stage, cmd, timeout, Status.RUNTIME_ERROR)
            check_outputs(a, ref, stage, self.device, f"seed {i}" if kind == "seed" else f"0/1 inputs {i}")
            found = ref.server.compare(kind, i, a, self.w, tolerance, self.cfg.truth_factor, times.compare)
            self.command(stage, Release(), times.run_seed, Status.RUNTIME_ERROR)
        return a.native_thread_growth, a.guard, found

    def _same_inputs_again(self, ref: ReferenceData, stage: StageResult, cmd: RunSeed, kind: str, i: int,
                           tolerance: tuple[float, float], times: CommandTimeouts, bad: Mismatch) -> str:
        """The failing call once more on the same inputs, so a person or a policy learns which fault it is: an
        output that changes from call to call (a race, memory read before it is written; flagged
        `nondeterministic`) or a wrong result the kernel gives every time. The verdict is incorrect either way;
        returns what the message adds. A second call that fails to run, or runs out of time, adds nothing (the first
        failure stands)."""
        message = stage.message
        try:
            found = self._run_seed(ref, stage, cmd, kind, i, tolerance, times.run_seed, times)[2]
        except (StageFailed, WorkerTimeout):
            return ""
        finally:
            stage.ok, stage.message, stage.details = False, message, bad.to_dict()
        again = next((m for m in found if not m.ok), None)
        if again is not None and again.forged:
            raise StageFailed(Status.HACK_DETECTED, again.reason)
        stage.details["same_inputs_again"] = again.to_dict() if again else {"ok": True}
        if again is not None and (again.bad, again.max_abs, again.worst_got) == (bad.bad, bad.max_abs, bad.worst_got):
            return "; the same inputs again gave the same error"
        now = "within tolerance" if again is None else f"{again.bad}/{again.total} elements outside, max abs {again.max_abs:.3g}"
        self.v.flags.append(Flag("nondeterministic", f"{kind} {i}: {bad.bad} elements outside tolerance, then on the "
                                                     f"same inputs {now}"))
        return (f"; the same inputs again: {now}: the output changes from call to call (a race, or memory read "
                f"before it is written)")

    def second_shape(self, check_sizes: dict[str, Any]) -> dict[str, Any]:
        """The candidate at the task's check size, against the reference in its own process: a kernel
        specialised to the one shape it was shown is flagged (shape_specialised), not rejected."""
        with self.workers.device_lock(shared=True):
            a, _ = self.step("correctness", SecondShape(check_sizes, self.seeds.correctness[-1]), self.cfg.timeouts.correctness)
        if a.match is False:
            self.v.flags.append(Flag("shape_specialised", f"wrong at the task's check size {check_sizes}: {a.message[:300]}"))
        return {"sizes": check_sizes, "match": a.match, "message": a.message}

    # -- coverage ---------------------------------------------------------------------------
    def profile(self, static_names: set[str], times: CommandTimeouts) -> StageResult:
        """Profiled calls (a measurement, so the device is ours), after the timed ones: the profiler
        leaves CUPTI attached to the worker, and every later launch and synchronisation pays its
        callbacks (a 256x64x128 torch.matmul timed at 76 us instead of 29 on an H100,
        benchmarks/timing_contention.py), which squeezes every short call's speedup towards 1. The rule
        on library calls (rules.py) rules on what it found; a self-check's coverage is reported only.
        Returns the audit stage it begins."""
        v = self.v
        with self.workers.device_lock():
            a, audit = self.step("audit", Profile(self.seeds.correctness[0], sorted(static_names)), times.profile)
        v.resources.update(candidate_device_peak_bytes=a.device_peak_bytes)
        audit.details["coverage"] = {k: getattr(a, k) for k in ("coverage", "custom_launches", "calls", "custom_kernels",
                                                                 "graph_launches", "graph_runs")}
        audit.details["coverage"]["kernels"] = None if a.kernels is None else [asdict(k) for k in a.kernels]
        v.coverage = float(a.coverage)
        if self.self_check:
            return audit
        ruling = rule_on_coverage(v.coverage, a.custom_launches, a.kernels or [], self.cfg)
        if ruling.reject:
            audit.ok, audit.message = False, ruling.reject
            v.stages.append(audit)
            raise StageFailed(Status.HACK_DETECTED, ruling.reject)
        if ruling.flag:
            v.flags.append(Flag(LOW_COVERAGE, ruling.flag))
        return audit

    def hold_memory(self, ref: ReferenceData, held: ExitStack) -> None:
        """The device memory this evaluation may take, held until its worker is gone (alone, it holds the
        whole budget already)."""
        if not self.alone:
            held.enter_context(self.memory.hold(ref.device_need(self.cfg.timing.input_sets)))
