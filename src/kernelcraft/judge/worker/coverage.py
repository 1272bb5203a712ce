"""Coverage from a profiled call: the share of the forward's time spent in the candidate's own
kernels (docs/judge.md, exploit class 10; the rule on library calls, rules.py). On cuda: device time of kernels the
candidate's source compiles (named in it, or compiled into its extensions: kernel_names.py), launched
from outside PyTorch's operators, or run by a CUDA graph the candidate replays (the device's records
of the kernels that ran count, not the calls that launched them).
On cpu: time inside the candidate's extension functions and Triton launches, less the PyTorch
compute ops they call."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.autograd import DeviceType

from ..protocol import KernelTime
from .kernel_names import CompiledKernels, kernel_identifier
from .launches import LaunchCounter

_LIB_NAMESPACES = {"at", "c10", "cub", "cutlass", "thrust", "cudnn", "cublas", "cublasLt", "flash", "pytorch_flash", "native"}
_NEUTRAL_OPS = {
    "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::view", "aten::reshape", "aten::_reshape_alias",
    "aten::as_strided", "aten::detach", "aten::t", "aten::transpose", "aten::permute", "aten::expand",
    "aten::select", "aten::slice", "aten::unsqueeze", "aten::squeeze", "aten::resize_", "aten::alias",
    "aten::lift_fresh", "aten::size", "aten::stride", "aten::is_contiguous", "aten::numel", "aten::dim",
    "aten::contiguous", "aten::to", "aten::_to_copy", "aten::item", "aten::_local_scalar_dense",
}
KERNELS_LISTED = 5  # the largest kernels of a profiled call a verdict lists
_NAME_CHARS = 200  # of a listed kernel's name: template arguments run to kilobytes
# Why a kernel that ran is not the candidate's own (KernelTime.why_not).
NOT_COMPILED = "not compiled from its source"
REPLAYED_LIBRARY = "the reference runs it, and a graph replay ran it"


def is_custom_kernel(name: str, kernel_names: set[str], compiled: CompiledKernels) -> bool:
    """Whether the profiled kernel `name` is one the candidate's source compiles: named as one of its kernels
    (a `__global__` function, a Triton kernel) outside a library's namespace, so that a decoy named after a
    library's kernel is not; or compiled into its own extensions, in any namespace (a CUTLASS template)."""
    return not _not_compiled(name, kernel_names, compiled)


def _not_compiled(name: str, kernel_names: set[str], compiled: CompiledKernels) -> str:
    """Why the profiled kernel `name` is no kernel the candidate's source compiles; "" when it is one."""
    root, fn = kernel_identifier(name)
    if (fn in kernel_names and root not in _LIB_NAMESPACES) or compiled.holds(name):
        return ""
    return f"in a library's namespace ({root}::)" if fn in kernel_names else NOT_COMPILED


@dataclass
class DeviceShare:
    """How a profiled call's device time splits between the candidate's kernels and everything else."""

    coverage: float
    custom_kernels: list[str]
    device_us: float
    kernels: list[KernelTime]  # the largest KERNELS_LISTED, the candidate's own or not
    # Runs of the candidate's kernels that no launch call of its own put on the device: a graph replay's
    # (or ones the profiler tied to no call). A replay calls none of its wrapped functions.
    graph_runs: int = 0
    graph_launches: int = 0  # cudaGraphLaunch calls in the profiled call


def _is_note(e: Any) -> bool:
    return bool(getattr(e, "is_user_annotation", False))


def _launch_calls(events: list[Any]) -> dict[int, Any]:
    """The host-side calls that put work on the device (cudaLaunchKernel, cuLaunchKernelEx,
    cudaMemsetAsync...), by correlation id: the profiler gives a device event the id of the runtime
    or driver call that launched it. Operators ("aten::mm") and annotations are not such calls."""
    return {e.id: e for e in events if e.device_type == DeviceType.CPU and e.name.startswith("cu") and "::" not in e.name
            and not _is_note(e)}


def _is_graph_launch(call: Any) -> bool:
    """Whether a launch call replays a CUDA graph: CUPTI gives every kernel of the graph that call's
    correlation id, whichever code captured it."""
    return call.name.startswith(("cudaGraphLaunch", "cuGraphLaunch"))


def _launching_operator(call: Any) -> str:
    """The PyTorch operator (aten::mm...) that is the innermost range around a launch call, rather than one
    of the judge's `kernelcraft_custom::` ranges around the candidate's own launches; "" for none. Such a
    kernel is PyTorch's (or cuBLAS's, launched by PyTorch), whatever the candidate named its own
    kernels: a decoy named after the library kernel that does the work gets no credit for it."""
    parent = getattr(call, "cpu_parent", None)
    while parent is not None:
        if parent.name.startswith("kernelcraft_custom::"):
            return ""
        if "::" in parent.name and not parent.name.startswith("kernelcraft_") and not _is_note(parent):
            return str(parent.name)
        parent = getattr(parent, "cpu_parent", None)
    return ""


def _not_own_run(name: str, call: Any, kernel_names: set[str], compiled: CompiledKernels, library: frozenset[str]) -> str:
    """Why one device record of kernel `name`, put there by launch call `call` (None: the profiler tied it
    to none), is no run of the candidate's own kernel; "" when it is one."""
    why = _not_compiled(name, kernel_names, compiled)
    if why:
        return why
    operator = _launching_operator(call) if call is not None else ""
    if operator:
        return f"launched inside {operator}"
    # A graph replay runs the kernels PyTorch's operators captured and the candidate's alike, under one
    # call that no operator's range surrounds: the name alone decides. So a kernel named like one the
    # reference's own forward runs (cuBLAS's GEMM...) is a decoy's name for a captured operator's kernel.
    return REPLAYED_LIBRARY if (call is None or _is_graph_launch(call)) and name in library else ""


def device_share(events: list[Any], kernel_names: set[str], compiled: CompiledKernels,
                 library: frozenset[str] = frozenset()) -> DeviceShare:
    """The share of device time in kernels the candidate's source compiles and its own code launches,
    directly or by replaying a CUDA graph. `library`: the kernels the reference's forward runs
    (`library_kernels`), never the candidate's when a graph runs them."""
    calls = _launch_calls(events)
    # Device-side events are kernels, copies and fills; the judge's own record_function ranges
    # also appear on the device timeline as annotations and are not work.
    kernels = [e for e in events if e.device_type == DeviceType.CUDA and not e.name.startswith("kernelcraft_")
               and not _is_note(e)]
    total = custom = 0.0
    graph_runs = 0
    custom_names: set[str] = set()
    by_kernel: dict[tuple[str, str], float] = {}  # device time by (name, why it is not the candidate's own)
    for e in kernels:
        us = float(e.time_range.end - e.time_range.start)
        total += us
        call = calls.get(e.id)
        why_not = _not_own_run(e.name, call, kernel_names, compiled, library)
        if not why_not:
            custom += us
            custom_names.add(kernel_identifier(e.name)[1])
            graph_runs += call is None or _is_graph_launch(call)
        key = (e.name[:_NAME_CHARS], why_not)
        by_kernel[key] = by_kernel.get(key, 0.0) + us
    largest = sorted(by_kernel.items(), key=lambda kv: -kv[1])[:KERNELS_LISTED]
    return DeviceShare(coverage=(custom / total) if total > 0 else 0.0, custom_kernels=sorted(custom_names), device_us=total,
                       kernels=[KernelTime(name, us, us / total if total > 0 else 0.0, not why_not, why_not)
                                for (name, why_not), us in largest],
                       graph_runs=graph_runs, graph_launches=sum(_is_graph_launch(c) for c in calls.values()))


def library_kernels(reference: Any, inputs: list[Any]) -> frozenset[str]:
    """The names of the device kernels (copies and fills included) the trusted reference's forward runs
    on `inputs` (cloned: a reference may write to its inputs): PyTorch's and its libraries' (cuBLAS's,
    cuDNN's). No operator's range tells them apart from the candidate's inside a graph replay."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        reference(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
        torch.cuda.synchronize()
    return frozenset(e.name for e in prof.events() if e.device_type == DeviceType.CUDA and not _is_note(e))


def _walk(event: Any) -> list[Any]:
    out = []
    for c in event.cpu_children:
        out.append(c)
        out.extend(_walk(c))
    return out


def profile_call(model: Any, inputs: list[Any], counter: LaunchCounter, device: torch.device,
                 library: frozenset[str] = frozenset()) -> dict[str, Any]:
    """One profiled forward: its coverage, and how often the candidate's own kernels were launched
    (`custom_launches`: calls of its wrapped functions, and on CUDA each run of its kernels a graph
    replayed, since a replay calls none of them). `library`: as for `device_share`."""
    counter.reset()
    counter.profiling = True
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        with torch.profiler.record_function("kernelcraft_forward"):
            model(*inputs)
        if device.type == "cuda":
            torch.cuda.synchronize()
    counter.profiling = False
    launches = counter.total
    events = prof.events()
    result: dict[str, Any] = {"custom_launches": launches, "calls": dict(counter.calls)}
    if device.type == "cuda":
        share = device_share(events, counter.kernel_names, counter.compiled, library)
        result.update(coverage=share.coverage, custom_kernels=share.custom_kernels, device_us=share.device_us,
                      kernels=share.kernels, graph_runs=share.graph_runs, graph_launches=share.graph_launches,
                      custom_launches=launches + share.graph_runs)
        if launches and not share.custom_kernels and share.device_us > 0:
            result["coverage"] = 0.0
        return result
    forward = [e for e in events if e.name == "kernelcraft_forward"]
    total = float(forward[0].cpu_time_total) if forward else 0.0
    custom = 0.0
    for e in events:
        if e.name.startswith("kernelcraft_custom::"):
            nested = sum(float(c.self_cpu_time_total) for c in _walk(e)
                         if c.name.startswith("aten::") and c.name not in _NEUTRAL_OPS)
            custom += max(0.0, float(e.cpu_time_total) - nested)
    result["coverage"] = min(1.0, custom / total) if total > 0 else 0.0
    return result
