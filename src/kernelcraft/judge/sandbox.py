"""Parent side of isolation: one fresh worker process per candidate (or trusted reference), and one
builder process per extension a candidate asks the judge to build (builds.py). Both start confined
in `launch_confined` (isolation.py: another user, namespaces, Landlock, isolated Python).

The worker gets its own scratch directory as cwd, HOME and build directory, a scrubbed environment
(no API keys), its device through CUDA_VISIBLE_DEVICES, rlimits, and its own process group, which
is killed whole on a timeout and when the worker is closed. Answers come on a private pipe, each
carrying a nonce the candidate never sees in its output, so nothing the candidate prints can pose as
the judge.

While one worker is timed (`hold_still`), every other worker and builder of this process is stopped,
with the compilers it runs: a neighbour's build or start-up slows a short call's host part several times over.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import kernelcraft

from .integrity import make_dir
from .isolation import command, hand_over, policy, warn_if_incomplete

_KEEP_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "CC", "CXX",
             "VIRTUAL_ENV", "CONDA_PREFIX", "TORCH_CUDA_ARCH_LIST", "NVIDIA_DRIVER_CAPABILITIES")


_PR_SET_CHILD_SUBREAPER = 36
_SUBREAPER = False  # set once this process is the subreaper of its workers' orphans
_LIVE: set["ProcessGroup"] = set()  # workers (and builders) not yet closed, so an interrupted run can kill them all
_TIMED: set["ProcessGroup"] = set()  # workers being timed now: every other live worker or builder is stopped
_LIVE_LOCK = threading.Lock()


def kill_all_workers() -> None:
    """Kill every live worker's process group (workers run in their own sessions, so a Ctrl-C
    in the terminal does not reach them)."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for w in live:
        w.kill()


atexit.register(kill_all_workers)


def live_worker_pids() -> set[int]:
    """Process ids of the workers started and not yet closed (running or spare)."""
    with _LIVE_LOCK:
        return {w.proc.pid for w in _LIVE}


@contextmanager
def hold_still(timed: "WorkerProcess") -> Iterator[None]:
    """While `timed` is measured, stop every other live worker's process group (SIGSTOP: their
    builds, compilers and start-ups wait) and continue them when no worker is timed any more.
    Their call timeouts do not count the stopped time. Workers of other devices' judges in this
    process stop too; one being timed itself runs on."""
    with _LIVE_LOCK:
        _TIMED.add(timed)
        timed._cont()
        for w in _LIVE - _TIMED:
            w._stop()
    try:
        yield
    finally:
        with _LIVE_LOCK:
            _TIMED.discard(timed)
            if not _TIMED:
                for w in _LIVE:
                    w._cont()


@contextmanager
def awake(w: "WorkerProcess") -> Iterator[None]:
    """`w` runs while a measurement holds the others still (the trusted worker, for a spot check the
    timed worker waits on), and is stopped again after if a measurement still does."""
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
                if _TIMED:
                    w._stop()
                else:  # every measurement ended meanwhile: all go on, as hold_still leaves them
                    for other in _LIVE:
                        other._cont()


class WorkerTimeout(Exception):
    pass


class WorkerDied(Exception):
    """The worker's process ended. `outside`: killed by SIGKILL that the judge did not send (the
    kernel's out-of-memory killer, or an operator), which is no verdict on what it ran."""

    def __init__(self, message: str, returncode: int | None, outside: bool = False) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.outside = outside


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
        CUDA_VISIBLE_DEVICES=str(device_index) if device == "cuda" else "",
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


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "the worker stopped answering"
    if code < 0:
        try:
            return f"the worker was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"the worker was killed by signal {-code}"
    return f"the worker exited with code {code}"


def make_scratch(cache_dir: Path, prefix: str) -> Path:
    """A fresh scratch directory for one untrusted process (a worker, a builder): its cwd, HOME and TMPDIR."""
    root = cache_dir / "scratch"
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=root))


def launch(argv: list[str], scratch: Path, env: dict[str, str], **popen: Any) -> subprocess.Popen:
    """Start a process of the judge's in `scratch` with `env` (scrubbed_env), in its own process group
    (Ctrl-C in the terminal does not reach it, a kill reaches all it started) in the judge's session:
    should the judge die while the group is stopped, the kernel continues and hangs up the orphaned
    group, which stopped sessions never get."""
    return subprocess.Popen(argv, cwd=scratch, env=env, process_group=0, **popen)


def launch_confined(module: str, args: list[str], scratch: Path, env: dict[str, str], cache_dir: Path,
                    pid_namespace: bool = True, **popen: Any) -> subprocess.Popen:
    """Start an untrusted process, `python -m module args` as it were: a worker, or a builder compiling
    a candidate's extension. The one place every such process starts, confined (isolation.py): it
    writes only `scratch`, which becomes its user's, and reads of the judge's cache only the
    published builds. Without `pid_namespace`, what it leaves running comes to the judge, which kills it."""
    warn_if_incomplete()
    hand_over(scratch)
    if not pid_namespace:
        _become_subreaper()
    # Made now if new: a worker may read only what exists as it starts, and the judge publishes later.
    builds = make_dir(cache_dir / "builds")
    argv, confined_env = command(args, policy(module, scratch, cache_dir, read=(builds,), pid_namespace=pid_namespace),
                                 pid_namespace)
    return launch(argv, scratch, {**env, **confined_env}, **popen)


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

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self._killed = False  # by the judge: any other SIGKILL came from outside (the kernel, out of memory)
        self._stopped_at: float | None = None
        self._stopped_s = 0.0
        self._worker_pid: int | None = None
        with _LIVE_LOCK:
            _LIVE.add(self)
            if _TIMED:  # started while another worker is timed: it waits like the others
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
                  timeout: float) -> tuple[int | None, float]:
    """Run an untrusted command to its end (a builder): its exit code (None when it ran past `timeout`
    seconds) and the seconds it ran, neither counting the time it was stopped while a worker was timed.
    Its output goes to `scratch`/output.log; whatever it started is killed with it."""
    started = time.monotonic()
    with open(scratch / "output.log", "wb") as log:
        group = ProcessGroup(launch_confined(module, args, scratch, env, cache_dir, stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT))
    try:
        while True:
            ran = time.monotonic() - started - group.stopped_s()
            if ran >= timeout:
                return None, ran
            try:
                code = group.proc.wait(timeout=min(timeout - ran, 1.0))
                return code, time.monotonic() - started - group.stopped_s()
            except subprocess.TimeoutExpired:
                continue
    finally:
        group.kill()
        group.forget()


class WorkerProcess(ProcessGroup):
    """A sandboxed worker; use as a context manager so its process group always dies."""

    def __init__(self, device: str, device_index: int, cache_dir: Path, build_jobs: int = 1,
                 pid_namespace: bool | None = None) -> None:
        """`pid_namespace`: whether the worker gets a PID namespace of its own; by default on the CPU only
        (isolation.command says why)."""
        self.scratch = make_scratch(cache_dir, "w-")
        self.nonce = secrets.token_hex(16)
        self.started = time.perf_counter()
        read_fd, write_fd = os.pipe()
        # A Unix socket to pass it other workers' memory files (a trusted worker comparing CPU outputs),
        # and its own memory file, where its CPU outputs are handed over (exchange.py).
        self._fd_socket, child_socket = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.memfd = os.memfd_create("kc-outputs", os.MFD_CLOEXEC)
        self._log = open(self.scratch / "worker.log", "wb")
        proc = launch_confined(
            "kernelcraft.judge.worker", [str(write_fd), str(child_socket.fileno()), str(self.memfd)],
            self.scratch, scrubbed_env(device, device_index, cache_dir, self.scratch, build_jobs), cache_dir,
            pid_namespace=device != "cuda" if pid_namespace is None else pid_namespace,
            stdin=subprocess.PIPE, stdout=self._log, stderr=subprocess.STDOUT,
            pass_fds=(write_fd, child_socket.fileno(), self.memfd),
        )
        os.close(write_fd)
        child_socket.close()
        self._fd = read_fd
        self._buf = b""
        super().__init__(proc)

    def __enter__(self) -> "WorkerProcess":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def log_tail(self, n: int = 2000) -> str:
        try:
            self._log.flush()
            data = (self.scratch / "worker.log").read_bytes()
        except OSError:
            return ""
        return data[-n:].decode(errors="replace").strip()

    def _send(self, message: dict[str, Any]) -> None:
        try:
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise WorkerDied(_describe_exit(self.proc.wait(timeout=5)), self.proc.returncode) from None

    def call(self, cmd: dict[str, Any], timeout: float,
             on_request: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> dict[str, Any]:
        """Send one command; wait at most `timeout` seconds for its answer, not counting the time the
        worker was stopped while another was timed, nor the time `on_request` took. Before its answer
        the worker may ask the judge for things it must not do itself (a line with "request"):
        `on_request` answers each, and a request the command does not expect kills the worker. A
        request is untrusted input: the candidate can write one as well as the worker can."""
        if cmd["op"] == "setup":
            cmd = {**cmd, "nonce": self.nonce}
        self._send(cmd)
        deadline = time.monotonic() + timeout - self.stopped_s()
        while True:
            answer = self._read_line(deadline, timeout)
            if "request" not in answer:
                return answer
            if on_request is None:
                self.kill()
                raise WorkerDied(f"the worker asked for {str(answer['request'])[:40]!r}, which this command does not expect", None)
            t0 = time.monotonic()
            reply = on_request(answer)
            deadline += time.monotonic() - t0
            self._send(reply)

    def _read_line(self, deadline: float, timeout: float) -> dict[str, Any]:
        while b"\n" not in self._buf:
            left = deadline + self.stopped_s() - time.monotonic()
            if left <= 0:
                self.kill()
                raise WorkerTimeout(f"no answer within {timeout:g} s")
            ready, _, _ = select.select([self._fd], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(self._fd, 1 << 16)
            if not chunk:
                try:
                    code = self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    code = None
                outside = code == -signal.SIGKILL and not self._killed
                self.kill()
                raise WorkerDied(_describe_exit(code) + (" (not by the judge: out of host memory?)" if outside else ""),
                                 code, outside)
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            answer = json.loads(line)
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or answer.get("nonce") != self.nonce:
            self.kill()
            raise WorkerDied("the worker's answer did not carry the judge's nonce (forged output?)", None)
        return answer

    def send_fd(self, fd: int) -> None:
        """Pass a file descriptor to the worker (it receives it with exchange.receive_fd)."""
        socket.send_fds(self._fd_socket, [b"f"], [fd])

    def close(self) -> None:
        with _LIVE_LOCK:
            stopped = self._stopped_at is not None  # it would answer only after the measurement
        if self.proc.poll() is None and not stopped:
            try:
                self.call({"op": "exit"}, timeout=5)
            except (WorkerTimeout, WorkerDied, OSError, ValueError):
                pass
        self.kill()  # the whole group: whatever the candidate started dies with it
        kill_leftovers()  # and what it started in sessions of their own (outside a PID namespace)
        for f in (self.proc.stdin, self._log):
            try:
                f.close()
            except OSError:
                pass
        for fd in (self._fd, self.memfd):
            try:
                os.close(fd)
            except OSError:
                pass
        self._fd_socket.close()
        shutil.rmtree(self.scratch, ignore_errors=True)
        self.forget()
