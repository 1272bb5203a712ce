"""The state a worker holds between commands, and the setup every worker starts with: its role,
device, limits, the task's module and reference model. reference_ops.py and candidate_ops.py add the
commands of each role (loop.py puts them together)."""

from __future__ import annotations

import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

import torch

from ...tasks import runtime
from ..config import JudgeConfig
from ..protocol import Done, PrepareTiming, Setup, SetupDone
from .channel import Channel
from .expected import Expected
from .guards import ThreadWatch, pin_precision
from .launches import LaunchCounter
from .rejection import TASK_FILE, Rejection, judge_write, user_traceback


def process_cap() -> int:
    """How many processes (threads count too) the workers' user may have at once. The count is the user's,
    machine-wide: every worker of every judge here runs as that one user, and a torch process on a large
    host starts a thread per core. A fixed 4,096 likely ran out on 64 cores beside a 24-worker pool and its
    builds (a Triton candidate's ptxas failed with EAGAIN: an honest candidate's runtime_error). A fork bomb
    still stops at a quarter of the machine's pids."""
    try:
        with open("/proc/sys/kernel/pid_max") as f:
            pid_max = int(f.read())
    except (OSError, ValueError):
        pid_max = 32768
    return max(4096, min(128 * (os.cpu_count() or 1), pid_max // 4))


def apply_limits(cfg: JudgeConfig, device: str) -> None:
    """The worker's resource limits: no core files, files and (on the CPU) memory as configured, processes capped."""
    gb = 1 << 30
    limits = [(resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, int(cfg.file_size_limit_gb * gb))]
    if device == "cpu":  # CUDA reserves a huge virtual address space; only cpu workers get a cap
        limits.append((resource.RLIMIT_AS, int(cfg.memory_limit_gb * gb)))
    if hasattr(resource, "RLIMIT_NPROC") and os.getuid() != 0:
        limits.append((resource.RLIMIT_NPROC, process_cap()))
    for which, value in limits:
        soft, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, hard))


def poison(outputs: list[Any]) -> None:
    """Fill outputs with NaN (or -1): the reference's answer never lingers in freed memory."""
    for o in outputs:
        if isinstance(o, torch.Tensor) and o.numel():
            o.detach().fill_(float("nan") if o.is_floating_point() else -1)


class WorkerState:
    """What one worker process holds: set up once (`op_setup`), then the commands of its role."""

    def __init__(self, channel: Channel | None = None, fd_socket: Any = None, memfd: int | None = None) -> None:
        self.channel = channel  # None only where a test drives a Worker in its own process
        self.fd_socket = fd_socket  # the parent passes other workers' memory files here (comparisons on the CPU)
        self.memfd = memfd  # this worker's memory file, for its outputs on the CPU
        self.held: Any = None  # one seed's outputs, shared until op_release
        self.expected: Expected | None = None
        self.native0: int | None = None
        self.cfg = JudgeConfig()
        self.timing_sets: tuple[tuple[int, ...], list[list[Any]]] | None = None
        self.compiled: Any = None  # the reference under torch.compile (op_prepare_baselines)

    def op_setup(self, cmd: Setup) -> SetupDone:
        if self.channel is not None:
            self.channel.nonce = cmd.nonce
        self.role = cmd.role
        self.cfg = cmd.config
        self.device_kind = cmd.device
        apply_limits(self.cfg, self.device_kind)
        if self.device_kind == "cuda":
            if not torch.cuda.is_available():
                raise Rejection("judge_error", "no CUDA device is visible to the worker (a lost device?)")
            self.device = torch.device("cuda", 0)
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cpu")
            torch.set_num_threads(self.cfg.cpu_threads)
            # The reference's thread count for the candidate's own OpenMP runtime too (an extension built
            # with -fopenmp may link a libgomp other than torch's): it reads this when the extension loads.
            os.environ["OMP_NUM_THREADS"] = str(self.cfg.cpu_threads)
        pin_precision(self.cfg.allow_tf32)
        self.dtype = runtime.torch_dtype(cmd.dtype)
        self.atol, self.rtol = cmd.atol, cmd.rtol
        self.init_seed = cmd.init_seed
        self.cache_root = Path(cmd.cache_dir)
        self.judge_uid = int(cmd.judge_uid)  # the shared caches' files are the judge's user's (integrity.py)
        self.capability = str(cmd.capability)
        if cmd.task_source is None:
            return SetupDone()
        judge_write(TASK_FILE, cmd.task_source)
        t0 = time.perf_counter()
        try:
            self.task = runtime.exec_module(cmd.task_source, TASK_FILE, "kernelcraft_task", cmd.sizes or {})
            self.init_inputs = runtime.make_init_inputs(self.task)
            self.reference = runtime.build_model(self.task.Model, self.init_inputs, self.init_seed, self.device, self.dtype)
        except Exception as e:  # noqa: BLE001 - any failure of task code is reported, not raised
            raise Rejection("task_error", user_traceback(e, (TASK_FILE,))) from None
        task_setup_s = time.perf_counter() - t0
        self.counter = LaunchCounter()
        self.threads = ThreadWatch(self.cfg.cpu_threads if self.device.type == "cpu" else None)
        return SetupDone(self.env(), task_setup_s)

    def env(self) -> dict[str, Any]:
        env = {"torch": torch.__version__, "python": sys.version.split()[0], "device_kind": self.device_kind}
        if self.device_kind == "cuda":
            p = torch.cuda.get_device_properties(0)
            env.update(device_name=p.name, capability=f"{p.major}.{p.minor}", sm_count=p.multi_processor_count,
                       memory_gb=round(p.total_memory / 2**30, 1), cuda=torch.version.cuda, device_uuid=str(p.uuid))
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

    def op_prepare_timing(self, cmd: PrepareTiming) -> Done:
        """Make the timing inputs before the parent takes the device lock: generating large inputs
        takes longer than timing them, and nothing else needs the device meanwhile."""
        self.timing_sets = (tuple(cmd.seeds), [self.inputs(s) for s in cmd.seeds])
        return Done()

    def timing_inputs(self, seeds: list[int]) -> list[list[Any]]:
        if self.timing_sets and self.timing_sets[0] == tuple(seeds):
            return self.timing_sets[1]
        return [self.inputs(s) for s in seeds]
