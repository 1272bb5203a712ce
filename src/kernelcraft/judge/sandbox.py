"""Parent side of isolation: one fresh worker process per candidate (or trusted reference).

The worker gets its own scratch directory as cwd and HOME, a scrubbed environment (no API keys),
its device through CUDA_VISIBLE_DEVICES, rlimits, and its own process group, which is killed
whole on a timeout and when the worker is closed. Answers come on a private pipe, each carrying
a nonce the candidate never sees, so nothing the candidate prints can pose as the judge.

While one worker is timed (`hold_still`), every other worker of this process is stopped, with the
compilers it runs: a neighbour's build or start-up slows a short call's host part several times over.
"""

from __future__ import annotations

import atexit
import json
import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import kernelcraft

_KEEP_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "CC", "CXX",
             "VIRTUAL_ENV", "CONDA_PREFIX", "TORCH_CUDA_ARCH_LIST", "NVIDIA_DRIVER_CAPABILITIES")


_LIVE: set["WorkerProcess"] = set()  # workers not yet closed, so an interrupted run can kill them all
_TIMED: set["WorkerProcess"] = set()  # workers being timed now: every other live worker is stopped
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
    env = {k: os.environ[k] for k in _KEEP_ENV if k in os.environ}
    src_root = str(Path(kernelcraft.__file__).resolve().parent.parent)
    env.update(
        HOME=str(scratch), TMPDIR=str(scratch), PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1",
        PYTHONPATH=src_root, MAX_JOBS=str(build_jobs),
        TORCH_EXTENSIONS_DIR=str(cache_dir / "torch_extensions"), TRITON_CACHE_DIR=str(cache_dir / "triton"),
        CUDA_VISIBLE_DEVICES=str(device_index) if device == "cuda" else "",
        KERNELCRAFT_LOCK_DIR=str(cache_dir),  # the device lock (locks.py), taken by the worker's CUDA start
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


class WorkerProcess:
    """A sandboxed worker; use as a context manager so its process group always dies."""

    def __init__(self, device: str, device_index: int, cache_dir: Path, build_jobs: int = 1) -> None:
        scratch_root = cache_dir / "scratch"
        scratch_root.mkdir(parents=True, exist_ok=True)
        self.scratch = Path(tempfile.mkdtemp(prefix="w-", dir=scratch_root))
        self.nonce = secrets.token_hex(16)
        self.started = time.perf_counter()
        read_fd, write_fd = os.pipe()
        # A Unix socket to pass it other workers' memory files (a trusted worker comparing CPU outputs),
        # and its own memory file, where its CPU outputs are handed over (exchange.py).
        self._fd_socket, child_socket = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.memfd = os.memfd_create("kc-outputs", os.MFD_CLOEXEC)
        self._killed = False  # by the judge: any other SIGKILL came from outside (the kernel, out of memory)
        self._log = open(self.scratch / "worker.log", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kernelcraft.judge.worker", str(write_fd), str(child_socket.fileno()), str(self.memfd)],
            stdin=subprocess.PIPE, stdout=self._log, stderr=subprocess.STDOUT, cwd=self.scratch,
            env=scrubbed_env(device, device_index, cache_dir, self.scratch, build_jobs),
            # Its own process group (Ctrl-C in the terminal does not reach it, a kill reaches all it
            # started) in the judge's session: should the judge die while the group is stopped,
            # the kernel continues and hangs up the orphaned group, which stopped sessions never get.
            pass_fds=(write_fd, child_socket.fileno(), self.memfd), process_group=0,
        )
        os.close(write_fd)
        child_socket.close()
        self._fd = read_fd
        self._buf = b""
        self._stopped_at: float | None = None
        self._stopped_s = 0.0
        with _LIVE_LOCK:
            _LIVE.add(self)
            if _TIMED:  # started while another worker is timed: it waits like the others
                self._stop()

    def __enter__(self) -> "WorkerProcess":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

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
        """Seconds this worker has spent stopped by hold_still, so far."""
        with _LIVE_LOCK:
            ongoing = time.monotonic() - self._stopped_at if self._stopped_at is not None else 0.0
            return self._stopped_s + ongoing

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

    def kill(self) -> None:
        self._killed = True
        self._signal(signal.SIGKILL)  # a stopped process dies of it too
        try:  # until it is gone: its device memory is free only then, and the next evaluation counts on it
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass

    def close(self) -> None:
        with _LIVE_LOCK:
            stopped = self._stopped_at is not None  # it would answer only after the measurement
        if self.proc.poll() is None and not stopped:
            try:
                self.call({"op": "exit"}, timeout=5)
            except (WorkerTimeout, WorkerDied, OSError, ValueError):
                pass
        self.kill()  # the whole group: whatever the candidate started dies with it
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
        with _LIVE_LOCK:
            _LIVE.discard(self)
            _TIMED.discard(self)
