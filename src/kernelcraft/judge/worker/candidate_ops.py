"""The candidate's worker's commands: load the candidate (its extensions built by the judge, at its
request), run it on the secret seeds (its outputs shared with the trusted worker, which compares them),
at a second size, timed ABAB against the reference (the judge draws the rounds and their checks:
rounds.py), and profiled last (the profiler leaves CUPTI attached, which slows every later call).
Every call of the candidate's runs pinned as the timed rounds are (timing.pinned), watched by the
guards."""

from __future__ import annotations

import os
import time
from contextlib import AbstractContextManager
from typing import Any

import torch

from ...tasks import runtime
from ..protocol import (BuildRequest, Done, Load, Loaded, Profile, Profiled, Release, RoundOutputs, RoundStart, RoundTimed,
                        RunSeed, SecondShape, SeedRun, ShapeChecked, Time, Timed)
from .buildcache import BuildError, BuildRecorder
from .compare import compare_outputs, flatten_outputs
from .coverage import library_kernels, profile_call
from .exchange import ExchangeError, export_outputs
from .expected import describe_output, plain, same_bits, storages
from .guard_zones import guard_inputs, guarded_output
from .guards import Guard, native_threads
from .rejection import CANDIDATE_FILE, TASK_FILE, Rejection, device_oom, judge_write, user_traceback
from .state import WorkerState, poison
from .timing import clock_info, clocks, host_medians, pinned, run_interleaved, scenario_clock


_PLAIN_VALUES = (int, float, bool, str, type(None))



def plain_outputs(outputs: list[Any], when: str) -> None:
    """Every output a plain torch.Tensor or a plain value: a subclass or proxy runs the candidate's
    code when the judge touches it, as a spot check would, after the clock has stopped."""
    for j, o in enumerate(outputs):
        if type(o) is not torch.Tensor and type(o) not in _PLAIN_VALUES:
            raise Rejection("hack_detected", f"{when}: output {j} is a {type(o).__module__}.{type(o).__qualname__}, "
                                             "not a plain torch.Tensor (lazy or proxy result)")


class CandidateOps(WorkerState):
    """The commands of a candidate's worker."""

    def op_load(self, cmd: Load) -> Loaded:
        judge_write(CANDIDATE_FILE, cmd.candidate_source)
        # Extensions are built while the candidate loads, by the judge, at the candidate's request.
        ask = (lambda arguments, arch: self.channel.ask(BuildRequest(arguments, arch))) if self.channel is not None else None
        recorder = BuildRecorder(self.cache_root, self.judge_uid, self.capability, self.counter.instrument_extension, ask)
        recorder.install()
        try:
            return self._load(cmd, recorder)
        finally:
            recorder.ask = None

    def _load(self, cmd: Load, recorder: BuildRecorder) -> Loaded:
        source = cmd.candidate_source
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
        self.task_source = cmd.task_source
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
        return Loaded(recorder.seconds, import_s - recorder.seconds + time.perf_counter() - t1, recorder.keys, copied,
                      sorted(self.counter.kernel_names))

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

    def op_run_seed(self, cmd: RunSeed) -> SeedRun:
        """The candidate on one secret seed (or, with `binary_p`, one set of 0/1 inputs). Its outputs
        are shared with the trusted worker that compares them (exchange.py) and held here until
        `op_release`; with `guard_output_bytes` (a task's guard_zones check) the call runs inside
        guard zones."""
        self.release()
        if self.native0 is None:
            self.warm_torch()
            self.native0 = native_threads()
        guard_bytes = cmd.guard_output_bytes
        when = cmd.when
        xs = runtime.make_inputs(self.task, cmd.seed, self.device, self.dtype, cmd.binary_p)
        before = [x.clone() if isinstance(x, torch.Tensor) else x for x in xs]
        self.poison_allocator(cmd.poison_bytes)
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
        return SeedRun([describe_output(o) for o in out], [d.to_dict() if d else None for d in shared.tensors],
                       [None if isinstance(o, torch.Tensor) else plain(o) for o in out], mutated, aliases, guard,
                       native_threads() - self.native0)

    def op_release(self, cmd: Release) -> Done:
        self.release()
        return Done()

    def release(self) -> None:
        """Drop the outputs held for the trusted side (it has read them), and their shared memory."""
        if self.held is None:
            return
        self.held = None
        if self.device.type == "cuda":
            torch.cuda.ipc_collect()
        if self.memfd is not None:
            os.ftruncate(self.memfd, 0)

    def op_second_shape(self, cmd: SecondShape) -> ShapeChecked:
        """The candidate at another size of the task, against the reference in this process:
        a kernel specialised to the one shape it was shown shows here (a flag, not a reject)."""
        try:
            alt = runtime.exec_module(self.task_source, TASK_FILE, "kernelcraft_task_check", cmd.sizes)
            init = runtime.make_init_inputs(alt)
            ref = runtime.build_model(alt.Model, init, self.init_seed, self.device, self.dtype)
            new = runtime.build_model(self.candidate_module.ModelNew, init, self.init_seed, self.device, self.dtype)
            runtime.copy_matching_weights(ref, new)
            xs = runtime.make_inputs(alt, cmd.seed, self.device, self.dtype)
        except Exception as e:  # noqa: BLE001 - a task that cannot take its own check size is reported
            return ShapeChecked(None, "the check size could not be built: " + user_traceback(e, (TASK_FILE, CANDIDATE_FILE)))
        with self.pinned():
            self.threads.arm()
            try:
                with torch.no_grad():
                    got = flatten_outputs(new(*[x.clone() if isinstance(x, torch.Tensor) else x for x in xs]))
                    self.sync()
            except Exception as e:  # noqa: BLE001
                return ShapeChecked(False, "fails at another size: " + user_traceback(e, (CANDIDATE_FILE,)))
            self.check_threads("the second-shape call")
        self.check_guard("the second-shape call")
        with torch.no_grad():
            expected = flatten_outputs(ref(*xs))
        m = compare_outputs(got, expected, self.atol, self.rtol)
        return ShapeChecked(m.ok, "" if m.ok else m.describe())

    def op_profile(self, cmd: Profile) -> Profiled:
        xs = self.inputs(cmd.seed)
        self.counter.kernel_names.update(cmd.kernel_names)  # __global__ names from the source
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
        return Profiled(**result, device_peak_bytes=peak)

    def op_time(self, cmd: Time) -> Timed:
        """ABAB timing of candidate and reference over fresh inputs; offline (calls back to back), with
        scenario "server" a random untimed pause before every call, with "sustained" back to back after
        the device was heated until its clock settled. The judge draws each timed
        round's input set and roll as it starts, and whether to check the candidate's call once it has
        returned; a checked call's outputs go to the task's trusted worker (rounds.py). Nothing here
        decides a check or compares."""
        t0 = time.perf_counter()
        cfg, clock = scenario_clock(self.device, self.cfg.timing, cmd.scenario)
        sets = self.timing_inputs(cmd.seeds)

        def rounds(i: int, iters: int) -> tuple[int, int]:
            a = self.channel.ask(RoundStart(i, iters))
            return int(a.set), int(a.roll)

        def after_call(name: str, i: int, out: Any) -> None:
            outs = flatten_outputs(out)
            if name == "reference":
                poison(outs)  # the reference's answer never lingers in freed memory
                return
            self.check_threads(f"timed call {i}")
            plain_outputs(outs, f"timed call {i}")  # a lazy result would compute only when checked
            if i > 0 and self.channel.ask(RoundTimed(i)).check:
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
        return Timed(samples, clocks(before, clock), **host_medians(host, probe, cpus),
                     phases_s={"prepare": t1 - t0, "rounds": t2 - t1, "clocks": time.perf_counter() - t2})

    def share_checked(self, i: int, outs: list[Any]) -> None:
        """Timed call i's outputs, shared (exchange.py) until the judge's trusted worker has compared
        them; the judge answers only "go on"."""
        try:
            shared = export_outputs(outs, self.memfd)
        except (ExchangeError, RuntimeError) as e:
            raise Rejection("judge_error", f"the judge could not share timed call {i}'s outputs for its check: {e}") from None
        self.held = (outs, shared)
        try:
            self.channel.ask(RoundOutputs(i, [d.to_dict() if d else None for d in shared.tensors],
                                          [None if isinstance(o, torch.Tensor) else plain(o) for o in outs]))
        finally:
            self.release()
