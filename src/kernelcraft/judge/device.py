"""What the parent knows of a judge's device without starting a worker: its name, compute
capability and memory (for ceilings' cache keys and for prompts that name the target)."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path

import torch


@dataclass(frozen=True)
class DeviceDescription:
    kind: str  # "cuda" or "cpu"
    name: str
    capability: str = ""  # "9.0"
    memory_gb: int | None = None
    features: str = ""  # a CPU's model, cores and vector instruction sets, as a prompt describes the target


class DeviceUnavailable(Exception):
    """The requested device does not exist here; one line for the user."""


def check_device(device: str) -> None:
    """Raise DeviceUnavailable unless `device` is cpu, or cuda on a machine that has a CUDA device."""
    if device not in ("cpu", "cuda"):
        raise DeviceUnavailable(f"unknown device {device!r}: use cuda or cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise DeviceUnavailable("no CUDA device is available here: use --device cpu, or run on a GPU machine")


def gpu_indices(device: str, gpus: str | None) -> list[int]:
    """The device indices a pool spreads its evaluations over: `gpus` is "all" (the default: every visible
    CUDA device) or indices such as "0,1"; the CPU is the one device 0. Raise DeviceUnavailable for an index
    this machine lacks, a malformed list, or GPUs named with the CPU."""
    check_device(device)
    spec = (gpus or "all").strip()
    if device == "cpu":
        if spec not in ("all", "0"):
            raise DeviceUnavailable(f"--gpus {spec} with --device cpu: the CPU is one device")
        return [0]
    have = torch.cuda.device_count()
    if spec == "all":
        return list(range(have))
    try:
        indices = [int(part) for part in spec.split(",")]
    except ValueError:
        raise DeviceUnavailable(f"--gpus {spec}: give all, or device indices such as 0,1") from None
    if len(set(indices)) != len(indices):
        raise DeviceUnavailable(f"--gpus {spec}: an index is given twice")
    missing = [i for i in indices if not 0 <= i < have]
    if missing:
        raise DeviceUnavailable(f"--gpus {spec}: this machine has {have} CUDA device(s) (0..{have - 1}), not {missing[0]}")
    return indices


def gpu_uuid(device: str, index: int) -> str | None:
    """The UUID of CUDA device `index` as torch writes it (a worker reports its own the same way), or None."""
    if device == "cuda" and torch.cuda.is_available():
        uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
        return None if uuid is None else str(uuid)
    return None


def device_key(device: str, index: int) -> str:
    """A name for the physical device, the same in every process whatever CUDA_VISIBLE_DEVICES shows it as
    (a Ray actor sees its GPU as 0): the GPU's UUID, else the kind and index."""
    uuid = gpu_uuid(device, index)
    return f"cuda-{uuid}" if uuid is not None else f"{device}-{index}"


def describe_device(device: str, index: int = 0) -> DeviceDescription:
    if device == "cuda":
        p = torch.cuda.get_device_properties(index)
        return DeviceDescription("cuda", p.name, f"{p.major}.{p.minor}", round(p.total_memory / 2**30))
    return DeviceDescription("cpu", platform.processor() or platform.machine(), features=cpu_features())


# Vector instruction sets as /proc/cpuinfo's flags name them, widest first, with the names a programmer knows.
_VECTOR = {"avx512f": "AVX-512", "avx2": "AVX2", "sse4_2": "SSE4.2", "sve": "SVE", "asimd": "NEON"}


def cpu_features() -> str:
    """This CPU's model, its cores and its vector instruction sets ("AMD EPYC 7B13, 2 cores, AVX2, FMA"), from
    /proc/cpuinfo where there is one; what a prompt needs to aim a C++ kernel at it."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        info = ""
    fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)  # the last core's values
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    flags = set((fields.get("flags") or fields.get("Features") or "").split())
    vector = next((name for flag, name in _VECTOR.items() if flag in flags), "")
    parts = [fields.get("model name", ""), f"{os.cpu_count() or 1} cores", vector, "FMA" if "fma" in flags else ""]
    return ", ".join(p for p in parts if p)


def visible_id(index: int) -> str:
    """How a child process must name this process's CUDA device `index` in its CUDA_VISIBLE_DEVICES: the
    index-th entry of this process's own (a Ray actor sees its GPU "1" as device 0; a scheduler may list
    UUIDs), else the index itself."""
    seen = os.environ.get("CUDA_VISIBLE_DEVICES")
    entries = [e.strip() for e in seen.split(",")] if seen else []
    return entries[index] if index < len(entries) and entries[index] else str(index)


def cpu_slices(count: int, cpus: set[int] | None = None, sysfs: Path = Path("/sys/devices/system/cpu")
               ) -> list[frozenset[int]] | None:
    """This process's CPUs (or `cpus`) in `count` disjoint slices of whole cores (a core's hyperthreads stay
    together, neighbouring cores together, as `sysfs` describes them), one per device of a pool: a device's
    untrusted processes run on its slice only, so one device's builds and start-ups never share a core with
    another device's timed call. None where there are fewer than two cores a slice."""
    if count < 2:
        return None
    allowed = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
    cores: dict[tuple[str, str], set[int]] = {}
    for cpu in allowed:
        topology = sysfs / f"cpu{cpu}" / "topology"
        try:
            key = ((topology / "physical_package_id").read_text().strip(), (topology / "core_id").read_text().strip())
        except OSError:
            key = ("", str(cpu))
        cores.setdefault(key, set()).add(cpu)
    ordered = sorted(cores.values(), key=min)
    if len(ordered) < 2 * count:
        return None
    n = len(ordered)
    return [frozenset().union(*ordered[i * n // count:(i + 1) * n // count]) for i in range(count)]
