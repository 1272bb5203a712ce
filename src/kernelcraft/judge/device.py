"""What the parent knows of a judge's device without starting a worker: its name, compute
capability and memory (for ceilings' cache keys and for prompts that name the target)."""

from __future__ import annotations

import platform
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DeviceDescription:
    kind: str  # "cuda" or "cpu"
    name: str
    capability: str = ""  # "9.0"
    memory_gb: int | None = None


class DeviceUnavailable(Exception):
    """The requested device does not exist here; one line for the user."""


def check_device(device: str) -> None:
    """Raise DeviceUnavailable unless `device` is cpu, or cuda on a machine that has a CUDA device."""
    if device not in ("cpu", "cuda"):
        raise DeviceUnavailable(f"unknown device {device!r}: use cuda or cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise DeviceUnavailable("no CUDA device is available here: use --device cpu, or run on a GPU machine")


def device_indices(device: str, gpus: int) -> list[int]:
    """The device indices a pool spreads its evaluations over: the first `gpus` CUDA devices, or
    the one CPU. Raise DeviceUnavailable for more GPUs than this machine has, or GPUs on the CPU."""
    check_device(device)
    if gpus < 1:
        raise DeviceUnavailable(f"--gpus {gpus}: give 1 or more")
    if device == "cpu":
        if gpus > 1:
            raise DeviceUnavailable(f"--gpus {gpus} with --device cpu: the CPU is one device")
        return [0]
    have = torch.cuda.device_count()
    if gpus > have:
        raise DeviceUnavailable(f"--gpus {gpus}: this machine has {have} CUDA device(s)")
    return list(range(gpus))


def describe_device(device: str, index: int = 0) -> DeviceDescription:
    if device == "cuda":
        p = torch.cuda.get_device_properties(index)
        return DeviceDescription("cuda", p.name, f"{p.major}.{p.minor}", round(p.total_memory / 2**30))
    return DeviceDescription("cpu", platform.processor() or platform.machine())
