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


def describe_device(device: str, index: int = 0) -> DeviceDescription:
    if device == "cuda":
        p = torch.cuda.get_device_properties(index)
        return DeviceDescription("cuda", p.name, f"{p.major}.{p.minor}", round(p.total_memory / 2**30))
    return DeviceDescription("cpu", platform.processor() or platform.machine())
