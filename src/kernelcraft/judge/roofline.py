"""Where a candidate sits under the device's roofline, from numbers the judge already has: the
reference's FLOPs and bytes per call (the trusted worker's survey), the candidate's median time, and
the device's measured ceilings (ceilings.py). Free: nothing is measured for it.

Standard library only: the verdict carries it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Roofline:
    """Achieved rates of one correct candidate against the device's ceilings.

    FLOPs are what torch's FlopCounterMode counts in the reference (matmuls, convolutions, attention:
    elementwise work counts none); bytes are the reference's inputs, outputs and parameters, the least
    traffic any kernel needs. The shares are fractions (1.0: at the ceiling)."""

    flops: int  # the reference's FLOPs per call
    bytes: int  # the reference's inputs, outputs and parameters, bytes per call
    time_ms: float  # the candidate's median time
    tflops: float  # achieved TFLOP/s: flops / time
    gbps: float  # achieved GB/s: bytes / time
    peak_tflops: float  # the device's measured matmul peak, TFLOP/s
    peak_gbps: float  # the device's measured copy bandwidth, GB/s
    compute_share: float  # tflops / peak_tflops
    memory_share: float  # gbps / peak_gbps
    flop_floor_ms: float  # flops at the peak rate: no kernel can be faster without skipping work
    bytes_floor_ms: float  # bytes at the peak bandwidth
    bound: str  # "compute" or "memory": the ceiling the reference's work meets first (its larger floor)
    share: float  # of the roofline at the task's intensity: max(compute_share, memory_share)

    @classmethod
    def of(cls, flops: int, nbytes: int, time_ms: float, ceilings: dict[str, Any]) -> "Roofline":
        """The roofline of `time_ms` for work of `flops` and `nbytes` under `ceilings` (Judge.ceilings():
        bandwidth_bytes_per_s, max_flops)."""
        bandwidth, peak = ceilings["bandwidth_bytes_per_s"], ceilings["max_flops"]
        flop_floor_ms, bytes_floor_ms = flops / peak * 1e3, nbytes / bandwidth * 1e3
        # Below the ridge point the roof is bandwidth times intensity, so the share of the roof reached
        # is the larger of the two shares (the same as the larger floor over the time).
        compute_share, memory_share = flop_floor_ms / time_ms, bytes_floor_ms / time_ms
        return cls(flops=flops, bytes=nbytes, time_ms=time_ms, tflops=flops / time_ms / 1e9, gbps=nbytes / time_ms / 1e6,
                   peak_tflops=peak / 1e12, peak_gbps=bandwidth / 1e9, compute_share=compute_share,
                   memory_share=memory_share, flop_floor_ms=flop_floor_ms, bytes_floor_ms=bytes_floor_ms,
                   bound="compute" if flop_floor_ms > bytes_floor_ms else "memory",
                   share=max(compute_share, memory_share))
