"""The judge's worker: runs inside a fresh, sandboxed process, one per candidate (or per trusted
reference). Reads one JSON command per line on stdin, answers one JSON line on a private pipe.

Started as `python -I -S -c BOOT` (confine.py), which confines the process and then runs this module.
Roles: reference (trusted, reference_ops.py) and candidate (candidate_ops.py).
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

import torch

from ..protocol import (Command, CompareRound, CompareSeed, Done, Exit, Failure, Load, MeasureCeilings, PrepareBaselines,
                        PrepareTiming, Probe, Profile, Release, RunSeed, SecondShape, Setup, Survey, Time, TimeReference, Vet,
                        decode_command, encode)
from .candidate_ops import CandidateOps
from .channel import Channel
from .reference_ops import ReferenceOps
from .rejection import CANDIDATE_FILE, MACHINE_ERRNOS, TASK_FILE, Rejection, device_oom, user_traceback


class Worker(ReferenceOps, CandidateOps):
    """One worker process's commands, of either role (the judge sends each role only its own)."""

    def op_exit(self, cmd: Exit) -> Done:
        return Done()

    def handler(self, cmd: Command) -> Callable[[Any], Any]:
        """The method that answers `cmd`."""
        return {
            Setup: self.op_setup, Survey: self.op_survey, Probe: self.op_probe, CompareSeed: self.op_compare,
            CompareRound: self.op_spot_check, PrepareTiming: self.op_prepare_timing, TimeReference: self.op_time_reference,
            PrepareBaselines: self.op_prepare_baselines, Vet: self.op_vet, MeasureCeilings: self.op_ceilings,
            Load: self.op_load, RunSeed: self.op_run_seed, Release: self.op_release, SecondShape: self.op_second_shape,
            Profile: self.op_profile, Time: self.op_time, Exit: self.op_exit,
        }[type(cmd)]


def warm_up(spare: bool) -> None:
    """Start the CUDA context and import Triton before the first command, and TorchDynamo in a `spare`
    worker (a candidate's load imports it, seconds on the critical path; a worker started on demand,
    as a task's trusted one mostly is, never needs it). A spare worker does this while it waits, so a
    candidate handed that worker waits only for its own task setup. It takes no device lock (no worker
    may reach the lock files): the judge stops its spare workers while it times one (`hold_still`)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES") and torch.cuda.is_available():
        torch.cuda.set_device(0)
        torch.empty(1, device="cuda")
    try:
        import triton  # noqa: F401
    except ImportError:
        pass
    if spare:
        import torch._dynamo as _dynamo  # noqa: F401 - `as`: a plain import would make `torch` local to this function


def failure(worker: Worker, e: BaseException) -> Failure:
    """The answer for a command that raised. A trusted worker's own failure for lack of memory or
    disk is the judge's (never the task's or a candidate's); a candidate out of device memory is
    marked, since a device shared with other evaluations may be why."""
    if isinstance(e, Rejection):
        return Failure(e.status, str(e), **e.details)
    message = user_traceback(e, (TASK_FILE, CANDIDATE_FILE))
    oom = device_oom(e)
    machine = oom or isinstance(e, MemoryError) or isinstance(e, OSError) and e.errno in MACHINE_ERRNOS
    if getattr(worker, "role", "") == "reference" and machine:
        return Failure("judge_error", f"the trusted reference worker failed: {message}", oom)
    return Failure("runtime_error", message, oom)

def main() -> None:
    """argv: the answer pipe's fd, the fd socket's fd, this worker's memory file's fd, 1 for a spare worker."""
    import socket
    channel = Channel(os.fdopen(int(sys.argv[1]), "w"), sys.stdin)
    fd_socket = socket.socket(fileno=int(sys.argv[2])) if len(sys.argv) > 2 else None
    memfd = int(sys.argv[3]) if len(sys.argv) > 3 else None
    warm_up(spare=sys.argv[4:5] == ["1"])
    worker = Worker(channel, fd_socket, memfd)
    while (line := channel.read()) is not None:
        try:
            cmd = decode_command(line)
            result = worker.handler(cmd)(cmd)
        except BaseException as e:  # noqa: BLE001 - SystemExit from candidate code included
            result = failure(worker, e)
        channel.write(encode(result))
        if line.get("op") == "exit":
            break


if __name__ == "__main__":
    main()
