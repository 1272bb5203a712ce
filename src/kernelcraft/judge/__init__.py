"""The judge: evaluate a candidate kernel against a task, in isolation, and prove its speedup.

    from kernelcraft.judge import Judge
    from kernelcraft.tasks import resolve_task

    with Judge("cpu", cache_dir="kernelcraft-workspace/cache") as judge:  # closing stops its workers
        verdict = judge.evaluate(resolve_task("leaky_relu_clamp"), source)
    print(verdict.summary())

The modules here are the parent (trusted) side; `worker/` runs in the sandboxed processes (the worker,
the builder, the driver of a kernel profile's pass: `KernelProfiler`, after a verdict), and `protocol` is
what the two sides say to each other.

The public names below load lazily (PEP 562): a worker imports `kernelcraft.judge.worker...`, which runs
this file first, and must not import the pool, the sandbox or the evaluation with it (nor run them before
it is confined: worker/confine.py).
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    **dict.fromkeys(['DEFAULT_TOLERANCE', 'JudgeConfig', 'SCENARIOS', 'Timeouts', 'TimingConfig'], "config"),
    **dict.fromkeys(['DeviceDescription', 'DeviceUnavailable', 'check_device', 'describe_device', 'device_key', 'gpu_indices'], "device"),
    **dict.fromkeys(['Judge', 'baseline_kind', 'self_check_source', 'source_hash'], "evaluate"),
    'JUDGE_VERSION': "version",
    **dict.fromkeys(['KernelProfile', 'KernelRecord'], "kernel_profile"),
    **dict.fromkeys(['context_hash', 'normalized_hash', 'normalized_source'], "normalize"),
    **dict.fromkeys(['BaselineSpec', 'Executor', 'Job', 'JobKind', 'Result', 'judged_map', 'open_executor'], "executor"),
    **dict.fromkeys(['LocalPool'], "pool"),
    **dict.fromkeys(['RayPool', 'RayUnavailable'], "ray_pool"),
    **dict.fromkeys(['KernelProfiler'], "profiler"),
    **dict.fromkeys(['TaskRunError'], "reference"),
    **dict.fromkeys(['Roofline'], "roofline"),
    **dict.fromkeys(['LOW_COVERAGE', 'SPEEDUP_CREDIT', 'TaskRules'], "rules"),
    **dict.fromkeys(['Slowdown', 'honest_speedup', 'overstatement', 'reference_slowdown'], "slowdown"),
    **dict.fromkeys(['StaticReport', 'check_source'], "static"),
    **dict.fromkeys(['Flag', 'STAGES', 'StageResult', 'Status', 'TimingStats', 'Verdict'], "verdict"),
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = sorted(_WHERE)
