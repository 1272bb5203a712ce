"""The parent's end of one sandboxed worker: a process started confined (sandbox.launch_confined), its
commands and answers (protocol.py) on a pipe of its own, each answer carrying a nonce the candidate never
sees in its output, so nothing the candidate prints can pose as the judge; a Unix socket and a memory file
for the outputs it shares (worker/exchange.py)."""

from __future__ import annotations

import json
import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from .protocol import Command, Exit, ProtocolError, Reply, Setup, decode_answer, encode
from .sandbox import ProcessGroup, hold_group, kill_leftovers, launch_confined, scrubbed_env
from .scratch import make_scratch


class WorkerTimeout(Exception):
    pass


class WorkerDied(Exception):
    """The worker's process ended. `outside`: killed by SIGKILL that the judge did not send (the
    kernel's out-of-memory killer, or an operator), which is no verdict on what it ran."""

    def __init__(self, message: str, returncode: int | None, outside: bool = False) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.outside = outside



def _describe_exit(code: int | None) -> str:
    if code is None:
        return "the worker stopped answering"
    if code < 0:
        try:
            return f"the worker was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"the worker was killed by signal {-code}"
    return f"the worker exited with code {code}"



class WorkerProcess(ProcessGroup):
    """A sandboxed worker; use as a context manager so its process group always dies."""

    def __init__(self, device: str, device_index: int, cache_dir: Path, build_jobs: int = 1,
                 pid_namespace: bool | None = None, cpus: frozenset[int] | None = None, spare: bool = False) -> None:
        """`pid_namespace`: whether the worker gets a PID namespace of its own; by default on the CPU only
        (isolation.command says why). `cpus`: the host CPUs it runs on (None: all of the judge's). `spare`:
        started ahead of need, it also imports what a candidate's load would (loop.warm_up)."""
        self.scratch = make_scratch(cache_dir, "w-")
        self.nonce = secrets.token_hex(16)
        self.started = time.perf_counter()
        read_fd, write_fd = os.pipe()
        # A Unix socket to pass it other workers' memory files (a trusted worker comparing CPU outputs),
        # and its own memory file, where its CPU outputs are handed over (worker/exchange.py).
        self._fd_socket, child_socket = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.memfd = os.memfd_create("kc-outputs", os.MFD_CLOEXEC)
        self._log = open(self.scratch / "worker.log", "wb")
        proc = launch_confined(
            "kernelcraft.judge.worker.loop", [str(write_fd), str(child_socket.fileno()), str(self.memfd), str(int(spare))],
            self.scratch, scrubbed_env(device, device_index, cache_dir, self.scratch, build_jobs), cache_dir,
            pid_namespace=device != "cuda" if pid_namespace is None else pid_namespace,
            stdin=subprocess.PIPE, stdout=self._log, stderr=subprocess.STDOUT,
            pass_fds=(write_fd, child_socket.fileno(), self.memfd), cpus=cpus,
        )
        os.close(write_fd)
        child_socket.close()
        self._fd = read_fd
        self._buf = b""
        super().__init__(proc, hold_group(device, device_index, cpus))

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

    def call(self, cmd: Command, timeout: float, on_request: Callable[[dict[str, Any]], Reply] | None = None) -> Any:
        """Send one command; wait at most `timeout` seconds for its answer (protocol.ANSWERS, or a
        Failure), not counting the time the worker was stopped while another was timed, nor the time
        `on_request` took. Before its answer the worker may ask the judge for things it must not do
        itself (a line with "request"): `on_request` reads each (protocol.decode_request) and replies,
        and a request the command does not expect kills the worker. A request is untrusted input: the
        candidate can write one as well as the worker can. An answer that is not one is a ProtocolError."""
        if isinstance(cmd, Setup):
            cmd = replace(cmd, nonce=self.nonce)
        self._send(encode(cmd))
        deadline = time.monotonic() + timeout - self.stopped_s()
        while True:
            line = self._read_line(deadline, timeout)
            if "request" not in line:
                return decode_answer(cmd, line)
            if on_request is None:
                self.kill()
                raise WorkerDied(f"the worker asked for {str(line['request'])[:40]!r}, which this command does not expect", None)
            t0 = time.monotonic()
            reply = on_request(line)
            deadline += time.monotonic() - t0
            self._send(encode(reply))

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
        del answer["nonce"]
        return answer

    def send_fd(self, fd: int) -> None:
        """Pass a file descriptor to the worker (it receives it with worker/exchange.receive_fd)."""
        socket.send_fds(self._fd_socket, [b"f"], [fd])

    def close(self) -> None:
        if self.proc.poll() is None and not self.is_stopped():
            try:
                self.call(Exit(), timeout=5)
            except (WorkerTimeout, WorkerDied, ProtocolError, OSError, ValueError):
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
