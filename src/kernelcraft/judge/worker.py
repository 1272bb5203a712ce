"""The judge's worker: runs inside a fresh, sandboxed process, one per candidate (or per trusted
reference). Reads one JSON command per line on stdin, answers one JSON line on a private pipe.

Imports only the standard library, torch, numpy and triton (the last two only when a candidate
does), so it runs on a bare GPU machine. Roles:
- reference (trusted): reference outputs for the secret seeds, FLOPs and bytes, timing alone,
  eager vs torch.compile baselines, device ceilings.
- candidate: build and load the candidate, run it on the secret seeds (outputs go to files the
  parent compares), ABAB timing against the reference with spot checks, then the profiled calls
  (last: the profiler leaves CUPTI attached to the process, which slows every later call).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import random
import resource
import sys
import time
import traceback
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import torch

from ..tasks import runtime
from .buildcache import BuildError, BuildRecorder
from .compare import compare_outputs, flatten_outputs
from .config import JudgeConfig
from .coverage import profile_call
from .guard_zones import guard_inputs, guarded_output
from .guards import Guard, ThreadWatch, native_threads, pin_precision
from .launches import LaunchCounter
from .locks import device_lock
from .timing import clock_info, host_medians, run_interleaved, scenario_clock

TASK_FILE = "task.py"
# The largest integer each dtype holds exactly together with every integer below it.
EXACT_INTEGER_LIMIT = {"float16": 2048, "bfloat16": 256, "float32": 1 << 24}
CANDIDATE_FILE = "candidate.py"


class Rejection(Exception):
    """Ends a command with a verdict status (hack_detected, incorrect, load_failed...)."""

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


def save_outputs(outputs: list[Any], path: Path) -> list[dict[str, Any]]:
    """Outputs to a file for the parent (CPU copies) and a description of each as returned."""
    meta, cpu = [], []
    for o in outputs:
        if isinstance(o, torch.Tensor):
            meta.append({"type": f"{type(o).__module__}.{type(o).__qualname__}", "exact_tensor": type(o) is torch.Tensor,
                         "device": str(o.device), "dtype": str(o.dtype), "shape": list(o.shape)})
            t = torch.Tensor._make_subclass(torch.Tensor, o.detach()) if type(o) is not torch.Tensor else o.detach()
            cpu.append(t.to("cpu", copy=True))
        else:
            meta.append({"type": type(o).__name__, "exact_tensor": False})
            cpu.append(o if isinstance(o, (int, float, bool, type(None))) else repr(o))
    # No CRC: outputs of a GB or more save three times faster, and the file never leaves the machine.
    torch.serialization.set_crc32_options(False)
    torch.save(cpu, path)
    return meta


def _storages(xs: list[Any]) -> set[int]:
    return {x.untyped_storage().data_ptr() for x in xs if isinstance(x, torch.Tensor) and x.numel()}


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality (NaN equals NaN): did a call write into this tensor?"""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8))


def _poison(outputs: list[Any]) -> None:
    for o in outputs:
        if isinstance(o, torch.Tensor) and o.numel():
            o.detach().fill_(float("nan") if o.is_floating_point() else -1)


class Worker:
    def __init__(self) -> None:
        self.cfg = JudgeConfig()
        self.nonce = ""
        self.timing_sets: tuple[tuple[int, ...], list[list[Any]]] | None = None

    # -- setup ---------------------------------------------------------------------------
    def op_setup(self, cmd: dict[str, Any]) -> dict[str, Any]:
        self.nonce = cmd["nonce"]
        self.role = cmd["role"]
        self.cfg = JudgeConfig.from_dict(cmd["config"])
        self.device_kind = cmd["device"]
        apply_limits(self.cfg, self.device_kind)
        if self.device_kind == "cuda":
            if not torch.cuda.is_available():
                raise Rejection("runtime_error", "no CUDA device is visible to the worker")
            self.device = torch.device("cuda", 0)
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cpu")
            torch.set_num_threads(self.cfg.cpu_threads)
        pin_precision(self.cfg.allow_tf32)
        self.dtype = runtime.torch_dtype(cmd["dtype"])
        self.atol, self.rtol = cmd["atol"], cmd["rtol"]
        self.init_seed = cmd["init_seed"]
        self.cache_root = Path(cmd["cache_dir"])
        if cmd.get("task_source") is None:
            return {"ok": True}
        Path(TASK_FILE).write_text(cmd["task_source"])
        t0 = time.perf_counter()
        try:
            self.task = runtime.exec_module(cmd["task_source"], TASK_FILE, "kernelcraft_task", cmd.get("sizes") or {})
            self.init_inputs = runtime.make_init_inputs(self.task)
            with device_work():
                self.reference = runtime.build_model(self.task.Model, self.init_inputs, self.init_seed, self.device, self.dtype)
        except Exception as e:  # noqa: BLE001 - any failure of task code is reported, not raised
            raise Rejection("task_error", user_traceback(e, (TASK_FILE,))) from None
        task_setup_s = time.perf_counter() - t0
        self.counter = LaunchCounter()
        self.threads = ThreadWatch()
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
    def op_reference(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """Reference outputs for the given seeds, saved for the parent; FLOPs and bytes."""
        out_dir = Path(cmd["out_dir"])
        results = []
        mutates = False
        for i, seed in enumerate(cmd["seeds"]):
            xs = self.inputs(seed)
            before = [x.clone() if isinstance(x, torch.Tensor) else x for x in xs]
            with torch.no_grad():
                out = flatten_outputs(self.reference(*xs))
            self.sync()
            mutates |= any(isinstance(a, torch.Tensor) and not same_bits(a, b) for a, b in zip(xs, before))
            aliases = bool(_storages(out) & _storages(xs))
            results.append({"meta": save_outputs(out, out_dir / f"ref_{i}.pt"), "aliases_input": aliases})
            del out, xs, before
        xs = self.inputs(cmd["seeds"][0])
        from torch.utils.flop_counter import FlopCounterMode
        with torch.no_grad(), FlopCounterMode(display=False) as fc:
            out = flatten_outputs(self.reference(*xs))
        tensors = [t for t in xs + out if isinstance(t, torch.Tensor)]
        state = list(self.reference.state_dict().values())
        nbytes = sum(t.numel() * t.element_size() for t in tensors + state)
        binary = self.binary_reference(cmd["binary_seeds"], out_dir) if cmd.get("binary_seeds") else []
        return {"ok": True, "outputs": results, "binary": binary, "mutates_inputs": mutates,
                "flops": int(fc.get_total_flops()), "bytes": int(nbytes), "env": self.env()}

    def binary_reference(self, seeds: list[int], out_dir: Path) -> list[dict[str, Any]]:
        """Exact outputs for inputs of 0s and 1s (the binary_exact check): the reference in float64.
        Elements whose exact value the task's dtype cannot hold exactly (or that are not integers)
        are saved as NaN, which the parent skips. The share of ones is halved until at least half
        of the elements can be checked (a long inner dimension sums many ones)."""
        limit = EXACT_INTEGER_LIMIT[str(self.dtype).removeprefix("torch.")]
        exact_model = copy.deepcopy(self.reference).to(torch.float64)
        results = []
        for i, seed in enumerate(seeds):
            p = 0.5
            for _ in range(12):
                xs = runtime.make_inputs(self.task, seed, self.device, self.dtype, p)
                with torch.no_grad():
                    out = flatten_outputs(exact_model(*[x.to(torch.float64) if isinstance(x, torch.Tensor) and x.is_floating_point()
                                                        else x for x in xs]))
                tensors = [o for o in out if isinstance(o, torch.Tensor)]
                checkable = [(o.abs() <= limit) & (o == o.round()) for o in tensors]
                share = sum(int(c.sum()) for c in checkable) / max(1, sum(o.numel() for o in tensors))
                if share >= 0.5:
                    break
                p /= 2
            expected = [torch.where(c, o, torch.full_like(o, float("nan"))).to(self.dtype) for o, c in zip(tensors, checkable)]
            results.append({"seed": seed, "p": p, "share": share, "meta": save_outputs(expected, out_dir / f"binref_{i}.pt")})
            del out, tensors, expected, xs
        return results

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
        seed = cmd["seeds"][0]
        timing = dataclasses.replace(self.cfg.timing, target_ms=cmd.get("target_ms") or self.cfg.timing.target_ms)
        cfg, clock = scenario_clock(self.device, timing, cmd.get("scenario"), seed)
        sets = self.timing_inputs(cmd["seeds"])

        host: dict[str, list[float]] = {}
        probe: list[float] = []
        cpus: list[int] = []

        def run(sides: list[tuple[str, Any]]) -> dict[str, list[float]]:
            with torch.no_grad():
                samples, _ = run_interleaved(sides, sets, clock, cfg, random.Random(seed),
                                             lambda name, i, out, args: _poison(flatten_outputs(out)), host, probe, cpus)
            return samples

        before = clock_info()
        sides = [("reference", self.reference)]
        if cmd.get("compiled"):
            sides.append(("compiled", torch.compile(self.reference)))
        samples = run(sides)
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
        return {"ok": True, "samples": samples, "clocks": {"before": before, "after": clock_info()},
                **host_medians(host, probe, cpus)}

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
        source = cmd["candidate_source"]
        Path(CANDIDATE_FILE).write_text(source)
        recorder = BuildRecorder(self.cache_root, self.counter.instrument_extension)
        recorder.install()
        has_triton = "triton" in source
        if has_triton:
            self.counter.instrument_triton()
        import torch._dynamo  # noqa: F401 - it rebinds torch.manual_seed on import; import it before the snapshot
        self.guard = Guard(extra_classes=sorted({type(m) for m in self.reference.modules()}, key=repr))
        t0 = time.perf_counter()
        try:
            module = runtime.exec_module(source, CANDIDATE_FILE, "kernelcraft_candidate")
        except BuildError as e:
            raise Rejection("build_failed", str(e), build_s=recorder.seconds) from None
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
            raise Rejection("build_failed", str(e), build_s=recorder.seconds) from None
        except Exception as e:  # noqa: BLE001
            raise Rejection("load_failed", "constructing ModelNew: " + user_traceback(e, (CANDIDATE_FILE,))) from None
        self.check_guard("constructing ModelNew")
        return {"ok": True, "build_s": recorder.seconds, "load_s": import_s - recorder.seconds + time.perf_counter() - t1,
                "build_keys": recorder.keys, "weights_copied": copied, "kernel_names": sorted(self.counter.kernel_names)}

    def check_guard(self, when: str) -> None:
        changed = self.guard.changed()
        if changed:
            raise Rejection("hack_detected", f"{when} modified the judge's or PyTorch's functions: {', '.join(changed[:5])}")

    def check_threads(self, when: str) -> None:
        new = self.threads.new_python_threads()
        if new:
            raise Rejection("hack_detected", f"{when} left {len(new)} thread(s) running ({', '.join(new[:3])}): work must finish inside forward")

    def call_candidate(self, xs: list[Any], when: str) -> list[Any]:
        self.threads.arm()
        try:
            with torch.no_grad():
                out = self.model(*xs)
            self.sync()
        except Exception as e:  # noqa: BLE001
            raise Rejection("runtime_error", f"{when}: " + user_traceback(e, (CANDIDATE_FILE,))) from None
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

    def op_run(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """The candidate on each secret seed, and on the 0/1 inputs of `binary` (a task's
        binary_exact check); outputs saved for the parent to compare. With `guard_output_bytes`
        (a task's guard_zones check) every call runs inside guard zones."""
        out_dir = Path(cmd["out_dir"])
        self.warm_torch()
        native0 = native_threads()
        guard_bytes = cmd.get("guard_output_bytes")
        calls = [(f"cand_{i}.pt", seed, None, f"forward on seed {i}") for i, seed in enumerate(cmd["seeds"])]
        calls += [(f"bin_{i}.pt", b["seed"], b["p"], f"forward on 0/1 inputs {i}") for i, b in enumerate(cmd.get("binary", []))]
        results, binary, guards = [], [], []
        for name, seed, binary_p, when in calls:
            xs = runtime.make_inputs(self.task, seed, self.device, self.dtype, binary_p)
            before = [x.clone() if isinstance(x, torch.Tensor) else x for x in xs]
            self.poison_allocator(cmd.get("poison_bytes", 0))
            if guard_bytes is None:
                out = self.call_candidate(xs, when)
            else:
                zones = guard_inputs(xs)
                xs = zones.inputs
                with guarded_output(guard_bytes, self.device) as out_guard:
                    out = self.call_candidate(xs, when)
                out_guard.check(out)
                guards.append(out_guard.describe())
                hit = zones.breached()
                if hit or out_guard.breached_bytes:
                    where = (f"{out_guard.breached_bytes} guard byte(s) after the output's memory"
                             if out_guard.breached_bytes else f"the guard zone around input(s) {hit}")
                    raise Rejection("incorrect", f"{when}: the candidate wrote outside its result ({where} changed): "
                                                 "an out-of-bounds store, e.g. an unmasked last tile")
            mutated = [j for j, (a, b) in enumerate(zip(xs, before)) if isinstance(a, torch.Tensor) and not same_bits(a, b)]
            aliases = bool(_storages(out) & _storages(xs))
            entry = {"meta": save_outputs(out, out_dir / name), "mutated": mutated, "aliases_input": aliases}
            (binary if binary_p is not None else results).append(entry)
            del out, xs, before
        return {"ok": True, "outputs": results, "binary": binary, "guards": guards,
                "native_thread_growth": native_threads() - native0}

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
        self.threads.arm()
        # Three profiled calls, the median by coverage: on a busy CPU one call can be preempted
        # outside the candidate's kernels and read as low coverage.
        with torch.no_grad():
            runs = sorted((profile_call(self.model, xs, self.counter, self.device) for _ in range(3)),
                          key=lambda r: r["coverage"])
        result = runs[1]
        self.check_threads("the profiled call")
        self.check_guard("the profiled call")
        return {"ok": True, **result}

    def op_time(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """ABAB timing of candidate and reference over fresh inputs, with spot checks; offline (calls
        back to back) or, with scenario "server", a random untimed pause before every call."""
        t0 = time.perf_counter()
        cfg, clock = scenario_clock(self.device, self.cfg.timing, cmd.get("scenario"), cmd["seeds"][0])
        sets = self.timing_inputs(cmd["seeds"])
        spot: dict[str, Any] = {"checked": 0, "failures": []}
        held: dict[int, list[Any]] = {}

        def after_call(name: str, i: int, out: Any, args: list[Any]) -> None:
            outs = flatten_outputs(out)
            if name == "candidate":
                self.check_threads(f"timed call {i}")
                if i > 0:
                    held[i] = outs
                return
            if i > 0 and i in held:
                m = compare_outputs(held.pop(i), outs, self.atol, self.rtol)
                spot["checked"] += 1
                if not m.ok:
                    spot["failures"].append({"iteration": i, "mismatch": m.describe()})
            _poison(outs)  # the reference's answer never lingers in freed memory

        before = clock_info()
        t1 = time.perf_counter()
        self.threads.arm()
        host: dict[str, list[float]] = {}
        probe: list[float] = []
        cpus: list[int] = []
        with torch.no_grad():
            try:
                samples, spots = run_interleaved([("candidate", self.model), ("reference", self.reference)], sets,
                                                 clock, cfg, random.Random(cmd["seeds"][0] ^ 0x5EED), after_call, host,
                                                 probe, cpus)
            except Rejection:
                raise
            except Exception as e:  # noqa: BLE001
                raise Rejection("runtime_error", "during timing: " + user_traceback(e, (CANDIDATE_FILE,))) from None
        self.check_guard("the timed calls")
        if spot["failures"]:
            f = spot["failures"][0]
            raise Rejection("incorrect", f"output of timed call {f['iteration']} is wrong (caching or deferred work?): {f['mismatch']}")
        t2 = time.perf_counter()
        return {"ok": True, "samples": samples, "spot_checks": spot["checked"], "spot_iterations": spots,
                "clocks": {"before": before, "after": clock_info()},
                **host_medians(host, probe, cpus),
                "phases_s": {"prepare": t1 - t0, "rounds": t2 - t1, "clocks": time.perf_counter() - t2}}


    def op_exit(self, cmd: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True}


def device_work() -> AbstractContextManager[None]:
    """The device lock, shared, around device work a worker does on its own (its CUDA context, the
    task's model): a context made next to a measurement slowed a small GEMM's timed call from 26 to
    40 us (median, H200). The judge's commands take the lock in the parent; this is for the rest."""
    if not os.environ.get("CUDA_VISIBLE_DEVICES"):
        return nullcontext()
    return device_lock(Path(os.environ["KERNELCRAFT_LOCK_DIR"]), "cuda", int(os.environ["CUDA_VISIBLE_DEVICES"]), shared=True)


def warm_up() -> None:
    """Start the CUDA context and import Triton before the first command: a spare worker does this
    while it waits, so a candidate handed that worker waits only for its own task setup."""
    if os.environ.get("CUDA_VISIBLE_DEVICES") and torch.cuda.is_available():
        with device_work():
            torch.cuda.set_device(0)
            torch.empty(1, device="cuda")
    try:
        import triton  # noqa: F401
    except ImportError:
        pass


def main() -> None:
    reply = os.fdopen(int(sys.argv[1]), "w")
    warm_up()
    worker = Worker()
    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            result = getattr(worker, f"op_{cmd['op']}")(cmd)
        except Rejection as r:
            result = {"ok": False, "status": r.status, "message": str(r), **r.details}
        except BaseException as e:  # noqa: BLE001 - SystemExit from candidate code included
            result = {"ok": False, "status": "runtime_error",
                      "message": user_traceback(e, (TASK_FILE, CANDIDATE_FILE))}
        result["nonce"] = worker.nonce
        reply.write(json.dumps(result, default=str) + "\n")
        reply.flush()
        if cmd["op"] == "exit":
            break


if __name__ == "__main__":
    main()
