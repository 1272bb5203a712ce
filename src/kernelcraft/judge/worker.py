"""The judge's worker: runs inside a fresh, sandboxed process, one per candidate (or per trusted
reference). Reads one JSON command per line on stdin, answers one JSON line on a private pipe.

Imports only the standard library, torch, numpy and triton (the last two only when a candidate
does), so it runs on a bare GPU machine. Roles:
- reference (trusted): reference outputs for the secret seeds, FLOPs and bytes, timing alone,
  eager vs torch.compile baselines, device ceilings.
- candidate: load the candidate (the judge builds its extensions, at its request: builds.py), run
  it on the secret seeds (its outputs shared with the trusted worker, which compares them), ABAB
  timing against the reference with spot checks that the judge draws and the trusted worker compares
  (rounds.py), then the profiled calls (last: the profiler leaves CUPTI attached to the process,
  which slows every later call). Every call of the candidate's runs pinned as the timed rounds are
  (timing.pinned).
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import resource
import sys
import time
import traceback
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Iterator

import torch

from ..tasks import runtime
from .buildcache import BuildError, BuildRecorder
from .compare import compare_outputs, flatten_outputs
from .config import JudgeConfig
from .exchange import ExchangeError, SharedTensor, export_outputs, import_outputs, receive_fd
from .expected import Expected, describe_output, plain, same_bits, storages
from .coverage import library_kernels, profile_call
from .guard_zones import guard_inputs, guarded_output
from .guards import Guard, ThreadWatch, native_threads, pin_precision, pytorch_defaults
from .launches import LaunchCounter
from .timing import clock_info, clone_inputs, fresh_inputs, host_medians, local_rounds, pinned, run_interleaved, scenario_clock

TASK_FILE = "task.py"
CANDIDATE_FILE = "candidate.py"
# Errors of the machine, not of the code that met them: the judge's fault wherever the judge's own work hits them.
_MACHINE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.ENOMEM, errno.EIO, errno.EROFS}


class Rejection(Exception):
    """Ends a command with a verdict status (hack_detected, incorrect, load_failed, judge_error...)."""

    def __init__(self, status: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.status = status
        self.details = details


def user_traceback(exc: BaseException, filenames: tuple[str, ...]) -> str:
    """The exception with the innermost frame that lies in the task's or candidate's own file."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename in filenames]
    where = f"{frames[-1].filename}:{frames[-1].lineno}: " if frames else ""
    text = f"{type(exc).__name__}: {exc}".strip()
    if len(text) > 1500:
        text = text[:1500] + " ..."
    return where + text


_DEVICE_OOM = ("CUDA out of memory", "CUDA error: out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "CUDNN_STATUS_ALLOC_FAILED",
               "CUDNN_STATUS_NOT_ENOUGH_WORKSPACE")


def device_oom(e: BaseException) -> bool:
    """The device ran out of memory (the allocator's error, or a library's or a launch's that says so)."""
    return isinstance(e, torch.OutOfMemoryError) or isinstance(e, RuntimeError) and any(m in str(e) for m in _DEVICE_OOM)


def judge_write(path: str, text: str) -> None:
    """A file the judge itself writes: a machine that cannot take it (a full disk) is the judge's fault."""
    try:
        Path(path).write_text(text)
    except OSError as e:
        raise Rejection("judge_error", f"the judge could not write {path}: {e.strerror or e}") from None


def apply_limits(cfg: JudgeConfig, device: str) -> None:
    gb = 1 << 30
    limits = [(resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, int(cfg.file_size_limit_gb * gb))]
    if device == "cpu":  # CUDA reserves a huge virtual address space; only cpu workers get a cap
        limits.append((resource.RLIMIT_AS, int(cfg.memory_limit_gb * gb)))
    if hasattr(resource, "RLIMIT_NPROC") and os.getuid() != 0:
        limits.append((resource.RLIMIT_NPROC, 4096))
    for which, value in limits:
        soft, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, hard))


_PLAIN_VALUES = (int, float, bool, str, type(None))


def plain_outputs(outputs: list[Any], when: str) -> None:
    """Every output a plain torch.Tensor or a plain value: a subclass or proxy runs the candidate's
    code when the judge touches it, as a spot check would, after the clock has stopped."""
    for j, o in enumerate(outputs):
        if type(o) is not torch.Tensor and type(o) not in _PLAIN_VALUES:
            raise Rejection("hack_detected", f"{when}: output {j} is a {type(o).__module__}.{type(o).__qualname__}, "
                                             "not a plain torch.Tensor (lazy or proxy result)")


def _poison(outputs: list[Any]) -> None:
    for o in outputs:
        if isinstance(o, torch.Tensor) and o.numel():
            o.detach().fill_(float("nan") if o.is_floating_point() else -1)


class Worker:
    def __init__(self, channel: Channel | None = None, fd_socket: Any = None, memfd: int | None = None) -> None:
        self.channel = channel  # None only where a test drives a Worker in its own process
        self.fd_socket = fd_socket  # the parent passes other workers' memory files here (comparisons on the CPU)
        self.memfd = memfd  # this worker's memory file, for its outputs on the CPU
        self.held: Any = None  # one seed's outputs, shared until op_release
        self.expected: Expected | None = None
        self.native0: int | None = None
        self.cfg = JudgeConfig()
        self.timing_sets: tuple[tuple[int, ...], list[list[Any]]] | None = None
        self.compiled: Any = None  # the reference under torch.compile (op_prepare_baselines)

    # -- setup ---------------------------------------------------------------------------
    def op_setup(self, cmd: dict[str, Any]) -> dict[str, Any]:
        if self.channel is not None:
            self.channel.nonce = cmd["nonce"]
        self.role = cmd["role"]
        self.cfg = JudgeConfig.from_dict(cmd["config"])
        self.device_kind = cmd["device"]
        apply_limits(self.cfg, self.device_kind)
        if self.device_kind == "cuda":
            if not torch.cuda.is_available():
                raise Rejection("judge_error", "no CUDA device is visible to the worker (a lost device?)")
            self.device = torch.device("cuda", 0)
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cpu")
            torch.set_num_threads(self.cfg.cpu_threads)
            # The reference's thread count for the candidate's own OpenMP runtime too (an extension built
            # with -fopenmp may link a libgomp other than torch's): it reads this when the extension loads.
            os.environ["OMP_NUM_THREADS"] = str(self.cfg.cpu_threads)
        pin_precision(self.cfg.allow_tf32)
        self.dtype = runtime.torch_dtype(cmd["dtype"])
        self.atol, self.rtol = cmd["atol"], cmd["rtol"]
        self.init_seed = cmd["init_seed"]
        self.cache_root = Path(cmd["cache_dir"])
        self.judge_uid = int(cmd["judge_uid"])  # the shared caches' files are the judge's user's (integrity.py)
        self.capability = str(cmd["capability"])
        if cmd.get("task_source") is None:
            return {"ok": True}
        judge_write(TASK_FILE, cmd["task_source"])
        t0 = time.perf_counter()
        try:
            self.task = runtime.exec_module(cmd["task_source"], TASK_FILE, "kernelcraft_task", cmd.get("sizes") or {})
            self.init_inputs = runtime.make_init_inputs(self.task)
            self.reference = runtime.build_model(self.task.Model, self.init_inputs, self.init_seed, self.device, self.dtype)
        except Exception as e:  # noqa: BLE001 - any failure of task code is reported, not raised
            raise Rejection("task_error", user_traceback(e, (TASK_FILE,))) from None
        task_setup_s = time.perf_counter() - t0
        self.counter = LaunchCounter()
        self.threads = ThreadWatch(self.cfg.cpu_threads if self.device.type == "cpu" else None)
        return {"ok": True, "env": self.env(), "task_setup_s": task_setup_s}

    def env(self) -> dict[str, Any]:
        env = {"torch": torch.__version__, "python": sys.version.split()[0], "device_kind": self.device_kind}
        if self.device_kind == "cuda":
            p = torch.cuda.get_device_properties(0)
            env.update(device_name=p.name, capability=f"{p.major}.{p.minor}", sm_count=p.multi_processor_count,
                       memory_gb=round(p.total_memory / 2**30, 1), cuda=torch.version.cuda)
        else:
            import platform
            env.update(device_name=platform.processor() or platform.machine(), threads=torch.get_num_threads())
        try:
            import triton
            env["triton"] = triton.__version__
        except ImportError:
            pass
        return env

    def inputs(self, seed: int) -> list[Any]:
        return runtime.make_inputs(self.task, seed, self.device, self.dtype)

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    # -- reference (trusted) -------------------------------------------------------------
    def op_survey(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """What the secret seeds' outputs should be, held here (or recomputed per comparison) for
        `op_compare`; how they look, how long the reference takes, whether a float64 truth applies;
        the reference's FLOPs and bytes."""
        self.expected = Expected(self.reference, lambda seed, p: runtime.make_inputs(self.task, seed, self.device, self.dtype, p),
                                 self.device, self.dtype, cache_bytes=int(cmd["cache_bytes"]),
                                 truth_max_bytes=int(self.cfg.truth_max_gb * (1 << 30)) if self.cfg.truth else -1,
                                 truth_max_seconds=self.cfg.truth_max_seconds)
        facts = self.expected.survey(cmd["seeds"], cmd.get("binary_seeds") or [])
        xs = self.inputs(cmd["seeds"][0])
        from torch.utils.flop_counter import FlopCounterMode
        with torch.no_grad(), FlopCounterMode(display=False) as fc:
            out = flatten_outputs(self.reference(*xs))
        tensors = [t for t in xs + out if isinstance(t, torch.Tensor)]
        state = list(self.reference.state_dict().values())
        nbytes = sum(t.numel() * t.element_size() for t in tensors + state)
        del xs, out, tensors
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        return {"ok": True, "facts": dataclasses.asdict(facts), "flops": int(fc.get_total_flops()), "bytes": int(nbytes),
                "param_bytes": sum(t.numel() * t.element_size() for t in state), "env": self.env()}

    def op_probe(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """One forward on the first seed's inputs: the bytes of inputs and outputs and the device memory
        it took at most, so the parent can budget the survey and the timing before they run."""
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        xs = self.inputs(cmd["seed"])
        with torch.no_grad():
            out = flatten_outputs(self.reference(*xs))
        self.sync()
        nbytes = [sum(t.numel() * t.element_size() for t in ts if isinstance(t, torch.Tensor)) for ts in (xs, out)]
        peak = torch.cuda.max_memory_allocated() - base if self.device.type == "cuda" else sum(nbytes)
        del xs, out
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        return {"ok": True, "input_bytes": nbytes[0], "output_bytes": nbytes[1], "peak_bytes": int(peak)}

    def op_compare(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """A candidate's outputs for one seed, shared by its worker, against what they should be."""
        with self.shared_outputs(cmd) as got:
            found = self.expected.compare(cmd["kind"], cmd["index"], got, cmd["atol"], cmd["rtol"], cmd["k"])
        return {"ok": True, "mismatches": [m.to_dict() for m in found]}

    def op_spot_check(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """A candidate's timed call (shared as in `op_compare`) against the reference on that round's
        inputs, made here from the input set's seed and the round's roll, never taken from the
        candidate's process; the float64 truth decides where the plain comparison fails, with `truth`."""
        def inputs() -> list[Any]:
            return fresh_inputs(self.inputs(cmd["seed"]), cmd["roll"], cmd["fresh"])

        with self.shared_outputs(cmd) as got:
            found = self.expected.check_round(got, inputs, cmd["atol"], cmd["rtol"], cmd["k"], cmd["truth"])
        return {"ok": True, "mismatches": [m.to_dict() for m in found]}

    @contextmanager
    def shared_outputs(self, cmd: dict[str, Any]) -> Iterator[list[Any]]:
        """A candidate's outputs as its worker shared them (CUDA IPC handles, or a memory file the parent
        passes over the socket), all threads of the host for the comparison on the CPU (nothing is timed
        meanwhile, and the candidate's worker waits). The candidate's memory is read, never trusted: a
        description that is not one, a layout past what it shared, or a file cut short while read, is
        its doing."""
        memfd = receive_fd(self.fd_socket, 30.0) if cmd.get("memfd") else None
        threads = torch.get_num_threads()
        if self.device.type == "cpu":
            torch.set_num_threads(os.cpu_count() or 1)
        try:
            try:
                descs = [SharedTensor.from_dict(d) if d is not None else None for d in cmd["tensors"]]
                tensors = import_outputs(descs, memfd)
            except (ExchangeError, TypeError, ValueError) as e:
                raise Rejection("hack_detected", f"the candidate's outputs could not be read as shared: {e}") from None
            got = [t if t is not None else v for t, v in zip(tensors, cmd["values"])]
            del tensors
            try:
                yield got
            except ExchangeError as e:
                raise Rejection("hack_detected", f"the candidate's outputs could not be read as shared: {e}") from None
        finally:
            torch.set_num_threads(threads)
            if memfd is not None:
                os.close(memfd)

    def op_prepare_timing(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """Make the timing inputs before the parent takes the device lock: generating large inputs
        takes longer than timing them, and nothing else needs the device meanwhile."""
        self.timing_sets = (tuple(cmd["seeds"]), [self.inputs(s) for s in cmd["seeds"]])
        return {"ok": True}

    def timing_inputs(self, seeds: list[int]) -> list[list[Any]]:
        if self.timing_sets and self.timing_sets[0] == tuple(seeds):
            return self.timing_sets[1]
        return [self.inputs(s) for s in seeds]

    def op_time_reference(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """The reference timed alone, by the recipe (trusted time; also the eager baseline), with
        torch.compile interleaved if asked. With `tunableop`, PyTorch's TunableOp (cuBLAS/cuBLASLt
        algorithms tried per shape, the fastest kept) is then enabled and the reference timed again:
        the autotuned-library baseline. `scenario` "server" pauses before every call (untimed)."""
        timing = dataclasses.replace(self.cfg.timing, target_ms=cmd.get("target_ms") or self.cfg.timing.target_ms)
        cfg, clock = scenario_clock(self.device, timing, cmd.get("scenario"))
        sets = self.timing_inputs(cmd["seeds"])

        host: dict[str, list[float]] = {}
        probe: list[float] = []
        cpus: list[int] = []

        def run(sides: list[tuple[str, Any]]) -> dict[str, list[float]]:
            with torch.no_grad():
                return run_interleaved(sides, sets, clock, cfg, local_rounds(len(sets)),
                                       lambda name, i, out: _poison(flatten_outputs(out)), host, probe, cpus)

        before = clock_info()
        samples = run([("reference", self.reference)])
        if cmd.get("defaults"):
            # What users run: eager and torch.compile at PyTorch's default precision, ABAB with each other.
            with pytorch_defaults():
                sides = [("reference_default", self.reference)]
                if self.compiled is not None:
                    sides.append(("compiled", self.compiled))
                samples.update(run(sides))
        if cmd.get("tunableop"):
            if self.device.type != "cuda":
                raise Rejection("task_error", "TunableOp needs a CUDA device")
            tunable = torch.cuda.tunable
            tunable.set_filename(str(Path(cmd["out_dir"]) / "tunableop_results.csv"))
            tunable.enable(True)
            tunable.tuning_enable(True)
            try:
                samples.update(run([("tunableop", self.reference)]))  # the warm-up calls tune
            finally:
                tunable.enable(False)
        if cmd.get("release_inputs"):  # a task's kept trusted worker: its timing inputs go back for the others
            self.timing_sets = sets = None  # (`run` holds them through `sets` too)
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
        return {"ok": True, "samples": samples, "clocks": {"before": before, "after": clock_info()},
                **host_medians(host, probe, cpus)}

    def op_prepare_baselines(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """torch.compile the reference at PyTorch's defaults and call it once, before the parent takes the
        device lock: compiling takes seconds to minutes, and nothing else needs the device meanwhile."""
        self.compiled = None
        if cmd.get("compiled"):
            sets = self.timing_inputs(cmd["seeds"])
            t0 = time.perf_counter()
            with pytorch_defaults(), torch.no_grad():
                self.compiled = torch.compile(self.reference)
                self.compiled(*clone_inputs(sets[0]))
            self.sync()
            return {"ok": True, "compile_s": time.perf_counter() - t0}
        return {"ok": True}

    def op_vet(self, cmd: dict[str, Any]) -> dict[str, Any]:
        from ..tasks.vet import vet_reference
        report = vet_reference(self.reference, self.inputs, cmd["seeds"], self.atol, self.rtol)
        return {"ok": True, **report.to_dict(), "env": self.env()}

    def op_ceilings(self, cmd: dict[str, Any]) -> dict[str, Any]:
        from .ceilings import measure_ceilings
        if self.device.type == "cpu":
            torch.set_num_threads(os.cpu_count() or 1)
        return {"ok": True, "ceilings": measure_ceilings(self.device), "env": self.env()}

    # -- candidate -----------------------------------------------------------------------
    def op_load(self, cmd: dict[str, Any]) -> dict[str, Any]:
        judge_write(CANDIDATE_FILE, cmd["candidate_source"])
        # Extensions are built while the candidate loads, by the judge, at the candidate's request.
        ask = (lambda arguments: self.channel.ask("build", arguments=arguments)) if self.channel is not None else None
        recorder = BuildRecorder(self.cache_root, self.judge_uid, self.capability, self.counter.instrument_extension, ask)
        recorder.install()
        try:
            return self._load(cmd, recorder)
        finally:
            recorder.ask = None

    def _load(self, cmd: dict[str, Any], recorder: BuildRecorder) -> dict[str, Any]:
        source = cmd["candidate_source"]
        has_triton = "triton" in source
        if has_triton:
            self.counter.instrument_triton()
        import torch._dynamo  # noqa: F401 - it rebinds torch.manual_seed on import; import it before the snapshot
        self.guard = Guard(extra_classes=sorted({type(m) for m in self.reference.modules()}, key=repr))
        t0 = time.perf_counter()
        try:
            module = runtime.exec_module(source, CANDIDATE_FILE, "kernelcraft_candidate")
        except BuildError as e:
            raise Rejection("judge_error" if e.machine_fault else "build_failed", str(e), build_s=recorder.seconds) from None
        except Exception as e:  # noqa: BLE001
            raise Rejection("load_failed", user_traceback(e, (CANDIDATE_FILE,)), build_s=recorder.seconds) from None
        import_s = time.perf_counter() - t0
        self.candidate_module = module
        self.task_source = cmd["task_source"]
        self.check_guard("importing the candidate")
        if not isinstance(getattr(module, "ModelNew", None), type):
            raise Rejection("load_failed", "the candidate defines no class ModelNew")
        t1 = time.perf_counter()
        try:
            self.model = runtime.build_model(module.ModelNew, self.init_inputs, self.init_seed, self.device, self.dtype)
            copied = runtime.copy_matching_weights(self.reference, self.model)
        except BuildError as e:
            raise Rejection("judge_error" if e.machine_fault else "build_failed", str(e), build_s=recorder.seconds) from None
        except Exception as e:  # noqa: BLE001
            raise Rejection("load_failed", "constructing ModelNew: " + user_traceback(e, (CANDIDATE_FILE,))) from None
        self.check_guard("constructing ModelNew")
        return {"ok": True, "build_s": recorder.seconds, "load_s": import_s - recorder.seconds + time.perf_counter() - t1,
                "build_keys": recorder.keys, "weights_copied": copied, "kernel_names": sorted(self.counter.kernel_names)}

    def check_guard(self, when: str) -> None:
        changed = self.guard.changed()
        if changed:
            raise Rejection("hack_detected", f"{when} modified the judge's or PyTorch's functions: {', '.join(changed[:5])}")

    def check_threads(self, when: str, native: bool = True) -> None:
        new = self.threads.new_python_threads()
        if new:
            raise Rejection("hack_detected", f"{when} left {len(new)} thread(s) running ({', '.join(new[:3])}): work must finish inside forward")
        self.reject_breaches(when, self.threads.native_breaches() if native else [])

    def reject_breaches(self, when: str, breaches: list[str]) -> None:
        """hack_detected naming every rule of the thread count (ThreadWatch) that `when` broke."""
        if breaches:
            raise Rejection("hack_detected", f"{when}: {'; '.join(breaches)}")

    def pinned(self) -> AbstractContextManager[Any]:
        """The CPUs a call of the candidate's runs on: picked as for the timed rounds, whatever the call."""
        return pinned(self.cfg.timing, self.device.type == "cuda")

    def call_candidate(self, xs: list[Any], when: str) -> list[Any]:
        with self.pinned():
            self.threads.arm()
            try:
                with torch.no_grad():
                    out = self.model(*xs)
                self.sync()
            except Exception as e:  # noqa: BLE001
                raise Rejection("runtime_error", f"{when}: " + user_traceback(e, (CANDIDATE_FILE,)), oom=device_oom(e)) from None
            self.reject_breaches(when, self.threads.cpu_breaches())  # first: the thread checks may wait, adding wall time
            self.check_threads(when)
        self.check_guard(when)
        return flatten_outputs(out)

    def warm_torch(self) -> None:
        """Start PyTorch's own thread pools and allocator before counting threads."""
        a = torch.randn(64, 64, device=self.device)
        (a @ a).relu_().sum().item()

    def poison_allocator(self, nbytes: int) -> None:
        """Fill soon-to-be-reused allocator memory with NaN so reads of unwritten memory show (#6, #16)."""
        if self.device.type == "cuda" and nbytes > 0:
            block = torch.empty(nbytes // 4 + 1024, dtype=torch.float32, device=self.device)
            block.fill_(float("nan"))
            del block

    def op_run_seed(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """The candidate on one secret seed (or, with `binary_p`, one set of 0/1 inputs). Its outputs
        are shared with the trusted worker that compares them (exchange.py) and held here until
        `op_release`; with `guard_output_bytes` (a task's guard_zones check) the call runs inside
        guard zones."""
        self.release()
        if self.native0 is None:
            self.warm_torch()
            self.native0 = native_threads()
        guard_bytes = cmd.get("guard_output_bytes")
        when = cmd["when"]
        xs = runtime.make_inputs(self.task, cmd["seed"], self.device, self.dtype, cmd.get("binary_p"))
        before = [x.clone() if isinstance(x, torch.Tensor) else x for x in xs]
        self.poison_allocator(cmd.get("poison_bytes", 0))
        guard = None
        if guard_bytes is None:
            out = self.call_candidate(xs, when)
        else:
            zones = guard_inputs(xs)
            xs = zones.inputs
            with guarded_output(guard_bytes, self.device) as out_guard:
                out = self.call_candidate(xs, when)
            out_guard.check(out)
            guard = out_guard.describe()
            hit = zones.breached()
            if hit or out_guard.breached_bytes:
                where = (f"{out_guard.breached_bytes} guard byte(s) after the output's memory"
                         if out_guard.breached_bytes else f"the guard zone around input(s) {hit}")
                raise Rejection("incorrect", f"{when}: the candidate wrote outside its result ({where} changed): "
                                             "an out-of-bounds store, e.g. an unmasked last tile")
        mutated = [j for j, (a, b) in enumerate(zip(xs, before)) if isinstance(a, torch.Tensor) and not same_bits(a, b)]
        aliases = bool(storages(out) & storages(xs))
        del xs, before
        for j, o in enumerate(out):  # before anything of the judge's touches it: a proxy may misbehave
            if isinstance(o, torch.Tensor) and type(o) is not torch.Tensor:
                raise Rejection("hack_detected", f"output {j} is a {type(o).__module__}.{type(o).__qualname__}, "
                                                 "not a plain torch.Tensor (lazy or proxy result)")
        try:
            shared = export_outputs(out, self.memfd)
        except (ExchangeError, RuntimeError) as e:
            raise Rejection("judge_error", f"the judge could not share the outputs for comparison: {e}") from None
        self.held = (out, shared)
        return {"ok": True, "meta": [describe_output(o) for o in out], "tensors": [d.to_dict() if d else None for d in shared.tensors],
                "values": [None if isinstance(o, torch.Tensor) else plain(o) for o in out], "mutated": mutated,
                "aliases_input": aliases, "guard": guard, "native_thread_growth": native_threads() - self.native0}

    def op_release(self, cmd: dict[str, Any]) -> dict[str, Any]:
        self.release()
        return {"ok": True}

    def release(self) -> None:
        """Drop the outputs held for the trusted side (it has read them), and their shared memory."""
        if self.held is None:
            return
        self.held = None
        if self.device.type == "cuda":
            torch.cuda.ipc_collect()
        if self.memfd is not None:
            os.ftruncate(self.memfd, 0)

    def op_second_shape(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """The candidate at another size of the task, against the reference in this process:
        a kernel specialised to the one shape it was shown shows here (a flag, not a reject)."""
        try:
            alt = runtime.exec_module(self.task_source, TASK_FILE, "kernelcraft_task_check", cmd["sizes"])
            init = runtime.make_init_inputs(alt)
            ref = runtime.build_model(alt.Model, init, self.init_seed, self.device, self.dtype)
            new = runtime.build_model(self.candidate_module.ModelNew, init, self.init_seed, self.device, self.dtype)
            runtime.copy_matching_weights(ref, new)
            xs = runtime.make_inputs(alt, cmd["seed"], self.device, self.dtype)
        except Exception as e:  # noqa: BLE001 - a task that cannot take its own check size is reported
            return {"ok": True, "match": None, "message": "the check size could not be built: " + user_traceback(e, (TASK_FILE, CANDIDATE_FILE))}
        with self.pinned():
            self.threads.arm()
            try:
                with torch.no_grad():
                    got = flatten_outputs(new(*[x.clone() if isinstance(x, torch.Tensor) else x for x in xs]))
                    self.sync()
            except Exception as e:  # noqa: BLE001
                return {"ok": True, "match": False, "message": "fails at another size: " + user_traceback(e, (CANDIDATE_FILE,))}
            self.check_threads("the second-shape call")
        self.check_guard("the second-shape call")
        with torch.no_grad():
            expected = flatten_outputs(ref(*xs))
        m = compare_outputs(got, expected, self.atol, self.rtol)
        return {"ok": True, "match": m.ok, "message": "" if m.ok else m.describe()}

    def op_profile(self, cmd: dict[str, Any]) -> dict[str, Any]:
        xs = self.inputs(cmd["seed"])
        self.counter.kernel_names.update(cmd.get("kernel_names", []))  # __global__ names from the source
        with self.pinned():
            self.threads.arm()
            with torch.no_grad():
                # The kernels the reference runs on these inputs: inside a graph the candidate replays, a
                # kernel of one of their names is a captured PyTorch operator's, whatever the candidate named.
                library = library_kernels(self.reference, xs) if self.device.type == "cuda" else frozenset()
                # Three profiled calls, the median by coverage: on a busy CPU one call can be preempted
                # outside the candidate's kernels and read as low coverage.
                runs = sorted((profile_call(self.model, xs, self.counter, self.device, library) for _ in range(3)),
                              key=lambda r: r["coverage"])
            self.check_threads("the profiled call", native=False)  # the profiler starts a thread of its own
        result = runs[1]
        self.check_guard("the profiled call")
        peak = torch.cuda.max_memory_reserved() if self.device.type == "cuda" else 0
        return {"ok": True, **result, "device_peak_bytes": peak}

    def op_time(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """ABAB timing of candidate and reference over fresh inputs; offline (calls back to back) or,
        with scenario "server", a random untimed pause before every call. The judge draws each timed
        round's input set and roll as it starts, and whether to check the candidate's call once it has
        returned; a checked call's outputs go to the task's trusted worker (rounds.py). Nothing here
        decides a check or compares."""
        t0 = time.perf_counter()
        cfg, clock = scenario_clock(self.device, self.cfg.timing, cmd.get("scenario"))
        sets = self.timing_inputs(cmd["seeds"])

        def rounds(i: int, iters: int) -> tuple[int, int]:
            a = self.channel.ask("round", i=i, iters=iters)
            return int(a["set"]), int(a["roll"])

        def after_call(name: str, i: int, out: Any) -> None:
            outs = flatten_outputs(out)
            if name == "reference":
                _poison(outs)  # the reference's answer never lingers in freed memory
                return
            self.check_threads(f"timed call {i}")
            plain_outputs(outs, f"timed call {i}")  # a lazy result would compute only when checked
            if i > 0 and self.channel.ask("timed", i=i)["check"]:
                self.share_checked(i, outs)

        before = clock_info()
        t1 = time.perf_counter()
        self.threads.arm()
        host: dict[str, list[float]] = {}
        probe: list[float] = []
        cpus: list[int] = []
        with torch.no_grad():
            try:
                samples = run_interleaved([("candidate", self.model), ("reference", self.reference)], sets, clock, cfg,
                                          rounds, after_call, host, probe, cpus, pin_warmup=True)
            except Rejection:
                raise
            except Exception as e:  # noqa: BLE001
                raise Rejection("runtime_error", "during timing: " + user_traceback(e, (CANDIDATE_FILE,)), oom=device_oom(e)) from None
        self.check_guard("the timed calls")
        t2 = time.perf_counter()
        return {"ok": True, "samples": samples, "clocks": {"before": before, "after": clock_info()},
                **host_medians(host, probe, cpus),
                "phases_s": {"prepare": t1 - t0, "rounds": t2 - t1, "clocks": time.perf_counter() - t2}}

    def share_checked(self, i: int, outs: list[Any]) -> None:
        """Timed call i's outputs, shared (exchange.py) until the judge's trusted worker has compared
        them; the judge answers only "go on"."""
        try:
            shared = export_outputs(outs, self.memfd)
        except (ExchangeError, RuntimeError) as e:
            raise Rejection("judge_error", f"the judge could not share timed call {i}'s outputs for its check: {e}") from None
        self.held = (outs, shared)
        try:
            self.channel.ask("spot_check", i=i, tensors=[d.to_dict() if d else None for d in shared.tensors],
                             values=[None if isinstance(o, torch.Tensor) else plain(o) for o in outs])
        finally:
            self.release()

    def op_exit(self, cmd: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True}


def warm_up() -> None:
    """Start the CUDA context and import Triton before the first command: a spare worker does this
    while it waits, so a candidate handed that worker waits only for its own task setup. It takes no
    device lock (no worker may reach the lock files): the judge stops its spare workers while it
    times one (`hold_still`)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES") and torch.cuda.is_available():
        torch.cuda.set_device(0)
        torch.empty(1, device="cuda")
    try:
        import triton  # noqa: F401
    except ImportError:
        pass


def failure(worker: Worker, e: BaseException) -> dict[str, Any]:
    """The answer for a command that raised. A trusted worker's own failure for lack of memory or
    disk is the judge's (never the task's or a candidate's); a candidate out of device memory is
    marked, since a device shared with other evaluations may be why."""
    if isinstance(e, Rejection):
        return {"ok": False, "status": e.status, "message": str(e), **e.details}
    message = user_traceback(e, (TASK_FILE, CANDIDATE_FILE))
    oom = device_oom(e)
    machine = oom or isinstance(e, MemoryError) or isinstance(e, OSError) and e.errno in _MACHINE_ERRNOS
    if getattr(worker, "role", "") == "reference" and machine:
        return {"ok": False, "status": "judge_error", "message": f"the trusted reference worker failed: {message}", "oom": oom}
    return {"ok": False, "status": "runtime_error", "message": message, "oom": oom}


class Channel:
    """The worker's side of the line protocol: commands come on stdin, answers go on the private pipe,
    each with the judge's nonce. `ask` puts a request to the judge in the middle of a command (a
    build, a spot check: what the candidate's process must not do or decide itself) and waits for
    the judge's reply on stdin."""

    def __init__(self, reply: Any, commands: Any) -> None:
        self.reply = reply
        self.commands = commands
        self.nonce = ""

    def read(self) -> dict[str, Any] | None:
        line = self.commands.readline()
        return json.loads(line) if line else None

    def write(self, message: dict[str, Any]) -> None:
        self.reply.write(json.dumps({**message, "nonce": self.nonce}, default=str) + "\n")
        self.reply.flush()

    def ask(self, request: str, **payload: Any) -> dict[str, Any]:
        self.write({"request": request, **payload})
        answer = self.read()
        if answer is None:
            raise Rejection("judge_error", f"the judge went away while the worker waited for {request!r}")
        return answer


def main() -> None:
    """argv: the answer pipe's fd, the fd socket's fd, this worker's memory file's fd."""
    import socket
    channel = Channel(os.fdopen(int(sys.argv[1]), "w"), sys.stdin)
    fd_socket = socket.socket(fileno=int(sys.argv[2])) if len(sys.argv) > 2 else None
    memfd = int(sys.argv[3]) if len(sys.argv) > 3 else None
    warm_up()
    worker = Worker(channel, fd_socket, memfd)
    while (cmd := channel.read()) is not None:
        try:
            result = getattr(worker, f"op_{cmd['op']}")(cmd)
        except BaseException as e:  # noqa: BLE001 - SystemExit from candidate code included
            result = failure(worker, e)
        channel.write(result)
        if cmd["op"] == "exit":
            break


if __name__ == "__main__":
    main()
