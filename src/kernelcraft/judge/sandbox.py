"""Parent side of isolation: the untrusted processes, one fresh worker per candidate (or trusted
reference: worker_process.py), one builder per extension a candidate asks the judge to build
(builds.py), and each pass of a kernel profile (profiler.py). All start confined in `launch_confined`
(isolation.py: another user, namespaces, Landlock, isolated Python).

The worker gets its own scratch directory as cwd, HOME and build directory, a scrubbed environment
(no API keys), its device through CUDA_VISIBLE_DEVICES, rlimits, and its own process group, which
is killed whole on a timeout and when the worker is closed. Answers come on a private pipe, each
carrying a nonce the candidate never sees in its output, so nothing the candidate prints can pose as
the judge.

While one worker is timed (`hold_still`), every other worker and builder of its device is stopped, with
the compilers it runs: a neighbour's build or start-up slows a short call's host part several times over.
Another device's processes run on: a pool of several devices gives each its own host CPUs
(device.cpu_slices), so they never share a core with the timed call, and one device's measurement no
longer stops every other device's work (two GPUs judged 1.26x faster than one while it did).
"""

from __future__ import annotations

import atexit
import ctypes
import os
import signal
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import kernelcraft

from .device import device_key, visible_id
from .integrity import make_dir
from .isolation import Allowance, command, hand_over, policy, warn_if_incomplete
from .scratch import release as release_scratch

_KEEP_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "CC", "CXX",
             "VIRTUAL_ENV", "CONDA_PREFIX", "TORCH_CUDA_ARCH_LIST", "NVIDIA_DRIVER_CAPABILITIES")


_PR_SET_CHILD_SUBREAPER = 36
_SUBREAPER = False  # set once this process is the subreaper of its workers' orphans
_LIVE: set["ProcessGroup"] = set()  # workers (and builders) not yet closed, so an interrupted run can kill them all
_TIMED: set["ProcessGroup"] = set()  # workers being timed now: every other live worker or builder of their device is stopped
_LIVE_LOCK = threading.Lock()


def kill_all_workers() -> None:
    """Kill every live worker's process group (workers run in their own sessions, so a Ctrl-C
    in the terminal does not reach them)."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for w in live:
        w.kill()


def shutdown() -> None:
    """The judge process's last act, however it ends but killed outright: every live worker and builder
    killed, then their scratch removed (scratch.release)."""
    kill_all_workers()
    release_scratch()


atexit.register(shutdown)


def live_worker_pids() -> set[int]:
    """Process ids of the workers started and not yet closed (running or spare)."""
    with _LIVE_LOCK:
        return {w.proc.pid for w in _LIVE}


def hold_group(device: str, device_index: int, cpus: frozenset[int] | None) -> str:
    """Which processes a measurement stops together (ProcessGroup.group): a device's own where its processes run
    on host CPUs of their own (a pool's slice), else every process of this judge, whatever its device: without
    CPUs of their own, another device's work would share a core with the timed call."""
    return device_key(device, device_index) if cpus is not None else "host"


def _timed(group: str) -> bool:
    """Under _LIVE_LOCK: whether a worker of the device `group` is being timed now."""
    return any(t.group == group for t in _TIMED)


def _continue(group: str) -> None:
    """Under _LIVE_LOCK: every live process of the device `group` goes on."""
    for w in _LIVE:
        if w.group == group:
            w._cont()


@contextmanager
def hold_still(timed: "ProcessGroup") -> Iterator[None]:
    """While `timed` is measured, stop every other live worker's process group of its device (SIGSTOP:
    their builds, compilers and start-ups wait) and continue them when none of that device is timed any
    more. Their call timeouts do not count the stopped time. Another device's processes run on where
    they have CPUs of their own (hold_group); one being timed itself runs on."""
    with _LIVE_LOCK:
        _TIMED.add(timed)
        timed._cont()
        for w in _LIVE - _TIMED:
            if w.group == timed.group:
                w._stop()
    try:
        yield
    finally:
        with _LIVE_LOCK:
            _TIMED.discard(timed)
            if not _timed(timed.group):
                _continue(timed.group)


@contextmanager
def awake(w: "ProcessGroup") -> Iterator[None]:
    """`w` runs while a measurement holds the others still (the trusted worker, for a spot check the
    timed worker waits on), and is stopped again after if a measurement of its device still does."""
    with _LIVE_LOCK:
        added = w not in _TIMED
        _TIMED.add(w)
        w._cont()
    try:
        yield
    finally:
        with _LIVE_LOCK:
            if added:
                _TIMED.discard(w)
                if _timed(w.group):
                    w._stop()
                else:  # every measurement of its device ended meanwhile: all go on, as hold_still leaves them
                    _continue(w.group)


def scrubbed_env(device: str, device_index: int, cache_dir: Path, scratch: Path, build_jobs: int) -> dict[str, str]:
    """An untrusted process's environment: nothing of the judge's but what it needs. Its compile
    caches are its own (in `scratch`): a cache shared between candidates is a way for one to poison
    another's (the judge's build cache is shared, and only the judge writes it)."""
    env = {k: os.environ[k] for k in _KEEP_ENV if k in os.environ}
    src_root = str(Path(kernelcraft.__file__).resolve().parent.parent)
    env.update(
        HOME=str(scratch), TMPDIR=str(scratch), PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1",
        PYTHONPATH=src_root, MAX_JOBS=str(build_jobs),
        TORCH_EXTENSIONS_DIR=str(scratch / "torch_extensions"), TRITON_CACHE_DIR=str(scratch / "triton"),
        CUDA_VISIBLE_DEVICES=visible_id(device_index) if device == "cuda" else "",
    )
    if device == "cpu":
        # OpenMP runtimes read these as they load (torch's at the worker's start, before its config is
        # known: the worker sets cpu_threads). PASSIVE: a pool's idle threads sleep at once instead of
        # spinning for milliseconds, taking the CPU from the other side's timed call.
        # glibc's malloc, fixed: it keeps what is freed (up to 32 MB a block from its heap). Left to its
        # own thresholds it may give the heap's top back after each round, and the side that allocates
        # first in the next round (the candidate) faults its output's pages in inside the timed call,
        # the other reusing them: an honest ReLU timed at 0.2x, in a third of runs once the judge's
        # requests between calls had moved the heap's small blocks.
        env.update(TRITON_INTERPRET="1", OMP_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE",
                   MALLOC_MMAP_THRESHOLD_=str(32 << 20), MALLOC_TRIM_THRESHOLD_=str(1 << 40))
    return env


def launch(argv: list[str], scratch: Path, env: dict[str, str], cpus: frozenset[int] | None = None,
           **popen: Any) -> subprocess.Popen:
    """Start a process of the judge's in `scratch` with `env` (scrubbed_env), in its own process group
    (Ctrl-C in the terminal does not reach it, a kill reaches all it started) in the judge's session:
    should the judge die while the group is stopped, the kernel continues and hangs up the orphaned
    group, which stopped sessions never get. `cpus`: the host CPUs it (and all it starts) may run on."""
    if cpus is None or not hasattr(os, "sched_setaffinity"):
        return subprocess.Popen(argv, cwd=scratch, env=env, process_group=0, **popen)
    # A child takes the CPUs of the thread that starts it (pid 0 is the calling thread), and everything it
    # starts takes its own: no window where the process runs elsewhere first.
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        return subprocess.Popen(argv, cwd=scratch, env=env, process_group=0, **popen)
    finally:
        os.sched_setaffinity(0, before)


def launch_confined(module: str, args: list[str], scratch: Path, env: dict[str, str], cache_dir: Path,
                    pid_namespace: bool = True, cpus: frozenset[int] | None = None, read: tuple[Path, ...] = (),
                    allow: Allowance = Allowance(), **popen: Any) -> subprocess.Popen:
    """Start an untrusted process, `python -m module args` as it were: a worker, a builder compiling
    a candidate's extension, a kernel profile's driver (or ncu, which starts it). The one place every such
    process starts, confined (isolation.py): it writes only `scratch`, which becomes its user's, and reads of the
    judge's cache only the published builds (and `read`); `allow`: what else it may have. Without
    `pid_namespace`, what it leaves running comes to the judge, which kills it."""
    warn_if_incomplete()
    if not pid_namespace:
        _become_subreaper()
    # Made now if new: a worker may read only what exists as it starts, and the judge publishes later.
    builds = make_dir(cache_dir / "builds")
    pol = policy(module, scratch, cache_dir, read=(builds, *read), pid_namespace=pid_namespace, allow=allow)
    hand_over(scratch, pol.uid, pol.gid)
    argv, confined_env = command(args, pol, pid_namespace)
    return launch(argv, scratch, {**env, **confined_env}, cpus, **popen)


def _become_subreaper() -> None:
    """Orphans of this process's descendants come to it, not to init: a confined process's daemon,
    in a session of its own, stays within reach (kill_leftovers)."""
    global _SUBREAPER
    if not _SUBREAPER:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        _SUBREAPER = True


def kill_leftovers() -> None:
    """Kill (and reap) what confined processes left running that came to this process as their
    subreaper: children of this process that carry the sandbox's mark (no_new_privs, which no process
    can clear) and are no live worker or builder of its own."""
    if not _SUBREAPER:  # orphans go to init or a worker's PID namespace: none can come here
        return
    me = os.getpid()
    for _ in range(50):
        with _LIVE_LOCK:
            live = {g.proc.pid for g in _LIVE}
        found = []
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit() or int(entry.name) in live:
                continue
            try:
                stat_line = Path(f"/proc/{entry.name}/stat").read_text()
                if int(stat_line.rsplit(")", 1)[1].split()[1]) != me:
                    continue
                marked = "\nNoNewPrivs:\t1" in Path(f"/proc/{entry.name}/status").read_text()
            except (OSError, ValueError, IndexError):
                continue
            if marked:
                found.append(int(entry.name))
        if not found:
            return
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass


class ProcessGroup:
    """An untrusted process's group, live until `forget`: stopped while another worker is timed
    (hold_still), killed whole by `kill` and when the judge exits."""

    def __init__(self, proc: subprocess.Popen, group: str) -> None:
        """`group`: the processes a measurement stops together (hold_group)."""
        self.proc = proc
        self.group = group
        self._killed = False  # by the judge: any other SIGKILL came from outside (the kernel, out of memory)
        self._stopped_at: float | None = None
        self._stopped_s = 0.0
        self._worker_pid: int | None = None
        with _LIVE_LOCK:
            _LIVE.add(self)
            if _timed(group):  # started while another worker of its device is timed: it waits like the others
                self._stop()

    @property
    def worker_pid(self) -> int:
        """The process's own id: the child of `unshare` where it runs in namespaces (the pid the judge
        started is unshare's), or that pid itself; 0 once it is gone."""
        if self._worker_pid is None:
            try:
                children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
            except OSError:
                return 0
            if "--fork" in self.proc.args:
                if not children:
                    return 0
                self._worker_pid = int(children[0])
            else:
                self._worker_pid = self.proc.pid
        return self._worker_pid

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _stop(self) -> None:
        """Under _LIVE_LOCK: stop the process group (hold_still)."""
        if self._stopped_at is None:
            self._signal(signal.SIGSTOP)
            self._stopped_at = time.monotonic()

    def _cont(self) -> None:
        """Under _LIVE_LOCK: continue a group that _stop stopped."""
        if self._stopped_at is not None:
            self._signal(signal.SIGCONT)
            self._stopped_s += time.monotonic() - self._stopped_at
            self._stopped_at = None

    def is_stopped(self) -> bool:
        """Stopped by hold_still now (it would answer only after the measurement)."""
        with _LIVE_LOCK:
            return self._stopped_at is not None

    def stopped_s(self) -> float:
        """Seconds this group has spent stopped by hold_still, so far."""
        with _LIVE_LOCK:
            ongoing = time.monotonic() - self._stopped_at if self._stopped_at is not None else 0.0
            return self._stopped_s + ongoing

    def kill(self) -> None:
        self._killed = True
        self._signal(signal.SIGKILL)  # a stopped process dies of it too
        try:  # until it is gone: its device memory is free only then, and the next evaluation counts on it
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass

    def forget(self) -> None:
        with _LIVE_LOCK:
            _LIVE.discard(self)
            _TIMED.discard(self)


def run_untrusted(module: str, args: list[str], scratch: Path, env: dict[str, str], cache_dir: Path,
                  timeout: float, group: str, cpus: frozenset[int] | None = None,
                  read: tuple[Path, ...] = (), allow: Allowance = Allowance()) -> tuple[int | None, float]:
    """Run an untrusted command to its end (a builder, a profile pass): its exit code (None when it ran past
    `timeout` seconds) and the seconds it ran, neither counting the time it was stopped while a worker was timed.
    Its output goes to `scratch`/output.log (integrity.read_output reads it back); whatever it started is killed
    with it. `group` and `cpus`: the device it works for and the host CPUs it runs on (ProcessGroup, launch);
    `read` and `allow`: what else it reads and may have (launch_confined)."""
    started = time.monotonic()
    with open(scratch / "output.log", "wb") as log:
        running = ProcessGroup(launch_confined(module, args, scratch, env, cache_dir, cpus=cpus, read=read, allow=allow,
                                               stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT), group)
    try:
        while True:
            ran = time.monotonic() - started - running.stopped_s()
            if ran >= timeout:
                return None, ran
            try:
                code = running.proc.wait(timeout=min(timeout - ran, 1.0))
                return code, time.monotonic() - started - running.stopped_s()
            except subprocess.TimeoutExpired:
                continue
    finally:
        running.kill()
        running.forget()
