"""The judge: evaluate a candidate kernel against a task, in isolation, and prove its speedup.

    from kernelcraft.judge import Judge
    judge = Judge("cpu", cache_dir=Path("kernelcraft-workspace/cache"))
    verdict = judge.evaluate(task, source)
    judge.close()  # the tasks' trusted workers and the spare workers

Everything here is the parent (trusted) side; `worker` runs in the sandboxed process, and `profile_driver` in
the process a kernel profile (`KernelProfiler`, after a verdict) runs.
"""

from .config import DEFAULT_TOLERANCE, JudgeConfig, Timeouts, TimingConfig
from .device import DeviceDescription, DeviceUnavailable, check_device, describe_device, device_indices
from .evaluate import JUDGE_VERSION, Judge, baseline_kind, self_check_source, source_hash
from .kernel_profile import KernelProfile, KernelRecord
from .normalize import context_hash, normalized_hash, normalized_source
from .pool import Job, LocalPool, Result
from .profiler import KernelProfiler
from .reference import TaskRunError
from .rules import LOW_COVERAGE, SPEEDUP_CREDIT, TaskRules
from .roofline import Roofline
from .slowdown import Slowdown, honest_speedup, overstatement, reference_slowdown
from .static import StaticReport, check_source
from .verdict import STAGES, Flag, StageResult, Status, TimingStats, Verdict

__all__ = [
    "DEFAULT_TOLERANCE", "JUDGE_VERSION", "LOW_COVERAGE", "SPEEDUP_CREDIT", "STAGES", "DeviceDescription", "DeviceUnavailable",
    "Flag", "Job", "Judge", "JudgeConfig", "KernelProfile", "KernelProfiler", "KernelRecord", "LocalPool", "Result", "Roofline",
    "Slowdown", "StageResult", "StaticReport", "Status", "TaskRules", "TaskRunError", "Timeouts", "TimingConfig", "TimingStats",
    "Verdict", "baseline_kind", "check_device", "check_source", "context_hash", "describe_device", "device_indices",
    "honest_speedup", "normalized_hash", "normalized_source", "overstatement", "reference_slowdown", "self_check_source",
    "source_hash",
]
