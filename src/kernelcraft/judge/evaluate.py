"""The judge: evaluate one candidate against one task on one device, stage by stage.

static -> build -> load -> correctness -> timing -> audit. Each candidate runs in a fresh
sandboxed worker; each task's trusted worker holds what the outputs should be and compares the
candidate's outputs with them, seed by seed, without files (exchange.py, expected.py).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import secrets
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from ..tasks import Task
from .builds import BuildBudget, BuildService, BuildTimeout
from .ceilings import cached_ceilings, record_ceilings
from .compare import Mismatch
from .config import JudgeConfig
from .device import check_device, describe_device
from .expected import Facts
from .integrity import make_dir
from .locks import device_lock
from .memory import MemoryBudget, memory_budget
from .reference import JudgeFault, ReferenceData, ReferenceServer, SpotCheck, TaskRunError
from .resources import PeakDisk, builds_bytes, peak_rss
from .roofline import Roofline
from .rounds import ProtocolError, TimedRounds
from .rules import LOW_COVERAGE, rule_on_coverage
from .sandbox import WorkerDied, WorkerProcess, WorkerTimeout, hold_still
from .slowdown import verdict_slowdown
from .static import check_source
from .timeouts import CommandTimeouts, command_timeouts
from .verdict import Flag, StageResult, Status, TimingStats, Verdict

JUDGE_VERSION = "11"  # 2: binary_exact and guard_zones checks, the server timing scenario; 3: timing before the profile, the launch counter idle in timed calls; 4: the slowed-reference rules account for the host's speed; 5: the other workers stopped while one is timed; 6: timed rounds pinned to the fastest CPU; 7: a large win timed again before its audit; 8: iterations from the median warm-up call, not the mean; a large win timed twice, not four times; 9: outputs compared seed by seed in the task's trusted worker, without files, against a float64 truth; timeouts scaled to the reference; judge_error; device memory budgeted; 10: the rule on library calls: a kernel compiled into the candidate's extension is its own, and below coverage_credit_below a speedup earns no credit; a slow host excuses a slowed reference by 4x at most; 11: the kernels of its own a CUDA graph replay runs count as the candidate's own launches (coverage counts device records, not calls of its wrapped functions); extensions built by the judge, in a builder process, and published to the shared build cache, which the candidate only reads, verified; a build asked for after loading fails; a load's builds together get the build timeout; the timed rounds' inputs and checks drawn by the judge (each round checked with probability spot_checks / rounds, 10 on average, decided after the call returned) and compared in the trusted worker on inputs it makes; every call of the candidate's pinned as the timed rounds are; CPU workers' malloc keeps what is freed


# What each side of `Judge.baseline` is stored as: eager under the judge's strict precision, eager and
# torch.compile at PyTorch's defaults (cuDNN TF32 on: what users run), TunableOp.
_BASELINE_KINDS = {"reference": "eager", "reference_default": "eager_default", "compiled": "compile_default",
                   "tunableop": "tunableop"}


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


def _status_of(name: str) -> Status:
    try:
        return Status(name)
    except ValueError:
        return Status.RUNTIME_ERROR


class _Failed(Exception):
    """Ends an evaluation early with a status."""

    def __init__(self, status: Status, message: str) -> None:
        super().__init__(message)
        self.status = status


def _uses_triton(source: str) -> bool:
    return "triton" in source


def _check_outputs(a: dict[str, Any], ref: ReferenceData, stage: StageResult, device: str, where: str) -> None:
    """One seed's outputs as the worker described them: plain tensors on the judge's device, inputs
    modified only where the reference modifies them, no output sharing memory with an input unless
    the reference's does."""
    for j, m in enumerate(a["meta"]):
        if "shape" not in m:
            continue
        if not m["exact_tensor"]:
            stage.ok = False
            raise _Failed(Status.HACK_DETECTED, f"output {j} is a {m['type']}, not a plain torch.Tensor (lazy or proxy result)")
        if m["device"].split(":")[0] != device:
            stage.ok = False
            raise _Failed(Status.INCORRECT, f"output {j} is on {m['device']}, expected {device}")
    if a["mutated"] and not ref.mutates_inputs:
        stage.ok = False
        raise _Failed(Status.INCORRECT, f"the candidate modified its input(s) {a['mutated']} ({where})")
    if a["aliases_input"] and not ref.aliases_input:
        stage.ok = False
        raise _Failed(Status.INCORRECT, "an output shares memory with an input; the reference returns new tensors")


class Judge:
    """Evaluates candidates on one device. Thread-safe: a pool calls `evaluate` from many threads.

    Secret seeds are drawn once per judge. Per task, one trusted worker surveys the reference and is
    kept (the `reference_workers` most recently used tasks): it holds each seed's expected outputs on
    its device, up to `reference_cache_bytes`, or computes them again per comparison, and compares
    candidates' outputs with them. Evaluations of one device share its memory through a budget.
    """

    def __init__(self, device: str = "cpu", *, cache_dir: Path, config: JudgeConfig | None = None,
                 device_index: int = 0, build_jobs: int | None = None, reference_cache_bytes: int = 1 << 30,
                 reference_workers: int = 4, spare_workers: int = 0) -> None:
        check_device(device)
        self.device = device
        self.device_index = device_index
        self.cache_dir = make_dir(Path(cache_dir).resolve())  # workers run in their own directories
        self.config = config or JudgeConfig()
        self.build_jobs = build_jobs or max(1, (os.cpu_count() or 1))
        rng = secrets.SystemRandom()
        self.seeds = [rng.randrange(1, 2**31) for _ in range(self.config.seeds)]
        self.timing_seeds = [rng.randrange(1, 2**31) for _ in range(self.config.timing.input_sets)]
        self.binary_seeds = [rng.randrange(1, 2**31) for _ in range(self.config.binary_seeds)]
        self.init_seed = rng.randrange(1, 2**31)
        self._refs: OrderedDict[str, Future[ReferenceData]] = OrderedDict()
        self._ref_users: dict[str, int] = {}
        self._lock = threading.Lock()
        self._ref_cache_bytes = reference_cache_bytes
        self._ref_workers = max(1, reference_workers)
        self._ceilings: dict[str, Any] | None = None
        self._ceilings_lock = threading.Lock()  # its own: measuring must not stall reference lookups
        self.memory = MemoryBudget(memory_budget(device, device_index))
        # Spare workers start (import torch and Triton, make their CUDA context) while earlier
        # evaluations run, so a new candidate waits only for its task setup. Each is a fresh
        # process that has run nothing yet.
        self._spare_target = spare_workers
        self._spares: list[WorkerProcess] = []
        self._spares_lock = threading.Lock()

    @functools.cached_property
    def builds(self) -> BuildService:
        """Builds the candidates' extensions (first asked: a CUDA device's capability starts CUDA here)."""
        return BuildService(self.cache_dir, self.device, self.device_index, self.build_jobs,
                            describe_device(self.device, self.device_index).capability)

    # -- workers ------------------------------------------------------------------------
    def _worker(self) -> WorkerProcess:
        with self._spares_lock:
            spare = self._spares.pop(0) if self._spares else None  # the oldest: the most likely warm
            while len(self._spares) < self._spare_target:  # for the next callers
                self._spares.append(self._new_worker())
        return spare or self._new_worker()

    def _new_worker(self) -> WorkerProcess:
        try:
            return WorkerProcess(self.device, self.device_index, self.cache_dir, self.build_jobs)
        except OSError as e:  # no room for its directory, no process or file descriptor left
            raise JudgeFault(f"a worker could not be started: {e}") from None

    def close(self) -> None:
        """Stop the spare workers and the tasks' trusted workers (evaluations in flight close their own)."""
        with self._spares_lock:
            spares, self._spares = self._spares, []
            self._spare_target = 0  # a closed judge starts no more spares
        with self._lock:
            refs, self._refs = list(self._refs.values()), OrderedDict()
        for w in spares:
            w.close()
        for f in refs:
            if f.done() and f.exception() is None:
                f.result().server.close()

    def _setup(self, w: WorkerProcess, role: str, task: Task | None, config: JudgeConfig) -> dict[str, Any]:
        dtype = task.meta.dtype if task else "float32"
        atol, rtol = config.tolerance(dtype, task.meta.atol if task else None, task.meta.rtol if task else None)
        # The task's model is made on the device: shared device work, held here since no worker may
        # reach the lock files (a candidate's daemon held them and every evaluation waited).
        with self._device(shared=True) if self.device == "cuda" else nullcontext():
            return w.call({
                "op": "setup", "role": role, "device": self.device, "config": config.to_dict(), "dtype": dtype,
                "atol": atol, "rtol": rtol, "init_seed": self.init_seed, "cache_dir": str(self.cache_dir),
                "judge_uid": os.geteuid(), "capability": self.builds.capability,
                "task_source": task.source if task else None, "sizes": task.sizes_for(self.device) if task else {},
            }, timeout=config.timeouts.setup)

    def _device(self, shared: bool = False) -> AbstractContextManager[None]:
        """The device lock: exclusive while timing and profiling, `shared` for the judge's other work on
        the device, which must not run next to a measurement."""
        return device_lock(self.cache_dir, self.device, self.device_index, shared=shared)

    @contextmanager
    def _timing(self, w: WorkerProcess, cfg: JudgeConfig) -> Iterator[None]:
        """What a measurement holds: the device alone, and (unless configured off) the judge's other
        workers stopped."""
        with ExitStack() as held:
            held.enter_context(self._device())
            if cfg.timing.hold_others_still:
                held.enter_context(hold_still(w))
            yield

    @staticmethod
    def _trusted(w: WorkerProcess, where: str, cmd: dict[str, Any], timeout: float) -> dict[str, Any]:
        """One command of a trusted worker. Its failure is the task's (TaskRunError), unless the machine
        failed it: out of memory or disk, or killed from outside (JudgeFault)."""
        try:
            a = w.call(cmd, timeout=timeout)
        except WorkerTimeout as e:
            raise TaskRunError(f"{where}: the reference timed out ({e})") from None
        except WorkerDied as e:
            if e.outside:
                raise JudgeFault(f"{where}: the trusted reference worker died: {e}", reference=True) from None
            raise TaskRunError(f"{where}: the reference crashed ({e})") from None
        if not a["ok"]:
            if a["status"] == "judge_error":
                raise JudgeFault(f"{where}: {a['message']}", reference=True, oom=bool(a.get("oom")))
            raise TaskRunError(f"{where}: {a['message']}")
        return a

    def _trusted_setup(self, w: WorkerProcess, task: Task | None, where: str) -> dict[str, Any]:
        try:
            a = self._setup(w, "reference", task, self.config)
        except (WorkerDied, WorkerTimeout) as e:
            raise JudgeFault(f"{where}: a trusted worker did not start: {e}: {w.log_tail(600)}", reference=True) from None
        if not a["ok"]:
            if a["status"] == "judge_error":
                raise JudgeFault(f"{where}: {a['message']}", reference=True)
            raise TaskRunError(f"{where}: {a['message']}")
        return a

    def _trusted_call(self, task: Task | None, ops: list[dict[str, Any]], timed_ops: set[str] = frozenset()) -> list[dict[str, Any]]:
        """Run ops in a fresh trusted worker; `timed_ops` hold the device lock, the others share it."""
        cfg = self.config
        answers = []
        where = task.key if task else self.device
        with self._worker() as w:
            env = self._trusted_setup(w, task, where).get("env", {})
            for op in ops:
                op = {**op, "out_dir": str(w.scratch)}
                timed = op["op"] in timed_ops
                with self._timing(w, cfg) if timed else self._device(shared=True):
                    a = self._trusted(w, where, op, cfg.timeouts.timing if timed else cfg.timeouts.correctness)
                a.setdefault("env", env)
                answers.append(a)
        return answers

    # -- trusted data -------------------------------------------------------------------
    def reference(self, task: Task) -> ReferenceData:
        """The task's trusted reference data (computed once, then kept); blocks until the survey is done."""
        return self.reference_future(task).result()

    def _ref_key(self, task: Task) -> str:
        return hashlib.sha256(json.dumps([task.key, task.source, task.sizes_for(self.device)]).encode()).hexdigest()

    def reference_future(self, task: Task, budgeted: bool = True) -> Future[ReferenceData]:
        """The task's reference data, surveyed and timed alone in the background by a trusted worker the
        first time (while the first candidate builds). The survey and the trusted timing hold what they
        need of the device's memory budget, unless the caller holds all of it (`budgeted=False`)."""
        key = self._ref_key(task)
        with self._lock:
            known = self._refs.get(key)
            if known is not None and not (known.done() and known.exception() is not None):  # failures are retried
                self._refs.move_to_end(key)
                return known
            future: Future[ReferenceData] = Future()
            self._refs[key] = future
        threading.Thread(target=self._compute_reference, args=(task, future, budgeted), daemon=True, name="kc-reference").start()
        return future

    @contextmanager
    def _using_reference(self, task: Task) -> Iterator[None]:
        """An evaluation of `task` is under way: its trusted worker is not evicted meanwhile."""
        key = self._ref_key(task)
        with self._lock:
            self._ref_users[key] = self._ref_users.get(key, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                self._ref_users[key] -= 1
                if not self._ref_users[key]:
                    del self._ref_users[key]
            self._evict_references()

    def _drop_reference(self, task: Task) -> None:
        """Forget the task's trusted worker (it failed on the judge's side): the next evaluation starts a new one."""
        with self._lock:
            future = self._refs.pop(self._ref_key(task), None)
        if future is not None and future.done() and future.exception() is None:
            future.result().server.close()

    def _compute_reference(self, task: Task, future: Future[ReferenceData], budgeted: bool) -> None:
        trusted: Future[TimingStats] = Future()
        cfg, where, seeds = self.config, task.key, self.seeds
        w = self._worker()
        kept = False

        def hold(nbytes: int) -> AbstractContextManager[Any]:
            return self.memory.hold(nbytes) if budgeted else nullcontext()

        try:
            env = self._trusted_setup(w, task, where).get("env", {})
            binary = self.binary_seeds if "binary_exact" in task.meta.checks else []
            with self._device(shared=True):
                probe = self._trusted(w, where, {"op": "probe", "seed": seeds[0]}, cfg.timeouts.correctness)
            # The survey (the reference, a copy of its inputs, the float64 module with its inputs and outputs),
            # then the reference timed alone (its timing inputs and the rounds' copies), under one hold of the
            # device's memory: the data is handed out only once both are done, so no evaluation that holds
            # its own share ever waits for the trusted time while this waits for memory.
            floats = 4 * (probe["input_bytes"] + probe["output_bytes"]) if cfg.truth else 0
            survey = 2 * probe["peak_bytes"] + min(floats, int(2.5 * cfg.truth_max_gb * (1 << 30))) + self._ref_cache_bytes
            timing = (cfg.timing.input_sets + 3) * probe["input_bytes"] + 3 * probe["output_bytes"] + probe["peak_bytes"]
            with hold(max(survey, timing)):
                with self._device(shared=True):
                    a = self._trusted(w, where, {"op": "survey", "seeds": seeds, "binary_seeds": binary,
                                                 "cache_bytes": self._ref_cache_bytes}, cfg.timeouts.correctness)
                    self._trusted(w, where, {"op": "prepare_timing", "seeds": self.timing_seeds}, cfg.timeouts.correctness)
                with self._timing(w, cfg):
                    t = self._trusted(w, where, {"op": "time_reference", "seeds": self.timing_seeds, "release_inputs": True,
                                                 "target_ms": cfg.timing.trusted_target_ms}, cfg.timeouts.timing)
            trusted.set_result(TimingStats.side(t, "reference"))
            ref = ReferenceData(Facts(**a["facts"]), flops=a["flops"], bytes=a["bytes"], param_bytes=a["param_bytes"],
                                trusted_future=trusted, server=ReferenceServer(w, where), env={**env, **a["env"]})
            kept = True
            future.set_result(ref)
            with self._lock:
                orphaned = self._refs.get(self._ref_key(task)) is not future
            if orphaned:  # an evaluation retried alone started its own meanwhile: this one is no one's
                ref.server.close()
            self._evict_references()
        except BaseException as e:  # noqa: BLE001 - whoever waits on the data gets the error
            for f in (future, trusted):
                if not f.done():
                    f.set_exception(e)
            if not kept:
                w.close()

    def _evict_references(self) -> None:
        """The least recently used tasks' trusted workers closed while more are kept than allowed
        (never one an evaluation is using)."""
        evicted = []
        with self._lock:
            live = [k for k, f in self._refs.items() if f.done() and f.exception() is None]
            excess = len(live) - self._ref_workers
            for k in live:
                if excess <= 0:
                    break
                if self._ref_users.get(k, 0) == 0:
                    evicted.append(self._refs.pop(k).result().server)
                    excess -= 1
        for server in evicted:
            server.close()

    def baseline(self, task: Task, compiled: bool = True, tunableop: bool = False,
                 scenario: str = "offline", defaults: bool = True) -> dict[str, TimingStats]:
        """Reference times by the recipe, in a trusted worker: eager under the judge's strict precision
        ("reference"); with `defaults`, eager at PyTorch's default precision ("reference_default") and,
        with `compiled`, torch.compile at those defaults ("compiled", compiled before the device lock
        is taken); PyTorch's TunableOp ("tunableop", CUDA only). Offline or server."""
        seeds = self.timing_seeds
        *_, a = self._trusted_call(task, [{"op": "prepare_timing", "seeds": seeds},
                                          {"op": "prepare_baselines", "seeds": seeds, "compiled": compiled and defaults},
                                          {"op": "time_reference", "seeds": seeds, "defaults": defaults,
                                           "tunableop": tunableop, "scenario": scenario}],
                                   timed_ops={"time_reference"})
        return {name: TimingStats.side(a, name) for name in a["samples"]}

    def ceilings(self, refresh: bool = False) -> dict[str, Any]:
        """Memory bandwidth and peak matmul rate of this device, measured once per machine (cached
        on disk, believed only as the judge's own file: ceilings.py). The first evaluation measures them
        before it starts any worker, so the pool is quiet: a ceiling measured under load would raise the
        floor and reject honest kernels.
        `refresh` measures again and keeps the best of old and new (before any floor reject)."""
        with self._ceilings_lock:
            if self._ceilings is not None and not refresh:
                return self._ceilings
            key = f"{self.device}|{describe_device(self.device, self.device_index).name}|{torch.__version__}"
            ceilings = cached_ceilings(self.cache_dir).get(key)
            if ceilings is None or refresh:
                (a,) = self._trusted_call(None, [{"op": "ceilings"}], timed_ops={"ceilings"})
                ceilings = record_ceilings(self.cache_dir, key, a["ceilings"])
            self._ceilings = ceilings
            return self._ceilings

    def vet(self, task: Task, seeds: int = 3) -> dict[str, Any]:
        """Run the task's vetting (kernelcraft.tasks.vet) in a trusted worker."""
        (a,) = self._trusted_call(task, [{"op": "vet", "seeds": self.seeds[:seeds] or [1, 2, 3]}])
        return a


    # -- evaluation ---------------------------------------------------------------------
    def evaluate(self, task: Task, source: str, config: JudgeConfig | None = None) -> Verdict:
        """One verdict for `source` on `task`. Raises TaskRunError only if the task itself fails.
        A failure on the judge's side (JudgeFault) is retried once in fresh workers (holding the
        device alone where the candidate ran out of device memory next to other evaluations); a
        second one gives the status judge_error, which is never the candidate's."""
        return self._evaluate(task, source, config or self.config, self_check=False)

    def self_check(self, task: Task, config: JudgeConfig | None = None) -> Verdict:
        """The task's own reference judged as the candidate (`kernelcraft self-check`): it must come out
        correct, at 1.00x within the noise band, with no judge_error. The candidate is built here from
        the task alone, so this mode, which lets library calls do the work (no static rules, no
        coverage reject), never judges a candidate's source."""
        return self._evaluate(task, self_check_source(task), config or self.config, self_check=True)

    def _evaluate(self, task: Task, source: str, cfg: JudgeConfig, self_check: bool) -> Verdict:
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
                self._attempt(task, source, cfg, v, report.kernel_names, alone, self_check)
                break
            except JudgeFault as f:
                faults.append(str(f))
                if f.reference:
                    self._drop_reference(task)
                alone = alone or f.oom
        else:
            v.status = Status.JUDGE_ERROR
            v.message = f"the judge failed, not the candidate: {faults[-1]} (retried once in fresh workers)"
        if faults:
            v.env["judge_faults"] = faults
        v.resources["wall_s"] = time.perf_counter() - t0
        return v

    def _attempt(self, task: Task, source: str, cfg: JudgeConfig, v: Verdict, names: set[str], alone: bool,
                 self_check: bool) -> None:
        """Everything after the static check, once: build, load, correctness, timing, audit."""
        self.ceilings()
        with ExitStack() as alone_hold, self._using_reference(task):
            if alone:  # a retry after the device ran out of memory: nothing else runs on it meanwhile
                alone_hold.enter_context(self.memory.hold(self.memory.total))
                with self._lock:  # a survey still waiting for memory would wait on this evaluation: its own instead
                    pending = self._refs.get(self._ref_key(task))
                    if pending is not None and not pending.done():
                        del self._refs[self._ref_key(task)]
            # The trusted reference (first candidate of a task only) runs while the candidate's worker
            # starts and builds: a CUDA build takes half a minute, the reference a few seconds.
            ref_future = self.reference_future(task, budgeted=not alone)
            try:
                with ExitStack() as budget, ExitStack() as held:  # the device memory goes back after the worker
                    w = held.enter_context(self._worker())
                    held.callback(lambda: v.resources.update(candidate_host_peak_bytes=peak_rss(w.worker_pid)))
                    disk = PeakDisk(w.scratch)
                    held.callback(lambda: v.resources.update(disk_peak_bytes=disk.peak + builds_bytes(self.cache_dir, v)))
                    held.enter_context(disk)
                    audit = self._run_candidate(w, task, source, ref_future, cfg, v, names, alone, budget, self_check)
                v.stages.append(audit)
                ref = ref_future.result()
                v.trusted_reference = ref.trusted  # waits for the reference's own timing
                self._audit(task, v, audit, ref, cfg)
            except _Failed as f:
                v.status, v.message = f.status, str(f)
            except WorkerTimeout as e:
                stage = v.stages[-1].name if v.stages and not v.stages[-1].ok else "unknown"
                v.status, v.message = Status.TIMEOUT, f"{stage}: {e}; the worker's process group was killed"
            ref = ref_future.result()  # a task that fails to run raises TaskRunError here, a judge fault JudgeFault
            v.resources.update(reference_host_peak_bytes=peak_rss(ref.server.worker.worker_pid),
                               reference_device_bytes=ref.facts.peak_bytes, reference_cached=ref.facts.cached)
        self._attach_reference(v, ref)

    def _attach_reference(self, v: Verdict, ref: ReferenceData) -> None:
        if v.trusted_reference is None and ref.trusted_future.done() and ref.trusted_future.exception() is None:
            v.trusted_reference = ref.trusted
        v.env = {**ref.env, "judge_version": JUDGE_VERSION, "device_index": self.device_index, **v.env}

    def _build_requests(self, w: WorkerProcess, cfg: JudgeConfig) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """Answers the build requests of a candidate loading in `w`. Builds past the build timeout end the
        load as the worker's own timeout does: the worker is killed."""
        budget = BuildBudget(cfg.timeouts.build)

        def answer(request: dict[str, Any]) -> dict[str, Any]:
            try:
                return self.builds.answer(request, budget)
            except BuildTimeout as e:
                w.kill()
                raise WorkerTimeout(str(e)) from None
        return answer

    def _command(self, w: WorkerProcess, stage: StageResult, cmd: dict[str, Any], timeout: float, fail_status: Status,
                 alone: bool = False, on_request: TimedRounds | None = None) -> dict[str, Any]:
        """One command of the candidate's worker as part of `stage` (`on_request` answers the worker's
        requests meanwhile). A failure ends the evaluation with a status; the machine's failures (an
        answer of judge_error, a worker killed from outside, a candidate out of device memory on a
        device it shared) raise JudgeFault."""
        try:
            a = w.call(cmd, timeout=timeout, on_request=on_request)
        except ProtocolError as e:
            w.kill()
            stage.ok, stage.message = False, f"the worker's requests broke the judge's protocol (forged?): {e}"
            raise _Failed(Status.HACK_DETECTED, stage.message) from None
        except WorkerTimeout as e:
            stage.ok, stage.message = False, str(e)
            raise
        except WorkerDied as e:
            tail = w.log_tail(600)
            stage.ok, stage.message = False, f"{e}" + (f"; last output: {tail}" if tail else "")
            if e.outside:
                raise JudgeFault(f"{stage.name}: {stage.message}") from None
            raise _Failed(fail_status, f"{stage.name}: {stage.message}") from None
        if not a["ok"]:
            stage.ok, stage.message = False, a["message"]
            if a["status"] == "judge_error":
                raise JudgeFault(f"{stage.name}: {a['message']}")
            if a["status"] == "task_error":
                raise TaskRunError(a["message"])
            if a.get("oom") and not alone:
                raise JudgeFault(f"{stage.name}: out of device memory on a device shared with other evaluations: {a['message']}",
                                 oom=True)
            raise _Failed(_status_of(a["status"]), a["message"])
        return a

    def _step(self, w: WorkerProcess, v: Verdict, stage: str, cmd: dict[str, Any], timeout: float,
              fail_status: Status, alone: bool = False, on_request: TimedRounds | None = None) -> dict[str, Any]:
        """One command as (part of) a stage, appended to the verdict; failures end the evaluation with a status."""
        t0 = time.perf_counter()
        result = StageResult(stage, False)
        v.stages.append(result)
        try:
            a = self._command(w, result, cmd, timeout, fail_status, alone, on_request)
        finally:
            result.seconds = time.perf_counter() - t0
        result.ok = True
        return a

    def _run_candidate(self, w: WorkerProcess, task: Task, source: str, ref_future: Future[ReferenceData],
                       cfg: JudgeConfig, v: Verdict, static_names: set[str], alone: bool, held: ExitStack,
                       self_check: bool = False) -> StageResult:
        """Build, load, correctness, timing and coverage; returns the audit stage begun by coverage.
        `held` keeps the device memory the evaluation takes until its worker is gone. A self-check
        (the reference as its own candidate) has no kernels of its own: coverage is reported only."""
        t0 = time.perf_counter()
        try:
            a = self._setup(w, "candidate", task, cfg)
        except (WorkerDied, WorkerTimeout) as e:
            raise JudgeFault(f"a worker did not start: {e}: {w.log_tail(600)}") from None
        if not a["ok"]:
            if a["status"] == "task_error":
                raise TaskRunError(f"{task.key}: {a['message']}")
            raise JudgeFault(f"a worker could not be set up: {a['message']}")
        # Waiting for the worker is isolation overhead; the task's own setup (its module, its model on
        # the device) is work a one-process harness does too. Both are recorded with load.
        spawn_s = time.perf_counter() - t0
        task_setup_s = float(a.get("task_setup_s", 0.0))

        timeouts = cfg.timeouts
        t1 = time.perf_counter()
        try:
            a = w.call({"op": "load", "candidate_source": source, "task_source": task.source}, timeout=timeouts.build + timeouts.load,
                       on_request=self._build_requests(w, cfg))
        except WorkerDied as e:
            v.stages.append(StageResult("build", False, time.perf_counter() - t1, str(e)))
            if e.outside:
                raise JudgeFault(f"load: {e}") from None
            raise _Failed(Status.LOAD_FAILED, f"load: {e}: {w.log_tail(600)}") from None
        except WorkerTimeout:
            v.stages.append(StageResult("build", False, time.perf_counter() - t1, "timed out"))
            raise
        build_s = float(a.get("build_s", 0.0))
        if not a["ok"] and a["status"] in ("build_failed", "judge_error"):
            v.stages.append(StageResult("build", False, build_s, a["message"]))
            if a["status"] == "judge_error":
                raise JudgeFault(f"build: {a['message']}")
            raise _Failed(Status.BUILD_FAILED, a["message"])
        v.stages.append(StageResult("build", True, build_s, details={"keys": a.get("build_keys", [])}))
        load_s = time.perf_counter() - t1 - build_s
        if not a["ok"]:
            v.stages.append(StageResult("load", False, load_s, a["message"]))
            raise _Failed(_status_of(a["status"]) if a["status"] == "hack_detected" else Status.LOAD_FAILED, a["message"])
        v.stages.append(StageResult("load", True, load_s, details={"weights_copied": a["weights_copied"],
                                                                    "kernel_names": a["kernel_names"], "spawn_s": spawn_s,
                                                                    "task_setup_s": task_setup_s}))

        ref = ref_future.result()
        if not alone:  # (alone, the evaluation holds the whole budget already)
            held.enter_context(self.memory.hold(ref.device_need(cfg.timing.input_sets)))
        times = command_timeouts(cfg, ref.facts, triton=_uses_triton(source), cpu=self.device == "cpu")
        stage = self._correctness(w, task, ref, cfg, v, times, alone)

        check_sizes = task.meta.sizes.get("check")
        if cfg.second_shape and check_sizes:
            with self._device(shared=True):
                a = self._step(w, v, "correctness", {"op": "second_shape", "sizes": check_sizes, "seed": self.seeds[-1]},
                               timeouts.correctness, Status.RUNTIME_ERROR)
            v.stages.pop()
            stage.details["second_shape"] = {"sizes": check_sizes, "match": a["match"], "message": a["message"]}
            if a["match"] is False:
                v.flags.append(Flag("shape_specialised", f"wrong at the task's check size {check_sizes}: {a['message'][:300]}"))

        # timing: ABAB against the reference in the candidate's process, device lock held
        with self._device(shared=True):
            self._step(w, v, "timing", {"op": "prepare_timing", "seeds": self.timing_seeds}, timeouts.timing, Status.RUNTIME_ERROR,
                       alone)
        rounds = self._rounds_of(w, task, ref, cfg, times)
        self._time(w, v, cfg, v.stages.pop().seconds, times.timing, alone, rounds)
        # A reject for a slowed reference must not rest on one measurement: a host busy for a
        # moment slows both sides of every sample alike. A candidate that slows the reference does
        # so again; the verdict keeps the second measurement either way. A large win is timed again
        # too, whatever the trusted time says: the audit checks it against the reference timed alone
        # once more, and where the trusted time was inflated by a busy host, only that check sees
        # the slowed reference (a reject that rested on one measurement, until CI caught it).
        win = v.speedup > 1.0 and v.significant
        slowed = verdict_slowdown(v, ref.trusted).ratio if win else 1.0
        suspect = slowed > cfg.slowed_reference_reject
        if suspect or (win and v.speedup > cfg.timing.remeasure_above):
            first = v.speedup
            self._time(w, v, cfg, v.stages.pop().seconds, times.timing, alone, rounds)
            again = verdict_slowdown(v, ref.trusted).ratio
            v.stage("timing").details["retimed"] = {"speedup": first, "reference_vs_trusted": slowed}
            if suspect or abs(v.speedup - first) > 0.1 * first:
                v.flags.append(Flag("noisy_timing", f"the reference ran {slowed:.2f}x slower next to the candidate than alone "
                                                    f"({first:.2f}x); timed again: {again:.2f}x slower ({v.speedup:.2f}x)"))
        # coverage: profiled calls (a measurement, so the device is ours), after the timed ones: the
        # profiler leaves CUPTI attached to the worker, and every later launch and synchronisation
        # pays its callbacks (a 256x64x128 torch.matmul timed at 76 us instead of 29 on an H100,
        # benchmarks/timing_contention.py), which squeezes every short call's speedup towards 1.
        # The rule on library calls (rules.py) rules on what it found.
        with self._device():
            a = self._step(w, v, "audit", {"op": "profile", "seed": self.seeds[0], "kernel_names": sorted(static_names)},
                           times.profile, Status.RUNTIME_ERROR, alone)
        audit = v.stages.pop()
        v.resources.update(candidate_device_peak_bytes=a.get("device_peak_bytes", 0))
        audit.details["coverage"] = {k: a.get(k) for k in ("coverage", "custom_launches", "calls", "custom_kernels", "top_other",
                                                            "graph_launches", "graph_runs")}
        v.coverage = float(a.get("coverage", 0.0))
        if self_check:
            return audit
        ruling = rule_on_coverage(v.coverage, a["custom_launches"], a.get("top_other") or [], cfg)
        if ruling.reject:
            audit.ok, audit.message = False, ruling.reject
            v.stages.append(audit)
            raise _Failed(Status.HACK_DETECTED, ruling.reject)
        if ruling.flag:
            v.flags.append(Flag(LOW_COVERAGE, ruling.flag))
        return audit

    def _correctness(self, w: WorkerProcess, task: Task, ref: ReferenceData, cfg: JudgeConfig, v: Verdict,
                     times: CommandTimeouts, alone: bool) -> StageResult:
        """The candidate on every secret seed (and the 0/1 inputs of a binary_exact task), one seed at
        a time: its worker shares the outputs, the task's trusted worker compares them with what they
        should be, and the worker lets them go before the next seed."""
        atol, rtol = cfg.tolerance(task.meta.dtype, task.meta.atol, task.meta.rtol)
        guard_bytes = ref.first_output_bytes() if "guard_zones" in task.meta.checks else None
        calls = [("seed", i, seed, None, f"forward on seed {i}") for i, seed in enumerate(self.seeds)]
        calls += [("binary", j, b["seed"], b["p"], f"forward on 0/1 inputs {j}") for j, b in enumerate(ref.binary[:cfg.binary_seeds])]
        stage = StageResult("correctness", True)
        v.stages.append(stage)
        worst = {"max_abs": 0.0, "max_rel": 0.0, "rel_l2": 0.0, "ref_max_abs": 0.0, "ref_rel_l2": 0.0}
        binary, guards, growth = [], [], 0
        t0 = time.perf_counter()
        try:
            for n, (kind, i, seed, p, when) in enumerate(calls):
                cmd = {"op": "run_seed", "seed": seed, "binary_p": p, "when": when, "poison_bytes": 2 * ref.output_bytes + (64 << 20),
                       "guard_output_bytes": guard_bytes}
                with self._device(shared=not alone):
                    a = self._command(w, stage, cmd, times.first_call if n == 0 else times.run_seed, Status.RUNTIME_ERROR, alone)
                    _check_outputs(a, ref, stage, self.device, f"seed {i}" if kind == "seed" else f"0/1 inputs {i}")
                    found = ref.server.compare(kind, i, a, w, (atol, rtol) if kind == "seed" else (0.0, 0.0),
                                               cfg.truth_factor, times.compare)
                    self._command(w, stage, {"op": "release"}, times.run_seed, Status.RUNTIME_ERROR, alone)
                growth = max(growth, int(a.get("native_thread_growth", 0)))
                guards.append(a.get("guard"))
                bad = next((m for m in found if not m.ok), None)
                if bad is not None:
                    stage.ok, stage.details = False, bad.to_dict()
                    if bad.forged:
                        raise _Failed(Status.HACK_DETECTED, bad.reason)
                    if kind == "seed":
                        raise _Failed(Status.INCORRECT, f"seed {i + 1}/{len(self.seeds)}: {bad.describe()} (atol={atol:g}, rtol={rtol:g})")
                    raise _Failed(Status.INCORRECT, f"inputs of 0s and 1s (ones with probability {p:.3g}), compared exactly: "
                                                    f"{bad.describe()}")
                if kind == "seed":
                    worst = {k: max(val, *(getattr(m, k) for m in found)) for k, val in worst.items()}
                else:
                    binary.append({"p": p, "checked": sum(m.total for m in found), "share": ref.binary[i]["share"]})
        finally:
            stage.seconds = time.perf_counter() - t0
        v.errors = worst
        stage.details = {"seeds": len(self.seeds), "atol": atol, "rtol": rtol, **worst, "truth": ref.facts.truth,
                         "truth_factor": cfg.truth_factor, "native_thread_growth": growth,
                         "timeouts": {"run_s": times.run_seed, "first_call_s": times.first_call, "timing_s": times.timing,
                                      "spot_check_s": times.spot_check,
                                      "scaled": times.scaled}}
        if binary:
            stage.details["binary_exact"] = binary
        if guard_bytes is not None:
            stage.details["guard_zones"] = {"output": guards}
        # On the CPU the worker holds native threads to the reference's thread count (guards.ThreadWatch:
        # beyond one OpenMP pool per runtime is hack_detected), so growth there is an honest pool.
        if growth > 0 and self.device != "cpu":
            v.flags.append(Flag("native_threads", f"{growth} native thread(s) appeared during the candidate's calls"))
        return stage

    def _rounds_of(self, w: WorkerProcess, task: Task, ref: ReferenceData, cfg: JudgeConfig,
                   times: CommandTimeouts) -> Callable[[str | None], TimedRounds]:
        """The judge's side of one timing command's rounds, per scenario (rounds.py): the task's trusted
        worker checks the calls it draws, by the correctness stage's rule (the float64 truth decides
        where the plain comparison fails, where the truth applies)."""
        tolerance = cfg.tolerance(task.meta.dtype, task.meta.atol, task.meta.rtol)
        truth = ref.facts.truth == "float64"

        def compare(k: int, roll: int, shared: dict[str, Any]) -> list[Mismatch]:
            check = SpotCheck(self.timing_seeds[k], roll, cfg.timing.fresh_inputs, tolerance, truth, cfg.truth_factor)
            return ref.server.spot_check(check, shared, w, times.spot_check)

        def rounds(scenario: str | None) -> TimedRounds:
            t = cfg.timing.for_scenario(scenario)
            return TimedRounds(len(self.timing_seeds), t.spot_checks, (t.min_iters, t.max_iters), compare)
        return rounds

    def _time(self, w: WorkerProcess, v: Verdict, cfg: JudgeConfig, earlier_s: float, timeout: float, alone: bool,
              rounds: Callable[[str | None], TimedRounds]) -> None:
        """One ABAB measurement of candidate and reference (offline, then the server scenario if
        asked) under the exclusive device lock, each command given `timeout` seconds and its `rounds`;
        sets the verdict's times, speedup and noise band and appends the timing stage, which also counts
        `earlier_s` (input preparation, an earlier try). `alone`: the evaluation holds the device's
        whole memory (a candidate out of memory then is out of memory on its own)."""
        cmd = {"op": "time", "seeds": self.timing_seeds}
        waited = time.perf_counter()
        with self._timing(w, cfg):
            waited = time.perf_counter() - waited
            a, ref_t, cand_t = self._measure(w, v, cmd, timeout, alone, rounds)
            v.stages[-1].seconds += earlier_s
            # A measurement whose reference scattered widely (a busy host) is taken again, a few
            # times at most, and the quietest kept: its band would hide any speedup.
            spreads = [ref_t.rel_spread]
            while spreads[-1] > cfg.timing.retime_spread_above and len(spreads) <= cfg.timing.noisy_retimes:
                b, b_ref, b_cand = self._measure(w, v, cmd, timeout, alone, rounds)
                v.stages.pop()
                spreads.append(b_ref.rel_spread)
                if b_ref.rel_spread < ref_t.rel_spread:
                    a, ref_t, cand_t = b, b_ref, b_cand
            if len(spreads) > 1:
                v.flags.append(Flag("noisy_timing", "the reference scattered widely; timed again: half-IQR "
                                                    + ", ".join(f"{s:.0%}" for s in spreads) + ", the quietest kept"))
            if cfg.timing.server:
                c, sref, scand = self._measure(w, v, {**cmd, "scenario": "server"}, timeout, alone, rounds)
                v.stages.pop()
                v.scenarios["server"] = {"qps": cfg.timing.server_qps, "speedup": sref.median_ms / scand.median_ms,
                                         "reference": asdict(sref), "candidate": asdict(scand)}
        v.reference, v.candidate = ref_t, cand_t
        v.speedup = ref_t.median_ms / cand_t.median_ms
        noise = max(ref_t.rel_spread, cfg.timing.min_noise)
        v.speedup_band = (v.speedup * (1 - noise), v.speedup * (1 + noise))
        v.significant = abs(v.speedup - 1.0) > noise
        timing_stage = v.stages[-1]
        timing_stage.details = {"iterations": len(a["samples"]["candidate"]), "spot_checks": a["spot_checks"], "lock_wait_s": waited,
                                "noise": noise, "clocks": a["clocks"],
                                "phases_s": a.get("phases_s"), "host_ms": a.get("host_ms"), "cpus": a.get("cpus")}
        v.env["clocks"] = a["clocks"]

    def _measure(self, w: WorkerProcess, v: Verdict, cmd: dict[str, Any], timeout: float, alone: bool,
                 rounds: Callable[[str | None], TimedRounds]) -> tuple[dict[str, Any], TimingStats, TimingStats]:
        """One timing command in the worker (it appends a timing stage), its rounds drawn and checked by
        the judge: the worker's answer with the checks made (`spot_checks`), and the reference's and the
        candidate's statistics. A timed call found wrong ends the evaluation (incorrect)."""
        judged = rounds(cmd.get("scenario"))
        a = self._step(w, v, "timing", cmd, timeout, Status.RUNTIME_ERROR, alone, judged)
        stage = v.stages[-1]
        try:
            judged.finish(a["samples"])
        except ProtocolError as e:
            stage.ok, stage.message = False, f"the worker's answer broke the judge's protocol (forged?): {e}"
            raise _Failed(Status.HACK_DETECTED, stage.message) from None
        if judged.failure is not None:
            i, bad = judged.failure
            stage.ok, stage.details = False, bad.to_dict()
            stage.message = bad.reason if bad.forged else \
                f"output of timed call {i} is wrong (caching or deferred work?): {bad.describe()}"
            raise _Failed(Status.HACK_DETECTED if bad.forged else Status.INCORRECT, stage.message)
        return {**a, "spot_checks": judged.checked}, TimingStats.side(a, "reference"), TimingStats.side(a, "candidate")

    def _audit(self, task: Task, v: Verdict, stage: StageResult, ref: ReferenceData, cfg: JudgeConfig) -> None:
        """Physical floor, slowed reference, clocks: the last word on a correct candidate."""
        t0 = time.perf_counter()
        cand_ms = v.candidate.median_ms
        ceilings = self.ceilings()
        roof = Roofline.of(ref.flops, ref.bytes, cand_ms, ceilings)
        if cand_ms < cfg.floor_margin * roof.bytes_floor_ms:
            ceilings = self.ceilings(refresh=True)  # a reject must not rest on one low measurement
            roof = Roofline.of(ref.flops, ref.bytes, cand_ms, ceilings)
        bytes_floor_ms, flop_floor_ms = roof.bytes_floor_ms, roof.flop_floor_ms
        # The reference timed alone now, once the candidate's processes are gone: taken only when a
        # verdict rests on it, and then shared by both checks below.
        alone_now = None
        if v.speedup > cfg.timing.remeasure_above:
            # A large win is checked against a fresh trusted time too: a trusted time inflated by
            # a busy machine would otherwise hide a slowed reference.
            alone_now = self.baseline(task, compiled=False, defaults=False)["reference"]
            if alone_now.median_ms < v.trusted_reference.median_ms:
                v.trusted_reference = alone_now
        slowdown = verdict_slowdown(v, v.trusted_reference)
        slowed = slowdown.ratio
        stage.details.update(bytes=ref.bytes, flops=ref.flops, bytes_floor_ms=bytes_floor_ms, flop_floor_ms=flop_floor_ms,
                             reference_vs_trusted=slowed, reference_vs_trusted_raw=slowdown.raw,
                             host_factor=slowdown.host_factor, ceilings=ceilings)
        if slowed > cfg.slowed_reference_flag:
            host = f" ({slowdown.raw:.2f}x, {slowdown.host_factor:.2f}x of it the host's speed)" if slowdown.host_factor != 1.0 else ""
            v.flags.append(Flag("slowed_reference", f"the reference ran {slowed:.2f}x slower next to the candidate than alone{host}"))
        win = v.speedup > 1.0 and v.significant
        if slowed > cfg.slowed_reference_reject and win:
            # A reject must not rest on a trusted time from another moment: a reference still slow
            # alone now means a busy host, not the candidate.
            if alone_now is None:
                alone_now = self.baseline(task, compiled=False, defaults=False)["reference"]
            stage.details["reference_vs_trusted_now"] = verdict_slowdown(v, alone_now).ratio
            slowed = min(slowed, stage.details["reference_vs_trusted_now"])
        if cand_ms < cfg.floor_margin * bytes_floor_ms:
            self._reject(v, stage, f"{cand_ms:.4g} ms is below the memory floor of this task ({bytes_floor_ms:.4g} ms: "
                                   f"{ref.bytes / 1e6:.3g} MB at {ceilings['bandwidth_bytes_per_s'] / 1e9:.0f} GB/s): impossible, so not measured honestly")
        elif slowed > cfg.slowed_reference_reject and win:
            # A win that exists only because the reference ran slower next to the candidate. A speedup
            # inside the noise band claims no win: there, a slow reference is noise (a few samples, a busy
            # host), and the flag above says so.
            self._reject(v, stage, f"the reference ran {slowed:.2f}x slower next to the candidate than alone "
                                   f"({v.speedup:.2f}x measured, {v.speedup / slowed:.2f}x against the trusted time): the candidate slows the reference")
        else:
            if cand_ms < flop_floor_ms:
                v.flags.append(Flag("below_flop_floor", f"{cand_ms:.4g} ms is below the reference's FLOP floor ({flop_floor_ms:.4g} ms): an algebraic shortcut, or a hack"))
            clocks = v.env.get("clocks", {})
            b, e = clocks.get("before", {}).get("sm_clock_mhz"), clocks.get("after", {}).get("sm_clock_mhz")
            if b and e and abs(b - e) > 0.15 * max(b, e):
                v.flags.append(Flag("clock_drift", f"SM clock moved from {b} to {e} MHz during timing"))
            if ref.trusted.rel_spread > 0.05:
                v.flags.append(Flag("noisy_timing", f"the reference's own spread is {ref.trusted.rel_spread:.1%}"))
        stage.seconds += time.perf_counter() - t0
        if v.status is Status.CORRECT:
            v.roofline = roof
            band = f" (noise band {v.speedup_band[0]:.2f}-{v.speedup_band[1]:.2f})" if v.speedup_band else ""
            v.message = f"correct; {v.speedup:.2f}x{band}" + ("" if v.significant else ", within noise: no speedup")
            if v.significant and v.effective_speedup != v.speedup:
                v.message += f", counted as {v.effective_speedup:.2f}x under the rule on library calls ({LOW_COVERAGE})"

    @staticmethod
    def _reject(v: Verdict, stage: StageResult, message: str) -> None:
        stage.ok = False
        stage.message = message
        v.status, v.message = Status.HACK_DETECTED, message
