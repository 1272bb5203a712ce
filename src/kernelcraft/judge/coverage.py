"""Coverage from a profiled call: the share of the forward's time spent in the candidate's own
kernels (judge-hardening #10). On cuda: device time of kernels whose names the candidate defined,
launched from outside PyTorch's operators.
On cpu: time inside the candidate's extension functions and Triton launches, less the PyTorch
compute ops they call."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import torch
from torch.autograd import DeviceType

from .launches import LaunchCounter

_LIB_NAMESPACES = {"at", "c10", "cub", "cutlass", "thrust", "cudnn", "cublas", "cublasLt", "flash", "pytorch_flash", "native"}
_NEUTRAL_OPS = {
    "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::view", "aten::reshape", "aten::_reshape_alias",
    "aten::as_strided", "aten::detach", "aten::t", "aten::transpose", "aten::permute", "aten::expand",
    "aten::select", "aten::slice", "aten::unsqueeze", "aten::squeeze", "aten::resize_", "aten::alias",
    "aten::lift_fresh", "aten::size", "aten::stride", "aten::is_contiguous", "aten::numel", "aten::dim",
    "aten::contiguous", "aten::to", "aten::_to_copy", "aten::item", "aten::_local_scalar_dense",
}


_SOURCE_NAME = re.compile(r"(\d+)")


def _mangled_parts(name: str) -> list[str]:
    """The scopes and name of an Itanium-mangled function ('_ZN2at6native6kernelI...' -> at, native,
    kernel). The profiler passes a kernel's name on mangled when its demangled form is too long, as
    with CUTLASS's kernels' parameter types; only the function's own name matters here, which comes
    first, so the arguments are not decoded."""
    rest = name[2:]
    nested = rest.startswith("N")
    if nested:
        rest = rest[1:].lstrip("rVKRO")
    rest = rest.removeprefix("L")
    parts = []
    while True:
        if nested and rest.startswith("St"):
            parts.append("std")
            rest = rest[2:]
        m = _SOURCE_NAME.match(rest)
        if not m:
            return parts
        end = m.end() + int(m.group(1))
        parts.append(rest[m.end():end])
        rest = rest[end:]
        if not nested:
            return parts


def kernel_identifier(name: str) -> tuple[str, str]:
    """(namespace root, function name) of a profiler kernel name such as
    'void at::native::vectorized_elementwise_kernel<4, ...>(...)', 'my_kernel', or a mangled one
    ('_Z9my_kernelPf')."""
    if name.startswith("_Z"):
        parts = _mangled_parts(name)
    else:
        base = name.removeprefix("void ").split("(")[0].split("<")[0].strip()
        parts = [p for p in base.split("::") if p]
    if not parts:
        return "", name
    return (parts[0] if len(parts) > 1 else ""), parts[-1]


def is_custom_kernel(name: str, kernel_names: set[str]) -> bool:
    root, fn = kernel_identifier(name)
    return fn in kernel_names and root not in _LIB_NAMESPACES


@dataclass
class DeviceShare:
    """How a profiled call's device time splits between the candidate's kernels and everything else."""

    coverage: float
    custom_kernels: list[str]
    device_us: float
    top_other: list[tuple[str, float]]  # the three largest other kernels: (name, us)


def _launched_by_torch(events: list[Any]) -> set[int]:
    """Ids of the PyTorch operators (aten::mm...) on the host timeline. The profiler links each kernel to
    the innermost operator running when it was launched, so a kernel linked to one of these is
    PyTorch's (or cuBLAS's, launched by PyTorch), whatever the candidate named its own kernels: a
    decoy kernel named after the library kernel that does the work gets no credit for it."""
    return {e.id for e in events if e.device_type == DeviceType.CPU and "::" in e.name
            and not e.name.startswith("kernelcraft_") and not getattr(e, "is_user_annotation", False)}


def device_share(events: list[Any], kernel_names: set[str]) -> DeviceShare:
    """The share of device time in kernels the candidate defined and launched itself."""
    torch_ops = _launched_by_torch(events)
    # Device-side events are kernels, copies and fills; the judge's own record_function ranges
    # also appear on the device timeline as annotations and are not work.
    kernels = [e for e in events if e.device_type == DeviceType.CUDA and not e.name.startswith("kernelcraft_")
               and not getattr(e, "is_user_annotation", False)]
    total = custom = 0.0
    custom_names: set[str] = set()
    other: dict[str, float] = {}
    for e in kernels:
        us = float(e.time_range.end - e.time_range.start)
        total += us
        link = getattr(e, "linked_correlation_id", 0)
        if is_custom_kernel(e.name, kernel_names) and not (link > 0 and link in torch_ops):
            custom += us
            custom_names.add(kernel_identifier(e.name)[1])
        else:
            other[e.name[:80]] = other.get(e.name[:80], 0.0) + us
    return DeviceShare(coverage=(custom / total) if total > 0 else 0.0, custom_kernels=sorted(custom_names),
                       device_us=total, top_other=sorted(other.items(), key=lambda kv: -kv[1])[:3])


def _walk(event: Any) -> list[Any]:
    out = []
    for c in event.cpu_children:
        out.append(c)
        out.extend(_walk(c))
    return out


def profile_call(model: Any, inputs: list[Any], counter: LaunchCounter, device: torch.device) -> dict[str, Any]:
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
        share = device_share(events, counter.kernel_names)
        result.update(coverage=share.coverage, custom_kernels=share.custom_kernels, device_us=share.device_us,
                      top_other=share.top_other)
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
