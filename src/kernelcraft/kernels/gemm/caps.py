"""What the GEMM spaces need to know of a device: its kind, compute capability, SMs and shared
memory per block."""

from __future__ import annotations

from dataclasses import dataclass

from ...judge import DeviceDescription


@dataclass(frozen=True)
class DeviceCaps:
    """What the space needs to know of a device: kind, compute capability, SMs, shared memory per
    block (0: no limit, as in the CPU interpreter)."""

    kind: str
    capability: tuple[int, int] = (0, 0)
    sms: int = 1
    smem_bytes: int = 0

    @classmethod
    def of(cls, device: DeviceDescription) -> "DeviceCaps":
        """The caps of the judge's device (for cuda, device 0, as `describe_device` reads it)."""
        if device.kind != "cuda":
            return cls(device.kind)
        import torch

        p = torch.cuda.get_device_properties(0)
        # one block may take the SM's shared memory less what the driver reserves (1 KB)
        return cls("cuda", (p.major, p.minor), p.multi_processor_count, p.shared_memory_per_multiprocessor - 1024)
