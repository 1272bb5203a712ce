"""The judge: evaluate one candidate against one task on one device, stage by stage.

static -> build -> load -> correctness -> timing -> audit. Each candidate runs in a fresh sandboxed
worker; each task's trusted worker holds what the outputs should be and compares the candidate's
outputs with them, seed by seed, without files (worker/exchange.py, worker/expected.py).

`Judge` orchestrates: its workers (workers.py), the tasks' reference data (reference_cache.py), the
device's ceilings (ceilings.py), the candidate's stages (stages.py, timing_stage.py) and the audit
(audit.py).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import secrets
import time
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import torch

from ..tasks import Task
from .audit import Audit, Control, slowed_reference_reject
from .builds import BuildService
from .ceilings import CeilingsCache
from .config import JudgeConfig, TimingConfig
from .device import check_device, describe_device
from .integrity import make_dir
from .isolation import check_cache_reachable
from .memory import MemoryBudget, memory_budget
from .protocol import MeasureCeilings, PrepareBaselines, PrepareTiming, TimeReference, Vet
from .reference import JudgeFault, ReferenceData, side
from .reference_cache import ReferenceCache
from .resources import PeakDisk, builds_bytes, peak_rss
from .worker_process import WorkerTimeout
from .stages import CandidateRun, StageFailed
from .static import check_source
from .timeouts import command_timeouts
from .timing_stage import TimingStage
from .toolchain import compilers
from .verdict import Flag, StageResult, Status, TimingStats, Verdict
from .version import JUDGE_VERSION
from .workers import SecretSeeds, WorkerSupply



# What each side of `Judge.baseline` is stored as: eager under the judge's strict precision, eager and
# torch.compile at PyTorch's defaults (cuDNN TF32 on: what users run), TunableOp.
_BASELINE_KINDS = {"reference": "eager", "reference_default": "eager_default", "compiled": "compile_default",
                   "tunableop": "tunableop"}


def _quiet(stage: str) -> None:
    """No progress display."""


def _clocked(on_stage: Callable[[str], None], v: Verdict, t0: float) -> Callable[[str], None]:
    """`on_stage`, also noting in the verdict when each stage began (seconds since the evaluation began, in
    `resources["stage_began_s"]`): between them lie the waits no stage counts (a worker, the task's reference,
    device memory, the device lock), where an evaluation's wall time goes when many run at once."""
    began = v.resources.setdefault("stage_began_s", {})

    def note(stage: str) -> None:
        began[stage] = round(time.perf_counter() - t0, 3)
        on_stage(stage)
    return note


def baseline_kind(side: str, scenario: str = "offline") -> str:
    """The name a baseline of `Judge.baseline` is stored under: eager, eager_default, compile_default or
    tunableop, with "@server" for the server scenario."""
    kind = _BASELINE_KINDS[side]
    return kind if scenario == "offline" else f"{kind}@{scenario}"


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def self_check_source(task: Task) -> str:
    """The candidate a self-check judges: the task's own module, its Model as ModelNew."""
    return f"{task.source}\n\nclass ModelNew(Model):\n    pass\n"


class Judge(TimingStage):
    """Evaluates candidates on one device. Thread-safe: a pool calls `evaluate` from many threads.

    Secret seeds are drawn once per judge. Per task, one trusted worker surveys the reference and is
    kept (the `reference_workers` most recently used tasks): it holds each seed's expected outputs on
    its device, up to `reference_cache_bytes`, or computes them again per comparison, and compares
    candidates' outputs with them. Evaluations of one device share its memory through a budget.
    The timing stage's methods are its own (TimingStage), so a test can stand in for a busy host.
    """

    def __init__(self, device: str = "cpu", *, cache_dir: Path, config: JudgeConfig | None = None,
                 device_index: int = 0, build_jobs: int | None = None, reference_cache_bytes: int = 1 << 30,
                 reference_workers: int = 4, spare_workers: int = 0, cpus: frozenset[int] | None = None) -> None:
        """`cpus`: the host CPUs its untrusted processes run on (a pool's slice for this device,
        device.cpu_slices); None: all of this process's. `spare_workers`: fresh workers kept started ahead,
        so the next candidate's worker starts while this one is judged (a pool keeps one per worker; none
        by default here: on a small host an unused spare costs seconds of CPU)."""
        check_device(device)
        self.device = device
        self.device_index = device_index
        self.cache_dir = make_dir(Path(cache_dir).resolve())  # workers run in their own directories
        check_cache_reachable(self.cache_dir)
        self.config = config or JudgeConfig()
        self.build_jobs = build_jobs or max(1, (os.cpu_count() or 1))
        rng = secrets.SystemRandom()
        self.seeds = SecretSeeds(correctness=[rng.randrange(1, 2**31) for _ in range(self.config.seeds)],
                                 timing=[rng.randrange(1, 2**31) for _ in range(self.config.timing.input_sets)],
                                 binary=[rng.randrange(1, 2**31) for _ in range(self.config.binary_seeds)],
                                 init=rng.randrange(1, 2**31))
        self.memory = MemoryBudget(memory_budget(device, device_index))
        self.workers = WorkerSupply(device, device_index, self.cache_dir, self.build_jobs, self.seeds.init,
                                    lambda: self.builds.capability, spare_workers, cpus)
        self.references = ReferenceCache(self.workers, self.memory, self.config, self.seeds, reference_cache_bytes,
                                         reference_workers)
        self.device_ceilings = CeilingsCache(self.cache_dir, self._device_key, self._measure_ceilings)
        self.audit = Audit(self.device_ceilings, lambda task: self.baseline(task, compiled=False, defaults=False)["reference"],
                           self.reference_control)
        self._controls: dict[tuple[str, TimingConfig], tuple[float, Control]] = {}

    @functools.cached_property
    def builds(self) -> BuildService:
        """Builds the candidates' extensions (first asked: a CUDA device's capability starts CUDA here)."""
        return BuildService(self.cache_dir, self.device, self.device_index, self.build_jobs,
                            describe_device(self.device, self.device_index).capability, self.workers.cpus)

    def close(self) -> None:
        """Stop the spare workers and the tasks' trusted workers (evaluations in flight close their own)."""
        self.workers.close()
        self.references.close()

    def __enter__(self) -> "Judge":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- trusted data -------------------------------------------------------------------
    def reference(self, task: Task) -> ReferenceData:
        """The task's trusted reference data (computed once, then kept); blocks until the survey is done."""
        return self.reference_future(task).result()

    def reference_future(self, task: Task, budgeted: bool = True) -> Future[ReferenceData]:
        """The task's reference data, surveyed and timed alone in the background the first time
        (ReferenceCache.future)."""
        return self.references.future(task, budgeted)

    def baseline(self, task: Task, compiled: bool = True, tunableop: bool = False,
                 scenario: str = "offline", defaults: bool = True) -> dict[str, TimingStats]:
        """Reference times by the recipe, in a trusted worker: eager under the judge's strict precision
        ("reference"); with `defaults`, eager at PyTorch's default precision ("reference_default") and,
        with `compiled`, torch.compile at those defaults ("compiled", compiled before the device lock
        is taken); PyTorch's TunableOp ("tunableop", CUDA only). In one timing scenario."""
        return self.baselines(task, compiled, tunableop, (scenario,), defaults)[scenario]

    def baselines(self, task: Task, compiled: bool = True, tunableop: bool = False,
                  scenarios: tuple[str, ...] = ("offline",), defaults: bool = True) -> dict[str, dict[str, TimingStats]]:
        """`baseline`'s times in each of `scenarios`, by scenario, from one trusted worker: the task loaded,
        torch.compile run and TunableOp tuned once for all of them (each scenario's timing under the device
        lock on its own)."""
        seeds = self.seeds.timing
        timed = [TimeReference(seeds, defaults=defaults, tunableop=tunableop, scenario=sc) for sc in scenarios]
        _, answers = self.workers.trusted_call(task, [PrepareTiming(seeds), PrepareBaselines(seeds, compiled and defaults),
                                                      *timed], self.config, timed_ops=(TimeReference,))
        return {sc: {name: side(a, name) for name in a.samples} for sc, a in zip(scenarios, answers[2:])}

    def ceilings(self, refresh: bool = False) -> dict[str, Any]:
        """Memory bandwidth and peak matmul rate of this device, measured once per machine (cached on
        disk, believed only as the judge's own file: ceilings.py). `refresh` measures again and keeps the
        best of old and new (before any floor reject)."""
        return self.device_ceilings.get(refresh)

    def _device_key(self) -> str:
        return f"{self.device}|{describe_device(self.device, self.device_index).name}|{torch.__version__}"

    def _measure_ceilings(self) -> dict[str, Any]:
        _, (a,) = self.workers.trusted_call(None, [MeasureCeilings()], self.config, timed_ops=(MeasureCeilings,))
        return a.ceilings

    def vet(self, task: Task, seeds: int = 3) -> dict[str, Any]:
        """Run the task's vetting (kernelcraft.tasks.vet) in a trusted worker: its report and the worker's env."""
        _, (a,) = self.workers.trusted_call(task, [Vet(self.seeds.correctness[:seeds] or [1, 2, 3])], self.config)
        return {"ok": True, **a.report, "env": a.env}

    # -- evaluation ---------------------------------------------------------------------
    def evaluate(self, task: Task, source: str, config: JudgeConfig | None = None,
                 on_stage: Callable[[str], None] | None = None) -> Verdict:
        """One verdict for `source` on `task`. Raises TaskRunError only if the task itself fails.
        A failure on the judge's side (JudgeFault) is retried once in fresh workers (holding the
        device alone where the candidate ran out of device memory next to other evaluations); a
        second one gives the status judge_error, which is never the candidate's. `on_stage` is told
        each stage as it begins (setup, load, build, correctness, timing, profile, audit). A reject for a
        slowed reference is judged again, and the second verdict kept."""
        cfg, told = config or self.config, on_stage or _quiet
        v = self._evaluate(task, source, cfg, self_check=False, on_stage=told)
        if not slowed_reference_reject(v):
            return v
        # Such a reject must not rest on one evaluation: a host busy for a second or two (CI's other test
        # process starting workers, compiling) slows both of its measurements and none of the later ones
        # that would refute it (the reference alone, the control). A candidate that slows the reference
        # does so again.
        again = self._evaluate(task, source, cfg, self_check=False, on_stage=told)
        again.flags.append(Flag("noisy_timing", f"judged twice; the first evaluation: {v.message}"))
        again.resources["wall_s"] = again.resources.get("wall_s", 0.0) + v.resources.get("wall_s", 0.0)
        return again

    def self_check(self, task: Task, config: JudgeConfig | None = None) -> Verdict:
        """The task's own reference judged as the candidate (`kernelcraft self-check`): it must come out
        correct, at 1.00x within the noise band, with no judge_error. The candidate is built here from
        the task alone, so this mode, which lets library calls do the work (no static rules, no
        coverage reject), never judges a candidate's source."""
        return self._evaluate(task, self_check_source(task), config or self.config, self_check=True)

    def reference_control(self, task: Task, cfg: JudgeConfig, fresh: bool = True) -> Control | None:
        """The audit's control: the reference's offline times next to itself as the candidate (a self-check,
        by the candidate's protocol), in both slots of its rounds, measured now, or unless `fresh` of the last
        `control_reuse_s` seconds; None where the self-check measured none. Offline only: the audit compares
        offline times."""
        timing = dataclasses.replace(cfg.timing, server=False, sustained=False)
        key = (task.key, timing)
        kept = self._controls.get(key)
        if not fresh and kept is not None and time.monotonic() - kept[0] <= cfg.control_reuse_s:
            return kept[1]
        checked = self.self_check(task, dataclasses.replace(cfg, timing=timing))
        first, second = checked.candidate, checked.reference
        measured = Control(first, second) if first is not None and second is not None else None
        if measured is not None:
            now = time.monotonic()  # a long-lived judge sees many tasks: expired controls are let go
            self._controls = {k: c for k, c in self._controls.items() if now - c[0] <= cfg.control_reuse_s}
            self._controls[key] = (now, measured)
        return measured

    def _evaluate(self, task: Task, source: str, cfg: JudgeConfig, self_check: bool,
                  on_stage: Callable[[str], None] = _quiet) -> Verdict:
        t0 = time.perf_counter()
        report = check_source(source, enforce=cfg.static_checks and not self_check)
        static = StageResult("static", report.ok, time.perf_counter() - t0, report.message())
        faults: list[str] = []
        alone = False
        for _ in range(2):
            v = Verdict(status=Status.CORRECT, task=task.key, device=self.device, candidate_hash=source_hash(source),
                        flags=[Flag(code, msg) for code, msg in report.flags], stages=[static])
            if not report.ok:
                v.status, v.message = Status.STATIC_REJECTED, report.message()
                return v
            if self_check:
                v.env["self_check"] = True
            try:
                self._attempt(task, source, cfg, v, report.kernel_names, alone, self_check, _clocked(on_stage, v, t0))
                break
            except JudgeFault as f:
                faults.append(str(f))
                if f.reference:
                    self.references.drop(task)
                alone = alone or f.oom
        else:
            v.status = Status.JUDGE_ERROR
            v.message = f"the judge failed, not the candidate: {faults[-1]} (retried once in fresh workers)"
        if faults:
            v.env["judge_faults"] = faults
        v.resources["wall_s"] = time.perf_counter() - t0
        return v

    def _attempt(self, task: Task, source: str, cfg: JudgeConfig, v: Verdict, names: set[str], alone: bool,
                 self_check: bool, on_stage: Callable[[str], None]) -> None:
        """Everything after the static check, once: build, load, correctness, timing, audit."""
        self.ceilings()
        with ExitStack() as alone_hold, self.references.using(task):
            if alone:  # a retry after the device ran out of memory: nothing else runs on it meanwhile
                alone_hold.enter_context(self.memory.hold(self.memory.total))
                self.references.forget_pending(task)
            # The trusted reference (first candidate of a task only) runs while the candidate's worker
            # starts and builds: a CUDA build takes half a minute, the reference a few seconds.
            ref_future = self.reference_future(task, budgeted=not alone)
            try:
                with ExitStack() as budget, ExitStack() as held:  # the device memory goes back after the worker
                    w = held.enter_context(self.workers.take())
                    held.callback(lambda: v.resources.update(candidate_host_peak_bytes=peak_rss(w.worker_pid)))
                    disk = PeakDisk(w.scratch)
                    held.callback(lambda: v.resources.update(disk_peak_bytes=disk.peak + builds_bytes(self.cache_dir, v)))
                    held.enter_context(disk)
                    run = CandidateRun(self.workers, self.builds, self.seeds, self.memory, w, task, cfg, v, alone, self_check,
                                       on_stage)
                    audit = self._run_candidate(run, source, ref_future, names, budget)
                v.stages.append(audit)
                on_stage("audit")
                ref = ref_future.result()
                v.trusted_reference = ref.trusted  # waits for the reference's own timing
                # No control inside a self-check (it is the control), nor where the device is held alone.
                self.audit.run(task, v, audit, ref, cfg, control=not (self_check or alone))
            except StageFailed as f:
                v.status, v.message = f.status, str(f)
            except WorkerTimeout as e:
                stage = v.stages[-1].name if v.stages and not v.stages[-1].ok else "unknown"
                v.status, v.message = Status.TIMEOUT, f"{stage}: {e}; the worker's process group was killed"
            ref = ref_future.result()  # a task that fails to run raises TaskRunError here, a judge fault JudgeFault
            v.resources.update(reference_host_peak_bytes=peak_rss(ref.server.worker.worker_pid),
                               reference_device_bytes=ref.facts.peak_bytes, reference_cached=ref.facts.cached)
        self._attach_reference(v, ref)

    def _run_candidate(self, run: CandidateRun, source: str, ref_future: Future[ReferenceData], static_names: set[str],
                       held: ExitStack) -> StageResult:
        """Build, load, correctness, timing and coverage, each stage's result recorded as it returns;
        returns the audit stage begun by coverage. `held` keeps the device memory the evaluation takes
        until its worker is gone."""
        v = run.v
        v.stages += run.load(source)
        ref = ref_future.result()
        run.hold_memory(ref, held)
        times = command_timeouts(run.cfg, ref.facts, triton="triton" in source, cpu=run.device == "cpu")
        run.on_stage("correctness")
        correctness = run.correctness(ref, times)
        v.stages.append(correctness)
        check_sizes = run.task.meta.sizes.get("check")
        if run.cfg.second_shape and check_sizes:
            correctness.details["second_shape"] = run.second_shape(check_sizes)
        run.on_stage("timing")
        v.stages.append(self._time_candidate(run, ref, times))
        run.on_stage("profile")
        return run.profile(static_names, times)

    def _attach_reference(self, v: Verdict, ref: ReferenceData) -> None:
        if v.trusted_reference is None and ref.trusted_future.done() and ref.trusted_future.exception() is None:
            v.trusted_reference = ref.trusted
        v.env = {**ref.env, "judge_version": JUDGE_VERSION, "device_index": self.device_index, "compilers": compilers(), **v.env}
