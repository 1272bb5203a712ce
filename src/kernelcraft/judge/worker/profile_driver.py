"""The process of one kernel profile pass (judge/profiler.py starts it confined, as a worker, under ncu or
alone): builds the task's inputs and the candidate's ModelNew as a worker does, warms it up, then runs one
forward call for the profiler.

In its scratch (its cwd) it reads the judge's ProfileSpec (protocol.PROFILE_SPEC) and writes a
ProfileOutput (protocol.PROFILE_OUTPUT), which the judge reads back as untrusted input. Mode "ncu": the
call between cudaProfilerStart and cudaProfilerStop, which ncu (--profile-from-start off) profiles; mode
"torch": the call under torch.profiler, its kernels (CPU: operators) in the output. Either way the paths
of the candidate's extension binaries go in the output.

The candidate's extensions come from the judge's build cache (built there by the candidate's verdict), so
nothing is compiled again, and nothing is built here."""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch
from torch.autograd import DeviceType

from ...tasks import runtime
from ..protocol import OWN_CODE, PROFILE_OUTPUT, PROFILE_SPEC, ProfiledKernel, ProfileOutput, ProfileSpec, decode_profile_spec, encode
from .buildcache import BuildRecorder
from .rejection import CANDIDATE_FILE, TASK_FILE, judge_write
from .state import apply_limits

WARMUP_CALLS = 2  # Triton compiles and autotunes in the first call; neither belongs in a profile
_FORWARD = "kernelcraft_forward"


def _call(model: Any, xs: list[Any], device: torch.device) -> None:
    model(*xs)
    if device.type == "cuda":
        torch.cuda.synchronize()


def kernel_times(prof: Any, device: torch.device) -> list[ProfiledKernel]:
    """The profiler's kernels (on the CPU, its operators by self CPU time, and the forward's time outside
    them as OWN_CODE)."""
    rows = []
    for e in prof.key_averages():
        if device.type == "cuda" and e.device_type == DeviceType.CPU:
            continue  # operators and launch calls: their kernels are listed apart
        us = float(e.device_time_total if device.type == "cuda" else e.self_cpu_time_total)
        if us > 0:
            rows.append(ProfiledKernel(OWN_CODE if e.key == _FORWARD else e.key, int(e.count), us))
    return rows


def _profile(spec: ProfileSpec, model: Any, xs: list[Any], device: torch.device) -> list[ProfiledKernel]:
    """One forward call profiled as `spec.mode` says, after the warm-up calls: the profiler's kernels (none for ncu)."""
    with torch.no_grad():
        for _ in range(WARMUP_CALLS):
            _call(model, xs, device)
        if spec.mode == "ncu":
            torch.cuda.profiler.start()
            _call(model, xs, device)
            torch.cuda.profiler.stop()
            return []
        activities = [torch.profiler.ProfilerActivity.CPU]
        if device.type == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        # On the CPU an extension's functions are no operators: the forward's own range holds their time.
        forward = torch.profiler.record_function(_FORWARD) if device.type == "cpu" else nullcontext()
        with torch.profiler.profile(activities=activities) as prof, forward:
            _call(model, xs, device)
    return kernel_times(prof, device)


def main() -> None:
    spec = decode_profile_spec(json.loads(Path(PROFILE_SPEC).read_text()))
    apply_limits(spec.config, spec.device)
    device = torch.device("cuda", 0) if spec.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
        p = torch.cuda.get_device_properties(0)
        capability = f"{p.major}.{p.minor}"  # the judge's device, this process's device 0: the same build keys
    else:
        torch.set_num_threads(spec.config.cpu_threads)
        capability = ""
    dtype = runtime.torch_dtype(spec.dtype)
    # As a worker does: Triton reads a kernel's source from its file, and a traceback names the file's lines.
    judge_write(TASK_FILE, spec.task_source)
    judge_write(CANDIDATE_FILE, spec.candidate_source)
    task = runtime.exec_module(spec.task_source, TASK_FILE, "kernelcraft_task", spec.sizes)
    built: list[str] = []  # the extensions' shared objects: which kernels are the candidate's own (worker/kernel_names.py)
    BuildRecorder(Path(spec.cache_dir), spec.judge_uid, capability,
                  lambda module, functions: built.append(getattr(module, "__file__", None) or ""), ask=None).install()
    candidate = runtime.exec_module(spec.candidate_source, CANDIDATE_FILE, "kernelcraft_candidate")
    model = runtime.build_model(candidate.ModelNew, runtime.make_init_inputs(task), spec.seed, device, dtype)
    xs = runtime.make_inputs(task, spec.seed, device, dtype)
    kernels = _profile(spec, model, xs, device)
    Path(PROFILE_OUTPUT).write_text(json.dumps(encode(ProfileOutput([b for b in built if b], kernels))))


if __name__ == "__main__":
    main()
