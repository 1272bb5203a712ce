"""Per-kernel records of a profiled forward call (profiler.py makes them): Nsight Compute's metrics
where ncu ran, else the PyTorch profiler's kernel list (on the CPU, its operator list). Advice for
people and models, never part of a verdict."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .protocol import OWN_CODE
from .worker.cxx_names import parse_function_name

__all__ = ["BUSY_PCT", "NCU", "OWN_CODE", "TORCH_PROFILER", "KernelProfile", "KernelRecord"]

NCU = "ncu"
TORCH_PROFILER = "torch.profiler"
# Nsight Compute's own rule (SpeedOfLight): a unit below 60% of its peak is not what limits a kernel;
# with both below it, the kernel waits (latency) rather than saturates anything.
BUSY_PCT = 60.0


@dataclass(frozen=True)
class KernelRecord:
    """One kernel (on the CPU, one operator) of the profiled call, its launches added up. The metrics
    are ncu's, weighted by each launch's duration; None where the tool gives none."""

    name: str
    calls: int
    # over its calls: ncu's gpu__time_duration (each launch replayed alone), else the profiler's device time
    # (CPU: self CPU time)
    time_us: float
    own: bool  # a kernel the candidate's source defines (coverage.is_custom_kernel), not a library's
    dram_pct: float | None = None  # DRAM throughput, % of peak
    sm_pct: float | None = None  # SM (compute) throughput, % of peak
    occupancy_pct: float | None = None  # achieved occupancy: active warps, % of the SM's maximum
    registers: int | None = None  # registers per thread
    shared_bytes: int | None = None  # shared memory per block, static and dynamic
    # the top warp stall reasons, cycles per issued instruction, largest first
    stalls: list[tuple[str, float]] = field(default_factory=list)

    @property
    def label(self) -> str:
        """The kernel's name without template arguments and parameters ('at::native::reduce_kernel')."""
        parsed = parse_function_name(self.name)
        return self.name if parsed is None else parsed.qualified

    @property
    def limiter(self) -> str | None:
        """What limits the kernel, in a phrase, from ncu's metrics (None without them): the busier of
        DRAM and the SMs when one is above BUSY_PCT of its peak, else latency, with the occupancy and
        the top stall reason."""
        if self.dram_pct is None or self.sm_pct is None:
            return None
        if max(self.dram_pct, self.sm_pct) >= BUSY_PCT:
            return "DRAM bandwidth" if self.dram_pct >= self.sm_pct else "SM throughput"
        details = [f"occupancy {self.occupancy_pct:.0f}%"] if self.occupancy_pct is not None else []
        details += [f"most stalls {self.stalls[0][0]}"] if self.stalls else []
        return "latency" + (f" ({', '.join(details)})" if details else "")


@dataclass(frozen=True)
class KernelProfile:
    """The top kernels of one profiled forward call of a candidate, and how they were found."""

    tool: str  # NCU or TORCH_PROFILER; "" when nothing could be profiled
    kernels: list[KernelRecord]  # the top kernels by time, largest first
    total_us: float  # every kernel's time in the call (the shares' denominator)
    note: str = ""  # why ncu did not run, or why nothing came back
    seconds: float = 0.0  # the profiling pass's wall time

    def share(self, k: KernelRecord) -> float:
        """`k`'s share of the call's kernel time."""
        return k.time_us / self.total_us if self.total_us > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "KernelProfile":
        kernels = [KernelRecord(**{**k, "stalls": [tuple(s) for s in k.get("stalls", [])]}) for k in d["kernels"]]
        return cls(**{**d, "kernels": kernels})
