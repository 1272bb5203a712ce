"""Runtime guards inside the worker: monkeypatching, threads, precision flags (docs/judge.md, exploit classes 2, 4 and 11).

Snapshots are taken before the candidate is imported; checks run after import and after calls.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import os
import re
import sys
import threading
import time
import types
from contextlib import contextmanager
from typing import Any, Iterator

import torch
import torch.nn.functional as F

from .timing import pinned_cpus, thread_ids


def _watched_namespaces() -> list[tuple[str, Any]]:
    spaces: list[tuple[str, Any]] = [
        ("torch", torch), ("torch.nn.functional", F), ("torch.Tensor", torch.Tensor),
        ("torch.nn.Module", torch.nn.Module), ("torch.linalg", torch.linalg), ("torch.fft", torch.fft),
        ("torch.special", torch.special), ("torch.testing", torch.testing), ("time", time),
        ("torch.profiler", torch.profiler), ("torch.autograd.profiler", torch.autograd.profiler),
    ]
    if torch.cuda.is_available():
        spaces += [("torch.cuda", torch.cuda), ("torch.cuda.Event", torch.cuda.Event)]
    return spaces


class Guard:
    """Identity snapshot of the functions the judge and the reference rely on."""

    def __init__(self, extra_classes: list[type] = ()) -> None:
        self.spaces = _watched_namespaces() + [(f"{c.__module__}.{c.__qualname__}", c) for c in extra_classes]
        self.snapshot = {name: dict(vars(ns)) for name, ns in self.spaces}
        self.flags = precision_flags()
        self.modes = mode_stacks()
        self.interpreter = interpreter_state()

    def changed(self) -> list[str]:
        """Names whose binding changed since the snapshot (replaced, added or removed)."""
        out = []
        for name, ns in self.spaces:
            now = vars(ns)
            before = self.snapshot[name]
            if now.keys() != before.keys():
                # torch binds submodules as they are first imported: not a patch.
                added = sorted(k for k in set(now) - set(before)
                               if not isinstance(now[k], types.ModuleType) and k not in _PYTHON_CACHES)[:3]
                removed = sorted(set(before) - set(now))[:3]
                out += [f"{name}.{k} added" for k in added] + [f"{name}.{k} removed" for k in removed]
            for k, v in before.items():
                if k in now and now[k] is not v and not _benign(k, v, now[k]):
                    out.append(f"{name}.{k} replaced")
        if mode_stacks() != self.modes:
            out.append(f"a torch function or dispatch mode was left active (stack depths {self.modes} -> {mode_stacks()})")
        if precision_flags() != self.flags:
            out.append(f"precision flags changed: {self.flags} -> {precision_flags()}")
        now = interpreter_state()
        out += [f"interpreter state changed: {k} {self.interpreter[k]} -> {now[k]}" for k in now if now[k] != self.interpreter[k]]
        return out


_PYTHON_CACHES = {"__slotnames__"}  # copyreg caches this on a class the first time it pickles one


def _benign(name: str, before: Any, after: Any) -> bool:
    # Lazily created submodules and caches that torch itself fills in on first use.
    return isinstance(before, types.ModuleType) and isinstance(after, types.ModuleType) and before.__name__ == after.__name__ \
        or name.startswith("_") and not callable(before)


def mode_stacks() -> tuple[int, int]:
    """Depths of the TorchFunctionMode and TorchDispatchMode stacks: a mode left active intercepts
    every later torch call, the reference's included, without replacing any function."""
    return torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack()


def interpreter_state() -> dict[str, Any]:
    """What slows every Python call of the process, the reference's and the judge's host probe alike,
    without replacing a function: trace and profile hooks, monitoring tools (3.12+), the garbage
    collector's settings, torch's thread count."""
    tools = [sys.monitoring.get_tool(i) for i in range(6)] if hasattr(sys, "monitoring") else []
    return {"trace": sys.gettrace() is not None, "profile": sys.getprofile() is not None, "monitoring": tools,
            "gc": (gc.isenabled(), gc.get_threshold()), "switch_interval": sys.getswitchinterval(),
            "torch_threads": (torch.get_num_threads(), torch.get_num_interop_threads())}


def precision_flags() -> tuple:
    m = torch.backends.cuda.matmul
    return (
        m.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.get_float32_matmul_precision(),
        m.allow_fp16_reduced_precision_reduction,
        m.allow_bf16_reduced_precision_reduction,
    )


# What a fresh process of this PyTorch runs at (cuDNN's TF32 on, fp32 matmuls in full precision):
# the precision users' eager and torch.compile run at, read before the judge pins anything.
PYTORCH_DEFAULT_PRECISION = precision_flags()


def set_precision_flags(flags: tuple) -> None:
    """Set the flags `precision_flags` reads, in its order."""
    m = torch.backends.cuda.matmul
    m.allow_tf32, torch.backends.cudnn.allow_tf32 = flags[0], flags[1]
    torch.set_float32_matmul_precision(flags[2])
    m.allow_fp16_reduced_precision_reduction, m.allow_bf16_reduced_precision_reduction = flags[3], flags[4]


@contextmanager
def pytorch_defaults() -> Iterator[None]:
    """Run at PyTorch's default precision (the baselines users compare with), then back to the judge's."""
    pinned = precision_flags()
    set_precision_flags(PYTORCH_DEFAULT_PRECISION)
    try:
        yield
    finally:
        set_precision_flags(pinned)


def pin_precision(allow_tf32: bool) -> None:
    """The judge, not the candidate, decides whether fp32 matmuls and convolutions may use TF32."""
    torch.backends.cuda.matmul.allow_tf32 = allow_tf32
    torch.backends.cudnn.allow_tf32 = allow_tf32
    torch.set_float32_matmul_precision("high" if allow_tf32 else "highest")


# The judge's clocks, taken before any candidate code runs (the guard reports a replaced one only after).
_process_time, _perf, _sleep = time.process_time, time.perf_counter, time.sleep
# A call may use this much CPU time per allowed thread and wall second, plus the constant (clock granularity).
_CPU_PER_THREAD, _CPU_SLACK_S = 1.25, 0.002
# A thread found running when the call returns is watched this long and may use this much CPU meanwhile:
# an OpenMP pool's thread needs microseconds to reach its sleep after the region joins (later only
# if preempted, and then it has no CPU); work left for after the call needs more. Not waited out:
# work finishing during the check would finish untimed and before the reference's call.
_SETTLE_S, _SETTLE_CPU_NS = 0.02, 200_000
_OPENMP_RE = re.compile(r"/lib(?:gomp|iomp5|omp)\b[^/]*\.so[^/]*$")


class ThreadWatch:
    """The threads and CPU time of a candidate's calls. Python threads alive after a call that were not
    there before are work escaping the timer. With `threads` (CPU workers: cfg.cpu_threads, the
    reference's thread count) native threads are held to it too: a call may leave at most one OpenMP
    pool of threads-1 new threads per OpenMP runtime loaded (torch's, and the candidate's own where
    -fopenmp linked another); when it returns no other thread is still working (_working_threads) and
    every thread is on the CPUs the judge pinned the process to; no runtime is set to start more than
    `threads` threads a region; and the call used no more CPU time than `threads` threads can in its
    wall time. On CUDA (None) the driver starts threads of its own as it goes: there native growth is
    only flagged (native_threads)."""

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads
        self.before: set[int] = set()
        self.native_before: set[int] = set()
        self.runtimes: list[str] = []
        self.started = (0.0, 0.0)  # process CPU time and wall time at `arm`

    def arm(self) -> None:
        self.before = {t.ident for t in threading.enumerate()}
        self.native_before = set(thread_ids()) if self.threads else set()
        self.runtimes = openmp_runtimes() if self.threads else []
        self.started = (_process_time(), _perf())

    def new_python_threads(self) -> list[str]:
        return [t.name for t in threading.enumerate() if t.ident not in self.before and t.is_alive()]

    def pool_allowance(self) -> int:
        """Native threads the calls since `arm` may add: one OpenMP pool of threads-1 per runtime."""
        return (self.threads - 1) * len(self.runtimes) if self.threads else 0

    def cpu_breaches(self) -> list[str]:
        """Since `arm` (one call): more CPU time than `threads` threads can use, or an OpenMP runtime set
        to start more than `threads` threads a region (omp_set_num_threads)."""
        if not self.threads:
            return []
        cpu, wall = _process_time() - self.started[0], _perf() - self.started[1]
        out = []
        if cpu > self.threads * wall * _CPU_PER_THREAD + _CPU_SLACK_S:
            out.append(f"it used {cpu * 1e3:.1f} ms of CPU time in {wall * 1e3:.1f} ms, more than "
                       f"cpu_threads = {self.threads} thread(s) can")
        for path in self.runtimes:
            n = openmp_max_threads(path)
            if n is not None and n > self.threads:
                out.append(f"OpenMP ({os.path.basename(path)}) is set to {n} threads (omp_set_num_threads?); "
                           f"the judge runs cpu_threads = {self.threads}")
        return out

    def native_breaches(self) -> list[str]:
        """What the native threads break of the rules now, after a call."""
        if not self.threads:
            return []
        out = []
        new = set(thread_ids()) - self.native_before
        if len(new) > self.pool_allowance():
            out.append(f"{len(new)} new native thread(s) outlived the call: OpenMP may keep one pool of "
                       f"cpu_threads-1 = {self.threads - 1} per runtime ({len(self.runtimes)} loaded), no more")
        working = _working_threads()
        if working:
            out.append(f"{len(working)} thread(s) still working after the call returned: work must finish inside forward")
        pinned = pinned_cpus()
        if pinned is not None:
            moved = [cpus for tid in thread_ids() if (cpus := _cpus_of(tid)) is not None and cpus != pinned]
            if moved:
                out.append(f"{len(moved)} thread(s) left the CPUs the judge pinned ({sorted(pinned)}), e.g. for {sorted(moved[0])}")
        return out


def openmp_runtimes() -> list[str]:
    """Paths of the OpenMP runtimes loaded in this process: torch's and, where an extension built with
    -fopenmp links a libgomp that torch's wheel bundles under another name, that one too."""
    with open("/proc/self/maps") as f:
        paths = {parts[5].strip() for line in f if len(parts := line.split(maxsplit=5)) == 6}
    return sorted(p for p in paths if _OPENMP_RE.search(p))


def openmp_max_threads(path: str) -> int | None:
    """omp_get_max_threads() of a loaded runtime, for the calling thread: the team size a region gets."""
    try:
        return int(_loaded_library(path).omp_get_max_threads())
    except (OSError, AttributeError):  # unloaded meanwhile, or no such function
        return None


@functools.cache
def _loaded_library(path: str) -> ctypes.CDLL:
    return ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)  # never loads one: it must be there


def _working_threads() -> list[int]:
    """Threads other than the caller's that are running now and use more than _SETTLE_CPU_NS of CPU in
    the next _SETTLE_S."""
    me = threading.get_native_id()
    running = {tid: ns for tid in thread_ids() if tid != me and _state(tid) == "R" and (ns := _cpu_ns(tid)) is not None}
    if not running:
        return []
    _sleep(_SETTLE_S)
    return [tid for tid, ns in running.items() if (now := _cpu_ns(tid)) is not None and now - ns > _SETTLE_CPU_NS]


def _state(tid: int) -> str:
    """A thread's scheduler state (R running, S sleeping, ...; "" once it has ended)."""
    try:
        with open(f"/proc/self/task/{tid}/stat") as f:
            stat = f.read()
    except OSError:
        return ""
    return stat[stat.rindex(")") + 2]  # after the name, which may hold spaces and parentheses


def _cpu_ns(tid: int) -> int | None:
    """CPU time a thread has used, in ns (schedstat: precise where stat counts ticks); None once it has ended."""
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _cpus_of(tid: int) -> set[int] | None:
    try:
        return os.sched_getaffinity(tid)
    except ProcessLookupError:  # it ended meanwhile
        return None


def native_threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()
