"""Baseline times a judge measures, recorded in the store: those `baseline` and `tasks vet` ask for, and the
ones every summary compares with, filled in once for each correct task that lacks them."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..judge import BaselineSpec, Executor, Job, Result, Verdict, baseline_kind
from ..tasks import Task
from .db import Store

# The baselines summaries compare with: every verdict's own reference (eager, strict) and what users run (eager and
# torch.compile at PyTorch's defaults).
SUMMARY_BASELINES = tuple(baseline_kind(side) for side in ("reference", "reference_default", "compiled"))


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def baselines_job(task: Task, compiled: bool = True, tunableop: bool = False,
                  scenarios: Sequence[str] = ("offline",), defaults: bool = True) -> Job:
    """The job that times `task`'s baselines on an executor (BaselineSpec says which)."""
    return Job(task, "", kind="baselines", baselines=BaselineSpec(compiled, tunableop, tuple(scenarios), defaults))


def record_baselines(store: Store, device: str, result: Result, warn: Callable[[str], None] = _warn) -> dict[str, float]:
    """Record a baselines job's times (executor.run_job: where torch.compile failed, the others without it, and
    `warn` is told); their medians by store kind."""
    for message in result.warnings:
        warn(message)
    if result.baselines is None:
        warn(f"{result.job.task.key}: baselines not recorded: {result.error}")
        return {}
    device_name, torch_version = str(result.env.get("device_name", "")), str(result.env.get("torch", ""))
    for kind, stats in result.baselines.items():
        store.record_baseline(result.job.task.key, device, device_name, kind, stats, torch_version)
    return {kind: stats.median_ms for kind, stats in result.baselines.items()}


def fill_baselines(store: Store, executor: Executor, judged: Sequence[tuple[Task, Verdict]],
                   track: Callable[[list[Any]], Iterable[Any]] = iter, warn: Callable[[str], None] = _warn) -> None:
    """Record the summary's baselines for each correct task that lacks one on its verdict's device: once, as later
    runs find them; timed on `executor` once its evaluations are done (nothing else then runs beside them). A task
    whose baselines cannot be timed is a warning; its summary rows leave it out. `track` walks the tasks to time (a
    progress bar)."""
    todo = [t for t, v in judged
            if v.correct and not set(SUMMARY_BASELINES) <= set(store.baselines(t.key, str(v.env.get("device_name", ""))))]
    futures = [executor.submit(baselines_job(t)) for t in todo]
    for future in track(futures):
        record_baselines(store, executor.device, future.result(), warn=warn)


__all__ = ["SUMMARY_BASELINES", "baselines_job", "fill_baselines", "record_baselines"]
