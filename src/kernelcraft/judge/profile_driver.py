"""The process a kernel profile runs (profiler.py starts it, under ncu or alone): builds the task's
inputs and the candidate's ModelNew, warms it up, then runs one forward call for the profiler.

argv: a JSON spec (profiler.py writes it). Mode "ncu": the call between cudaProfilerStart and
cudaProfilerStop, which ncu (--profile-from-start off) profiles; mode "torch": the call under
torch.profiler, its kernels (CPU: operators) written to the spec's `out` as JSON. Either way the paths
of the candidate's extension binaries go to the spec's `binaries`.

Like the worker, it imports only the standard library and torch (Triton when the candidate does);
the candidate's extensions come from the judge's build cache (built there by the candidate's verdict),
so nothing is compiled again, and nothing is built here."""

from __future__ import annotations

import json
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch
from torch.autograd import DeviceType

from ..tasks import runtime
from .worker.buildcache import BuildRecorder
from .device import describe_device
from .kernel_profile import OWN_CODE

WARMUP_CALLS = 2  # Triton compiles and autotunes in the first call; neither belongs in a profile
_FORWARD = "kernelcraft_forward"


def _call(model: Any, xs: list[Any], device: torch.device) -> None:
    model(*xs)
    if device.type == "cuda":
        torch.cuda.synchronize()


def kernel_times(prof: Any, device: torch.device) -> list[dict[str, Any]]:
    """The profiler's kernels (on the CPU, its operators by self CPU time, and the forward's time outside
    them as OWN_CODE): name, calls, time in us."""
    rows = []
    for e in prof.key_averages():
        if device.type == "cuda" and e.device_type == DeviceType.CPU:
            continue  # operators and launch calls: their kernels are listed apart
        us = float(e.device_time_total if device.type == "cuda" else e.self_cpu_time_total)
        if us > 0:
            rows.append({"name": OWN_CODE if e.key == _FORWARD else e.key, "calls": int(e.count), "time_us": us})
    return rows


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    device = torch.device("cuda", 0) if spec["device"] == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(spec["threads"])
    dtype = runtime.torch_dtype(spec["dtype"])
    task = runtime.exec_module(spec["task_source"], "task.py", "kernelcraft_task", spec["sizes"])
    built: list[str] = []  # the extensions' shared objects: which kernels are the candidate's own (worker/kernel_names.py)
    # The judge's device is this process's device 0: the same capability, so the same build keys.
    BuildRecorder(Path(spec["cache_dir"]), spec["judge_uid"], describe_device(spec["device"], 0).capability,
                  lambda module, functions: built.append(getattr(module, "__file__", None) or ""), ask=None).install()
    candidate = runtime.exec_module(spec["candidate_source"], "candidate.py", "kernelcraft_candidate")
    Path(spec["binaries"]).write_text(json.dumps([b for b in built if b]))
    model = runtime.build_model(candidate.ModelNew, runtime.make_init_inputs(task), spec["seed"], device, dtype)
    xs = runtime.make_inputs(task, spec["seed"], device, dtype)
    with torch.no_grad():
        for _ in range(WARMUP_CALLS):
            _call(model, xs, device)
        if spec["mode"] == "ncu":
            torch.cuda.profiler.start()
            _call(model, xs, device)
            torch.cuda.profiler.stop()
            return
        activities = [torch.profiler.ProfilerActivity.CPU]
        if device.type == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        # On the CPU an extension's functions are no operators: the forward's own range holds their time.
        forward = torch.profiler.record_function(_FORWARD) if device.type == "cpu" else nullcontext()
        with torch.profiler.profile(activities=activities) as prof, forward:
            _call(model, xs, device)
    Path(spec["out"]).write_text(json.dumps(kernel_times(prof, device)))


if __name__ == "__main__":
    main()
