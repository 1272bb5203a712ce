"""Per-kernel metrics of a candidate the judge found correct, taken after its verdict and never part
of it: Nsight Compute (ncu) where it runs, else the PyTorch profiler's kernel list (on the CPU, its
operator list), with the reason ncu did not run.

Each pass runs candidate code, so it is a fresh process started confined as a worker is
(sandbox.run_untrusted: another user or root without capabilities, Landlock, namespaces, a scrubbed
environment; worker/profile_driver.py, which applies the worker's rlimits), in a scratch directory of
its own, killed whole on a timeout, holding the device lock alone: ncu replays every kernel many times,
which nothing else on the device may overlap. ncu runs inside the same confinement and starts the
driver, which inherits it; that pass alone keeps the one capability the GPU's counters need where the
driver restricts them to administrators (nsight.counters_capability), and ncu's ports on a loopback of
its own. What a pass leaves (the driver's ProfileOutput, ncu's CSV, its output) is read back as
untrusted input, without following links; of the binaries it names, only those in the judge's build
cache are read. The numbers are advice: a candidate that tampered with them in its own process gains
nothing in any verdict."""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path

from ..tasks import Task
from .config import JudgeConfig
from .integrity import make_dir, output_left
from .isolation import Allowance, check_cache_reachable
from .kernel_profile import NCU, TORCH_PROFILER, KernelProfile, KernelRecord
from .locks import device_lock
from .nsight import NCU_PORT, NCU_PORTS, counters_capability, errors, find_ncu, kernel_records, ncu_command, parse_ncu_csv, refusal
from .protocol import (OWN_CODE, PROFILE_OUTPUT, PROFILE_SPEC, ProfileOutput, ProfileSpec, ProtocolError, decode_profile_output,
                       encode)
from .sandbox import hold_group, run_untrusted, scrubbed_env
from .scratch import make_scratch
from .static import check_source
from .worker.buildstore import builds_dir
from .worker.confine import python_command
from .worker.coverage import is_custom_kernel
from .worker.kernel_names import CompiledKernels

DRIVER = "kernelcraft.judge.worker.profile_driver"
RUN_TOOL = "kernelcraft.judge.worker.run_tool"
NCU_LOG = "ncu.csv"  # ncu's CSV, in the pass's scratch
_SEED = 1234  # inputs for a profile: any will do, and none of the judge's secret seeds
_LIMIT = 4 << 20  # bytes read back of any file a pass leaves


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


@dataclass(frozen=True)
class _Pass:
    """What one pass left: its exit code (None: killed at the timeout), its output, ncu's CSV, and the driver's
    ProfileOutput (None: it wrote none, or `problem`: what it wrote is none)."""

    code: int | None
    output: str
    csv: str
    result: ProfileOutput | None
    problem: str = ""


class KernelProfiler:
    """Profiles one candidate at a time on one device: the `top` kernels of a forward call. A refusal of
    ncu for the whole machine (no access to the GPU's counters) is remembered: later profiles go to the
    fallback at once."""

    def __init__(self, device: str, *, cache_dir: Path, device_index: int = 0, config: JudgeConfig | None = None,
                 top: int = 5, timeout_s: float = 600.0, max_launches: int = 64) -> None:
        self.device = device
        self.cache_dir = make_dir(Path(cache_dir).resolve())
        check_cache_reachable(self.cache_dir)  # a pass's scratch lies under it, as a worker's does (CacheClosed: one line)
        self.device_index = device_index
        self.config = config or JudgeConfig()
        self.top = top
        self.timeout_s = timeout_s
        self.max_launches = max_launches  # ncu profiles no more launches of the call than this
        self._refused: str | None = None

    def ncu_unavailable(self) -> str | None:
        """Why ncu will not profile here, or None when it will be tried."""
        if self.device != "cuda":
            return "ncu profiles CUDA devices only"
        if find_ncu() is None:
            return "ncu is not installed here (not on PATH, in CUDA's toolkit or in /opt/nvidia/nsight-compute)"
        return self._refused

    def profile(self, task: Task, source: str) -> KernelProfile:
        """The top kernels of one forward call of `source` on `task`: ncu's metrics, or the profiler's
        list with why ncu did not run. A candidate that fails here gives an empty profile saying so."""
        t0 = time.perf_counter()
        own = check_source(source, enforce=False).kernel_names
        why = self.ncu_unavailable()
        found = None
        if why is None:
            found, why = self._ncu(task, source, own)
        if found is None:
            found = self._torch(task, source, own, why)
        return replace(found, seconds=time.perf_counter() - t0)

    def _ncu(self, task: Task, source: str, own: set[str]) -> tuple[KernelProfile | None, str]:
        """ncu's profile, or None and why there is none. ncu runs confined (worker/run_tool.py) and starts the
        driver inside its confinement."""
        ncu = find_ncu() or "ncu"
        cap = counters_capability()
        argv = ncu_command(ncu, Path(NCU_LOG), self.max_launches, python_command(DRIVER, [PROFILE_SPEC]))
        ran = self._run(task, source, "ncu", RUN_TOOL, argv, read=(Path(ncu).resolve().parent,),
                        allow=Allowance(capabilities=() if cap is None else (cap,),
                                        tcp_ports=tuple(range(NCU_PORT, NCU_PORT + NCU_PORTS)), proc_tree=True))
        refused = refusal(ran.output + ran.csv)
        if refused is not None:
            self._refused = f"ncu was refused: {refused}"
            return None, self._refused
        launches = parse_ncu_csv(ran.csv)
        if not launches:
            problem = (errors(ran.output + ran.csv) or [_last_line(ran.output)])[0]
            return None, f"ncu profiled no kernel (exit code {ran.code}): {problem}"
        compiled = self._compiled(ran.result.binaries if ran.result else [])
        records = kernel_records(launches, lambda name: is_custom_kernel(name, own, compiled))
        note = f"the call's first {self.max_launches} launches only" if len(launches) >= self.max_launches else ""
        return KernelProfile(NCU, records[:self.top], sum(k.time_us for k in records), note), ""

    def _torch(self, task: Task, source: str, own: set[str], why: str) -> KernelProfile:
        """The profiler's kernel list (CPU: operators), noting `why` ncu did not run."""
        ran = self._run(task, source, "torch", DRIVER, [PROFILE_SPEC])
        if ran.code != 0 or ran.result is None:
            problem = ran.problem or _last_line(ran.output)
            return KernelProfile("", [], 0.0, f"{why}; the profiler's run failed too (exit code {ran.code}): {problem}")
        compiled = self._compiled(ran.result.binaries)
        records = sorted((KernelRecord(k.name[:300], k.calls, float(k.time_us),
                                       own=k.name == OWN_CODE or is_custom_kernel(k.name, own, compiled))
                          for k in ran.result.kernels), key=lambda k: -k.time_us)
        return KernelProfile(TORCH_PROFILER, records[:self.top], sum(k.time_us for k in records), why)

    def _compiled(self, binaries: list[str]) -> CompiledKernels:
        """The kernels compiled into the extensions the driver loaded: the candidate's own in any namespace.
        Only binaries in the judge's build cache are read: the list comes from the candidate's process."""
        builds = builds_dir(self.cache_dir)
        compiled = CompiledKernels()
        for path in binaries:
            binary = Path(path).resolve()
            if binary.is_file() and binary.is_relative_to(builds):
                compiled.add_binary(binary)
        return compiled

    def _run(self, task: Task, source: str, mode: str, module: str, args: list[str], read: tuple[Path, ...] = (),
             allow: Allowance = Allowance()) -> _Pass:
        """One pass in a fresh scratch (a pass's files never meet the next's), confined, holding the device alone:
        what it left there, read back before the scratch goes."""
        scratch = make_scratch(self.cache_dir, "p-")
        try:
            spec = ProfileSpec(mode, self.device, task.meta.dtype, task.source, task.sizes_for(self.device), source, _SEED,
                               self.config, str(self.cache_dir), os.geteuid())
            (scratch / PROFILE_SPEC).write_text(json.dumps(encode(spec)))
            env = scrubbed_env(self.device, self.device_index, self.cache_dir, scratch, os.cpu_count() or 1)
            with device_lock(self.device, self.device_index):
                code, _ = run_untrusted(module, args, scratch, env, self.cache_dir, self.timeout_s,
                                        hold_group(self.device, self.device_index, None), read=read, allow=allow)
            output = (output_left(scratch, "output.log", _LIMIT) or b"").decode(errors="replace")
            if code is None:
                output += f"\nkilled after {self.timeout_s:g} s"
            csv = (output_left(scratch, NCU_LOG, _LIMIT) or b"").decode(errors="replace")
            raw = output_left(scratch, PROFILE_OUTPUT, _LIMIT)
            if raw is None:
                return _Pass(code, output, csv, None)
            try:
                return _Pass(code, output, csv, decode_profile_output(json.loads(raw)))
            except (ValueError, RecursionError, ProtocolError) as e:
                return _Pass(code, output, csv, None, f"what it wrote back is no profile ({str(e)[:200]})")
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
