"""The judge: evaluate one candidate against one task on one device, stage by stage.

static -> build -> load -> correctness -> timing -> audit. Each candidate runs in a fresh
sandboxed worker; reference outputs come from a separate trusted worker and are compared here.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from ..tasks import Task
from .ceilings import best_of
from .compare import compare_outputs
from .config import JudgeConfig
from .device import check_device, describe_device
from .locks import device_lock
from .reference import ReferenceData, TaskRunError
from .sandbox import WorkerDied, WorkerProcess, WorkerTimeout, hold_still
from .slowdown import verdict_slowdown
from .static import check_source
from .verdict import Flag, StageResult, Status, TimingStats, Verdict

JUDGE_VERSION = "8"  # 2: binary_exact and guard_zones checks, the server timing scenario; 3: timing before the profile, the launch counter idle in timed calls; 4: the slowed-reference rules account for the host's speed; 5: the other workers stopped while one is timed; 6: timed rounds pinned to the fastest CPU; 7: a large win timed again before its audit; 8: iterations from the median warm-up call, not the mean; a large win timed twice, not four times


_BASELINE_KINDS = {"reference": "eager", "compiled": "compile", "tunableop": "tunableop"}


def baseline_kind(side: str, scenario: str = "offline") -> str:
    """The name a baseline of `Judge.baseline` is stored under: eager, compile or tunableop,
    with "@server" for the server scenario."""
    kind = _BASELINE_KINDS[side]
    return kind if scenario == "offline" else f"{kind}@{scenario}"


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


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


def _check_inputs_kept(out: dict[str, Any], ref: ReferenceData, stage: StageResult, where: str) -> None:
    """A candidate may modify its inputs only where the reference does."""
    if out["mutated"] and not ref.mutates_inputs:
        stage.ok = False
        raise _Failed(Status.INCORRECT, f"the candidate modified its input(s) {out['mutated']} ({where})")


class Judge:
    """Evaluates candidates on one device. Thread-safe: a pool calls `evaluate` from many threads.

    Secret seeds are drawn once per judge; reference data per task is computed once (by a trusted
    worker) and kept in memory, least recently used first out.
    """

    def __init__(self, device: str = "cpu", *, cache_dir: Path, config: JudgeConfig | None = None,
                 device_index: int = 0, build_jobs: int | None = None, reference_cache_bytes: int = 8 << 30,
                 spare_workers: int = 0) -> None:
        check_device(device)
        self.device = device
        self.device_index = device_index
        self.cache_dir = Path(cache_dir)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.config = config or JudgeConfig()
        self.build_jobs = build_jobs or max(1, (os.cpu_count() or 1))
        rng = secrets.SystemRandom()
        self.seeds = [rng.randrange(1, 2**31) for _ in range(self.config.seeds)]
        self.timing_seeds = [rng.randrange(1, 2**31) for _ in range(self.config.timing.input_sets)]
        self.binary_seeds = [rng.randrange(1, 2**31) for _ in range(self.config.binary_seeds)]
        self.init_seed = rng.randrange(1, 2**31)
        self._refs: OrderedDict[str, Future[ReferenceData]] = OrderedDict()
        self._lock = threading.Lock()
        self._ref_cache_bytes = reference_cache_bytes
        self._ceilings: dict[str, Any] | None = None
        self._ceilings_lock = threading.Lock()  # its own: measuring must not stall reference lookups
        # The parent compares on the judge's GPU: on the CPU, a GB of output takes seconds per seed.
        self._compare_device = torch.device("cuda", device_index) if device == "cuda" else None
        # Spare workers start (import torch and Triton, make their CUDA context) while earlier
        # evaluations run, so a new candidate waits only for its task setup. Each is a fresh
        # process that has run nothing yet; one evaluation takes up to two (reference, candidate).
        self._spare_target = spare_workers
        self._spares: list[WorkerProcess] = []
        self._spares_lock = threading.Lock()

    # -- workers ------------------------------------------------------------------------
    def _worker(self) -> WorkerProcess:
        with self._spares_lock:
            spare = self._spares.pop(0) if self._spares else None  # the oldest: the most likely warm
            while len(self._spares) < self._spare_target:  # for the next callers
                self._spares.append(self._new_worker())
        return spare or self._new_worker()

    def _new_worker(self) -> WorkerProcess:
        return WorkerProcess(self.device, self.device_index, self.cache_dir, self.build_jobs)

    def close(self) -> None:
        """Stop the spare workers (evaluations in flight close their own)."""
        with self._spares_lock:
            spares, self._spares = self._spares, []
            self._spare_target = 0  # a closed judge starts no more spares
        for w in spares:
            w.close()

    def _setup(self, w: WorkerProcess, role: str, task: Task | None, config: JudgeConfig) -> dict[str, Any]:
        dtype = task.meta.dtype if task else "float32"
        atol, rtol = config.tolerance(dtype, task.meta.atol if task else None, task.meta.rtol if task else None)
        return w.call({
            "op": "setup", "role": role, "device": self.device, "config": config.to_dict(), "dtype": dtype,
            "atol": atol, "rtol": rtol, "init_seed": self.init_seed, "cache_dir": str(self.cache_dir),
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

    def _trusted_call(self, task: Task | None, ops: list[dict[str, Any]], timed_ops: set[str] = frozenset(),
                      on_answer: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
        """Run ops in a trusted worker; a failure is the task's fault and raises TaskRunError.
        `timed_ops` hold the device lock, the others share it; `on_answer` hears each answer as it comes."""
        cfg = self.config
        answers = []
        where = task.key if task else self.device
        try:
            with self._worker() as w:
                a = self._setup(w, "reference", task, cfg)
                if not a["ok"]:
                    raise TaskRunError(f"{where}: {a['message']}")
                env = a.get("env", {})
                for op in ops:
                    op = {**op, "out_dir": str(w.scratch)}
                    timed = op["op"] in timed_ops
                    with self._timing(w, cfg) if timed else self._device(shared=True):
                        a = w.call(op, timeout=cfg.timeouts.timing if timed else cfg.timeouts.correctness)
                    if not a["ok"]:
                        raise TaskRunError(f"{where}: {a['message']}")
                    if op["op"] == "reference":
                        # mapped, not copied: the pages outlive the file's removal with the scratch directory
                        a["loaded"] = [torch.load(w.scratch / f"ref_{i}.pt", weights_only=True, mmap=True) for i in range(len(op["seeds"]))]
                        a["loaded_binary"] = [torch.load(w.scratch / f"binref_{i}.pt", weights_only=True, mmap=True)
                                              for i in range(len(a.get("binary", [])))]
                    a.setdefault("env", env)
                    answers.append(a)
                    if on_answer:
                        on_answer(a)
        except WorkerTimeout as e:
            raise TaskRunError(f"{where}: the reference timed out ({e})") from None
        except WorkerDied as e:
            raise TaskRunError(f"{where}: the reference crashed ({e})") from None
        return answers

    # -- trusted data -------------------------------------------------------------------
    def reference(self, task: Task) -> ReferenceData:
        """The task's trusted reference data (computed once, then cached); blocks until its outputs exist."""
        return self.reference_future(task).result()

    def reference_future(self, task: Task) -> Future[ReferenceData]:
        """The task's reference data, computed in the background by a trusted worker the first time.
        The outputs resolve the future; the trusted time (`ReferenceData.trusted`) follows, so
        candidates check correctness while the reference waits for the device lock."""
        key = hashlib.sha256(json.dumps([task.key, task.source, task.sizes_for(self.device)]).encode()).hexdigest()
        with self._lock:
            known = self._refs.get(key)
            if known is not None and not (known.done() and known.exception() is not None):  # failures are retried
                self._refs.move_to_end(key)
                return known
            future: Future[ReferenceData] = Future()
            self._refs[key] = future
        threading.Thread(target=self._compute_reference, args=(task, future), daemon=True, name="kc-reference").start()
        return future

    def _compute_reference(self, task: Task, future: Future[ReferenceData]) -> None:
        trusted: Future[TimingStats] = Future()

        def on_answer(a: dict[str, Any]) -> None:
            if "samples" in a:
                trusted.set_result(TimingStats.side(a, "reference"))
            elif "loaded" in a:
                future.set_result(ReferenceData(
                    outputs=a["loaded"], meta=[o["meta"] for o in a["outputs"]], mutates_inputs=a["mutates_inputs"],
                    aliases_input=any(o["aliases_input"] for o in a["outputs"]), flops=a["flops"], bytes=a["bytes"],
                    trusted_future=trusted, env=a["env"], binary=[{k: b[k] for k in ("seed", "p", "share")} for b in a["binary"]],
                    binary_outputs=a["loaded_binary"]))
                self._evict_references()

        try:
            binary = self.binary_seeds if "binary_exact" in task.meta.checks else []
            self._trusted_call(task, [{"op": "reference", "seeds": self.seeds, "binary_seeds": binary},
                                      {"op": "prepare_timing", "seeds": self.timing_seeds},
                                     {"op": "time_reference", "seeds": self.timing_seeds,
                                      "target_ms": self.config.timing.trusted_target_ms}],
                               timed_ops={"time_reference"}, on_answer=on_answer)
        except BaseException as e:  # noqa: BLE001 - whoever waits on the data gets the error
            for f in (future, trusted):
                if not f.done():
                    f.set_exception(e)

    def _evict_references(self) -> None:
        """Least recently used reference outputs out while they hold more than the budget."""
        with self._lock:
            done = [k for k, f in self._refs.items() if f.done() and f.exception() is None]
            size = sum(self._refs[k].result().held_bytes for k in done)
            while len(done) > 1 and size > self._ref_cache_bytes:
                size -= self._refs.pop(done.pop(0)).result().held_bytes

    def baseline(self, task: Task, compiled: bool = True, tunableop: bool = False,
                 scenario: str = "offline") -> dict[str, TimingStats]:
        """Reference times by the recipe, in a trusted worker: eager ("reference"), torch.compile
        ("compiled"), and PyTorch's TunableOp ("tunableop", CUDA only), offline or server."""
        _, a = self._trusted_call(task, [{"op": "prepare_timing", "seeds": self.timing_seeds},
                                         {"op": "time_reference", "seeds": self.timing_seeds, "compiled": compiled,
                                          "tunableop": tunableop, "scenario": scenario}],
                                  timed_ops={"time_reference"})
        return {name: TimingStats.side(a, name) for name in a["samples"]}

    def ceilings(self, refresh: bool = False) -> dict[str, Any]:
        """Memory bandwidth and peak matmul rate of this device, measured once per machine (cached
        on disk). The first evaluation measures them before it starts any worker, so the pool is
        quiet: a ceiling measured under load would raise the floor and reject honest kernels.
        `refresh` measures again and keeps the best of old and new (before any floor reject)."""
        with self._ceilings_lock:
            if self._ceilings is not None and not refresh:
                return self._ceilings
            path = self.cache_dir / "ceilings.json"
            cached = json.loads(path.read_text()) if path.exists() else {}
            key = f"{self.device}|{describe_device(self.device, self.device_index).name}|{torch.__version__}"
            if key not in cached or refresh:
                (a,) = self._trusted_call(None, [{"op": "ceilings"}], timed_ops={"ceilings"})
                cached[key] = best_of(cached.get(key), a["ceilings"])
                tmp = path.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(json.dumps(cached, indent=1))
                tmp.replace(path)
            self._ceilings = cached[key]
            return self._ceilings

    def vet(self, task: Task, seeds: int = 3) -> dict[str, Any]:
        """Run the task's vetting (kernelcraft.tasks.vet) in a trusted worker."""
        (a,) = self._trusted_call(task, [{"op": "vet", "seeds": self.seeds[:seeds] or [1, 2, 3]}])
        return a

    # -- evaluation ---------------------------------------------------------------------
    def evaluate(self, task: Task, source: str, config: JudgeConfig | None = None) -> Verdict:
        """One verdict for `source` on `task`. Raises TaskRunError only if the task itself fails."""
        cfg = config or self.config
        v = Verdict(status=Status.CORRECT, task=task.key, device=self.device, candidate_hash=source_hash(source))
        t0 = time.perf_counter()
        report = check_source(source, enforce=cfg.static_checks)
        v.flags += [Flag(code, msg) for code, msg in report.flags]
        v.stages.append(StageResult("static", report.ok, time.perf_counter() - t0, report.message()))
        if not report.ok:
            v.status, v.message = Status.STATIC_REJECTED, report.message()
            return v
        self.ceilings()
        # The trusted reference (first candidate of a task only) runs while the candidate's worker
        # starts and builds: a CUDA build takes half a minute, the reference a few seconds.
        ref_future = self.reference_future(task)
        try:
            with self._worker() as w:
                audit = self._run_candidate(w, task, source, ref_future, cfg, v, report.kernel_names)
            v.stages.append(audit)
            ref = ref_future.result()
            v.trusted_reference = ref.trusted  # waits for the reference's own timing
            self._audit(task, v, audit, ref, cfg)
        except _Failed as f:
            v.status, v.message = f.status, str(f)
        except WorkerTimeout as e:
            stage = v.stages[-1].name if v.stages and not v.stages[-1].ok else "unknown"
            v.status, v.message = Status.TIMEOUT, f"{stage}: {e}; the worker's process group was killed"
        self._attach_reference(v, ref_future.result())  # a task that fails to run raises TaskRunError here
        return v

    @staticmethod
    def _attach_reference(v: Verdict, ref: ReferenceData) -> None:
        if v.trusted_reference is None and ref.trusted_future.done() and ref.trusted_future.exception() is None:
            v.trusted_reference = ref.trusted
        v.env = {**ref.env, "judge_version": JUDGE_VERSION, **v.env}

    def _step(self, w: WorkerProcess, v: Verdict, stage: str, cmd: dict[str, Any], timeout: float,
              fail_status: Status) -> dict[str, Any]:
        """One command as (part of) a stage; failures end the evaluation with a status."""
        t0 = time.perf_counter()
        result = StageResult(stage, False)
        v.stages.append(result)
        try:
            a = w.call(cmd, timeout=timeout)
        except WorkerDied as e:
            result.seconds = time.perf_counter() - t0
            tail = w.log_tail(600)
            result.message = f"{e}" + (f"; last output: {tail}" if tail else "")
            raise _Failed(fail_status, f"{stage}: {result.message}") from None
        result.seconds = time.perf_counter() - t0
        if not a["ok"]:
            result.message = a["message"]
            status = _status_of(a["status"])
            if a["status"] == "task_error":
                raise TaskRunError(f"{v.task}: {a['message']}")
            raise _Failed(status, a["message"])
        result.ok = True
        return a

    def _run_candidate(self, w: WorkerProcess, task: Task, source: str, ref_future: Future[ReferenceData],
                       cfg: JudgeConfig, v: Verdict, static_names: set[str]) -> StageResult:
        """Build, load, correctness, timing and coverage; returns the audit stage begun by coverage."""
        t0 = time.perf_counter()
        try:
            a = self._setup(w, "candidate", task, cfg)
        except WorkerDied as e:
            raise _Failed(Status.RUNTIME_ERROR, f"worker failed to start: {e}: {w.log_tail(600)}") from None
        if not a["ok"]:
            raise _Failed(Status.RUNTIME_ERROR, a["message"])
        # Waiting for the worker is isolation overhead; the task's own setup (its module, its model on
        # the device) is work a one-process harness does too. Both are recorded with load.
        spawn_s = time.perf_counter() - t0
        task_setup_s = float(a.get("task_setup_s", 0.0))

        timeouts = cfg.timeouts
        t1 = time.perf_counter()
        try:
            a = w.call({"op": "load", "candidate_source": source, "task_source": task.source}, timeout=timeouts.build + timeouts.load)
        except WorkerDied as e:
            v.stages.append(StageResult("build", False, time.perf_counter() - t1, str(e)))
            raise _Failed(Status.LOAD_FAILED, f"load: {e}: {w.log_tail(600)}") from None
        except WorkerTimeout:
            v.stages.append(StageResult("build", False, time.perf_counter() - t1, "timed out"))
            raise
        build_s = float(a.get("build_s", 0.0))
        if not a["ok"] and a["status"] == "build_failed":
            v.stages.append(StageResult("build", False, build_s, a["message"]))
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
        # correctness: the candidate's outputs against the trusted reference's, every element, every seed
        first_out = next((t for t in ref.outputs[0] if hasattr(t, "numel")), None) if ref.outputs else None
        guard_bytes = (first_out.numel() * first_out.element_size() if first_out is not None else 0) \
            if "guard_zones" in task.meta.checks else None
        with self._device(shared=True):  # the outputs are compared on the device too
            a = self._step(w, v, "correctness", {"op": "run", "seeds": self.seeds, "out_dir": str(w.scratch),
                                                 "poison_bytes": 2 * ref.output_bytes + (64 << 20),
                                                 "binary": [{"seed": b["seed"], "p": b["p"]} for b in ref.binary[:cfg.binary_seeds]],
                                                 "guard_output_bytes": guard_bytes},
                           timeouts.correctness, Status.RUNTIME_ERROR)
            stage = v.stages[-1]
            atol, rtol = cfg.tolerance(task.meta.dtype, task.meta.atol, task.meta.rtol)
            worst: dict[str, float] = {"max_abs": 0.0, "max_rel": 0.0, "rel_l2": 0.0}
            for i, out in enumerate(a["outputs"]):
                for j, m in enumerate(out["meta"]):
                    if m.get("type", "").endswith("Tensor") or "shape" in m:
                        if not m["exact_tensor"]:
                            stage.ok = False
                            raise _Failed(Status.HACK_DETECTED, f"output {j} is a {m['type']}, not a plain torch.Tensor (lazy or proxy result)")
                        if m["device"].split(":")[0] != self.device:
                            stage.ok = False
                            raise _Failed(Status.INCORRECT, f"output {j} is on {m['device']}, expected {self.device}")
                _check_inputs_kept(out, ref, stage, f"seed {i}")
                if out["aliases_input"] and not ref.aliases_input:
                    stage.ok = False
                    raise _Failed(Status.INCORRECT, "an output shares memory with an input; the reference returns new tensors")
                got = torch.load(w.scratch / f"cand_{i}.pt", weights_only=True, mmap=True)
                m = compare_outputs(got, ref.outputs[i], atol, rtol, self._compare_device)
                del got
                if not m.ok:
                    stage.ok = False
                    stage.details = m.to_dict()
                    raise _Failed(Status.INCORRECT, f"seed {i + 1}/{len(self.seeds)}: {m.describe()} (atol={atol:g}, rtol={rtol:g})")
                worst = {k: max(worst[k], getattr(m, k)) for k in worst}
            v.errors = worst
            stage.details = {"seeds": len(self.seeds), "atol": atol, "rtol": rtol, **worst,
                             "native_thread_growth": a.get("native_thread_growth", 0)}
            if a["binary"]:
                stage.details["binary_exact"] = self._check_binary(w, a["binary"], ref, stage)
        if guard_bytes is not None:
            stage.details["guard_zones"] = {"output": a["guards"]}
        if a.get("native_thread_growth", 0) > 0:
            v.flags.append(Flag("native_threads", f"{a['native_thread_growth']} native thread(s) appeared during the candidate's calls"))

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
            self._step(w, v, "timing", {"op": "prepare_timing", "seeds": self.timing_seeds}, timeouts.timing, Status.RUNTIME_ERROR)
        self._time(w, v, cfg, v.stages.pop().seconds)
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
            self._time(w, v, cfg, v.stages.pop().seconds)
            again = verdict_slowdown(v, ref.trusted).ratio
            v.stage("timing").details["retimed"] = {"speedup": first, "reference_vs_trusted": slowed}
            if suspect or abs(v.speedup - first) > 0.1 * first:
                v.flags.append(Flag("noisy_timing", f"the reference ran {slowed:.2f}x slower next to the candidate than alone "
                                                    f"({first:.2f}x); timed again: {again:.2f}x slower ({v.speedup:.2f}x)"))
        # coverage: profiled calls (a measurement, so the device is ours), after the timed ones: the
        # profiler leaves CUPTI attached to the worker, and every later launch and synchronisation
        # pays its callbacks (a 256x64x128 torch.matmul timed at 76 us instead of 29 on an H100,
        # benchmarks/timing_contention.py), which squeezes every short call's speedup towards 1.
        # Zero launches of the candidate's own kernels is a reject.
        with self._device():
            a = self._step(w, v, "audit", {"op": "profile", "seed": self.seeds[0], "kernel_names": sorted(static_names)},
                           timeouts.profile, Status.RUNTIME_ERROR)
        audit = v.stages.pop()
        audit.details["coverage"] = {k: a.get(k) for k in ("coverage", "custom_launches", "calls", "custom_kernels", "top_other")}
        v.coverage = float(a.get("coverage", 0.0))
        reject = None
        if a["custom_launches"] == 0:
            reject = "no custom kernel ran during forward: the work was done by PyTorch (decoy kernel or fallback)"
        elif v.coverage <= cfg.coverage_reject_below:
            reject = f"coverage {v.coverage:.0%}: the candidate's kernels did none of the device work"
            if a.get("top_other"):  # say where it went: a library's kernel launched from the candidate's own code
                reject += (f" (it went to {a['top_other'][0][0]}; a kernel is the candidate's when its source defines it "
                           "under its own name, outside a library's namespace, and its own code, not a PyTorch operator, "
                           "launches it)")
        if reject:
            audit.ok, audit.message = False, reject
            v.stages.append(audit)
            raise _Failed(Status.HACK_DETECTED, reject)
        if v.coverage < cfg.coverage_flag_below:
            v.flags.append(Flag("low_coverage", f"only {v.coverage:.0%} of the time is spent in the candidate's own kernels"))
        return audit

    def _time(self, w: WorkerProcess, v: Verdict, cfg: JudgeConfig, earlier_s: float) -> None:
        """One ABAB measurement of candidate and reference (offline, then the server scenario if
        asked) under the exclusive device lock; sets the verdict's times, speedup and noise band and
        appends the timing stage, which also counts `earlier_s` (input preparation, an earlier try)."""
        timeouts = cfg.timeouts
        cmd = {"op": "time", "seeds": self.timing_seeds}
        waited = time.perf_counter()
        with self._timing(w, cfg):
            waited = time.perf_counter() - waited
            a, ref_t, cand_t = self._measure(w, v, cmd, timeouts.timing)
            v.stages[-1].seconds += earlier_s
            # A measurement whose reference scattered widely (a busy host) is taken again, a few
            # times at most, and the quietest kept: its band would hide any speedup.
            spreads = [ref_t.rel_spread]
            while spreads[-1] > cfg.timing.retime_spread_above and len(spreads) <= cfg.timing.noisy_retimes:
                b, b_ref, b_cand = self._measure(w, v, cmd, timeouts.timing)
                v.stages.pop()
                spreads.append(b_ref.rel_spread)
                if b_ref.rel_spread < ref_t.rel_spread:
                    a, ref_t, cand_t = b, b_ref, b_cand
            if len(spreads) > 1:
                v.flags.append(Flag("noisy_timing", "the reference scattered widely; timed again: half-IQR "
                                                    + ", ".join(f"{s:.0%}" for s in spreads) + ", the quietest kept"))
            if cfg.timing.server:
                c = self._step(w, v, "timing", {**cmd, "scenario": "server"}, timeouts.timing, Status.RUNTIME_ERROR)
                v.stages.pop()
                sref, scand = TimingStats.side(c, "reference"), TimingStats.side(c, "candidate")
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

    def _measure(self, w: WorkerProcess, v: Verdict, cmd: dict[str, Any],
                 timeout: float) -> tuple[dict[str, Any], TimingStats, TimingStats]:
        """One timing command in the worker (it appends a timing stage): the worker's answer and
        the reference's and the candidate's statistics."""
        a = self._step(w, v, "timing", cmd, timeout, Status.RUNTIME_ERROR)
        return a, TimingStats.side(a, "reference"), TimingStats.side(a, "candidate")

    def _check_binary(self, w: WorkerProcess, outputs: list[dict[str, Any]], ref: ReferenceData,
                      stage: StageResult) -> list[dict[str, Any]]:
        """The binary_exact check: on inputs of 0s and 1s every checkable element must equal the
        float64 reference exactly (a dropped term, a wrong index or a lower-precision product shows
        as an integer off, where random inputs hide it inside the tolerance)."""
        checked = []
        for i, (out, info) in enumerate(zip(outputs, ref.binary)):
            _check_inputs_kept(out, ref, stage, f"0/1 inputs {i}")
            got = torch.load(w.scratch / f"bin_{i}.pt", weights_only=True, mmap=True)
            m = compare_outputs(got, ref.binary_outputs[i], 0.0, 0.0, self._compare_device, nan_skips=True)
            del got
            if not m.ok:
                stage.ok = False
                stage.details = {"binary_exact": m.to_dict()}
                raise _Failed(Status.INCORRECT, f"inputs of 0s and 1s (ones with probability {info['p']:.3g}), compared exactly: "
                                                f"{m.describe()}")
            checked.append({"p": info["p"], "checked": m.total, "share": info["share"]})
        return checked

    def _audit(self, task: Task, v: Verdict, stage: StageResult, ref: ReferenceData, cfg: JudgeConfig) -> None:
        """Physical floor, slowed reference, clocks: the last word on a correct candidate."""
        t0 = time.perf_counter()
        cand_ms = v.candidate.median_ms
        ceilings = self.ceilings()
        if cand_ms < cfg.floor_margin * ref.bytes / ceilings["bandwidth_bytes_per_s"] * 1e3:
            ceilings = self.ceilings(refresh=True)  # a reject must not rest on one low measurement
        bytes_floor_ms = ref.bytes / ceilings["bandwidth_bytes_per_s"] * 1e3
        flop_floor_ms = ref.flops / ceilings["max_flops"] * 1e3
        # The reference timed alone now, once the candidate's processes are gone: taken only when a
        # verdict rests on it, and then shared by both checks below.
        alone_now = None
        if v.speedup > cfg.timing.remeasure_above:
            # A large win is checked against a fresh trusted time too: a trusted time inflated by
            # a busy machine would otherwise hide a slowed reference.
            alone_now = self.baseline(task, compiled=False)["reference"]
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
                alone_now = self.baseline(task, compiled=False)["reference"]
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
            band = f" (noise band {v.speedup_band[0]:.2f}-{v.speedup_band[1]:.2f})" if v.speedup_band else ""
            v.message = f"correct; {v.speedup:.2f}x{band}" + ("" if v.significant else ", within noise: no speedup")

    @staticmethod
    def _reject(v: Verdict, stage: StageResult, message: str) -> None:
        stage.ok = False
        stage.message = message
        v.status, v.message = Status.HACK_DETECTED, message
