"""Per-kernel metrics of a candidate the judge found correct, taken after its verdict and never part
of it: Nsight Compute (ncu) where it runs, else the PyTorch profiler's kernel list (on the CPU, its
operator list), with the reason ncu did not run.

Each pass is a fresh process (profile_driver.py) started as a worker is (sandbox.launch: the scrubbed
environment, its own process group), killed whole on a timeout, holding the device lock alone: ncu
replays every kernel many times, which nothing else on the device may overlap. The numbers are
advice: a candidate that tampered with them in its own process gains nothing in any verdict."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from ..tasks import Task
from .config import JudgeConfig
from .kernel_profile import NCU, OWN_CODE, TORCH_PROFILER, KernelProfile, KernelRecord
from .locks import device_lock
from .nsight import errors, find_ncu, kernel_records, ncu_command, parse_ncu_csv, refusal
from .sandbox import launch, scrubbed_env
from .scratch import make_scratch
from .static import check_source
from .worker.buildstore import builds_dir
from .worker.coverage import is_custom_kernel
from .worker.kernel_names import CompiledKernels

_SEED = 1234  # inputs for a profile: any will do, and none of the judge's secret seeds


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


class KernelProfiler:
    """Profiles one candidate at a time on one device: the `top` kernels of a forward call. A refusal of
    ncu for the whole machine (no access to the GPU's counters) is remembered: later profiles go to the
    fallback at once."""

    def __init__(self, device: str, *, cache_dir: Path, device_index: int = 0, config: JudgeConfig | None = None,
                 top: int = 5, timeout_s: float = 600.0, max_launches: int = 64) -> None:
        self.device = device
        self.cache_dir = Path(cache_dir).resolve()
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
        scratch = make_scratch(self.cache_dir, "p-")
        own = check_source(source, enforce=False).kernel_names
        try:
            why = self.ncu_unavailable()
            found = None
            if why is None:
                found, why = self._ncu(task, source, scratch, own)
            if found is None:
                found = self._torch(task, source, scratch, own, why)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return replace(found, seconds=time.perf_counter() - t0)

    def _ncu(self, task: Task, source: str, scratch: Path, own: set[str]) -> tuple[KernelProfile | None, str]:
        """ncu's profile, or None and why there is none."""
        log = scratch / "ncu.csv"
        code, output = self._run(ncu_command(find_ncu() or "ncu", log, self.max_launches,
                                             self._driver(task, source, scratch, "ncu")), scratch)
        csv_text = log.read_text(errors="replace") if log.is_file() else ""
        refused = refusal(output + csv_text)
        if refused is not None:
            self._refused = f"ncu was refused: {refused}"
            return None, self._refused
        launches = parse_ncu_csv(csv_text)
        if not launches:
            problem = (errors(output + csv_text) or [_last_line(output)])[0]
            return None, f"ncu profiled no kernel (exit code {code}): {problem}"
        compiled = self._compiled(scratch)
        records = kernel_records(launches, lambda name: is_custom_kernel(name, own, compiled))
        note = f"the call's first {self.max_launches} launches only" if len(launches) >= self.max_launches else ""
        return KernelProfile(NCU, records[:self.top], sum(k.time_us for k in records), note), ""

    def _torch(self, task: Task, source: str, scratch: Path, own: set[str], why: str) -> KernelProfile:
        """The profiler's kernel list (CPU: operators), noting `why` ncu did not run."""
        code, output = self._run(self._driver(task, source, scratch, "torch"), scratch)
        out = scratch / "kernels.json"
        if code != 0 or not out.is_file():
            return KernelProfile("", [], 0.0, f"{why}; the profiler's run failed too (exit code {code}): {_last_line(output)}")
        compiled = self._compiled(scratch)
        records = sorted((KernelRecord(r["name"][:300], r["calls"], r["time_us"],
                                       own=r["name"] == OWN_CODE or is_custom_kernel(r["name"], own, compiled))
                          for r in json.loads(out.read_text())), key=lambda k: -k.time_us)
        return KernelProfile(TORCH_PROFILER, records[:self.top], sum(k.time_us for k in records), why)

    def _compiled(self, scratch: Path) -> CompiledKernels:
        """The kernels compiled into the extensions the driver loaded: the candidate's own in any namespace.
        Only binaries in the judge's build cache are read: the list comes from the candidate's process."""
        builds = builds_dir(self.cache_dir)
        compiled = CompiledKernels()
        listed = scratch / "binaries.json"
        for path in json.loads(listed.read_text()) if listed.is_file() else []:
            binary = Path(path).resolve()
            if binary.is_file() and binary.is_relative_to(builds):
                compiled.add_binary(binary)
        return compiled

    def _driver(self, task: Task, source: str, scratch: Path, mode: str) -> list[str]:
        """The driver's command line, its spec written in `scratch`."""
        spec = {"mode": mode, "device": self.device, "dtype": task.meta.dtype, "task_source": task.source,
                "sizes": task.sizes_for(self.device), "candidate_source": source, "seed": _SEED,
                "threads": self.config.cpu_threads, "cache_dir": str(self.cache_dir), "out": str(scratch / "kernels.json"),
                "judge_uid": os.geteuid(),
                "binaries": str(scratch / "binaries.json")}
        (scratch / "spec.json").write_text(json.dumps(spec))
        return [sys.executable, "-m", "kernelcraft.judge.profile_driver", str(scratch / "spec.json")]

    def _run(self, argv: list[str], scratch: Path) -> tuple[int | None, str]:
        """Run `argv` in `scratch` holding the device alone; its exit code (None: killed at the timeout)
        and its output."""
        env = scrubbed_env(self.device, self.device_index, self.cache_dir, scratch, os.cpu_count() or 1)
        log = scratch / "output.log"
        with device_lock(self.device, self.device_index), open(log, "wb") as out:
            proc = launch(argv, scratch, env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
            try:
                code: int | None = proc.wait(timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                code = None
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # whatever the candidate started dies with it
            except ProcessLookupError:
                pass
            proc.wait()
        text = log.read_text(errors="replace")
        return code, text if code is not None else f"{text}\nkilled after {self.timeout_s:g} s"
