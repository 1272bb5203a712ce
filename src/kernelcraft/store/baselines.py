"""Baseline times a judge measures, recorded in the store: those `baseline` and `tasks vet` ask for, and the
ones every summary compares with, filled in once for each correct task that lacks them."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..judge import Judge, JudgeConfig, TaskRunError, Verdict, baseline_kind
from ..tasks import Task
from .db import Store

# The baselines summaries compare with: every verdict's own reference (eager, strict) and what users run (eager and
# torch.compile at PyTorch's defaults).
SUMMARY_BASELINES = tuple(baseline_kind(side) for side in ("reference", "reference_default", "compiled"))


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def record_baselines(judge: Judge, store: Store, task: Task, env: dict[str, Any], compiled: bool = True,
                     tunableop: bool = False, scenarios: Sequence[str] = ("offline",),
                     warn: Callable[[str], None] = _warn) -> dict[str, float]:
    """Time the task's baselines in each scenario and record them; their medians by store kind. Where
    torch.compile fails, the others are timed without it (and `warn` is told)."""
    found: dict[str, float] = {}
    for scenario in scenarios:
        try:
            stats = judge.baseline(task, compiled=compiled, tunableop=tunableop, scenario=scenario)
        except TaskRunError as e:
            warn(f"{task.key}: baseline failed: {e}")
            if not compiled:
                continue
            stats = judge.baseline(task, compiled=False, tunableop=tunableop, scenario=scenario)
        for side, s in stats.items():
            kind = baseline_kind(side, scenario)
            store.record_baseline(task.key, judge.device, str(env.get("device_name", "")), kind, s, str(env.get("torch", "")))
            found[kind] = s.median_ms
    return found


def fill_baselines(store: Store, device: str, config: JudgeConfig, judged: Sequence[tuple[Task, Verdict]],
                   track: Callable[[list[Any]], Iterable[Any]] = iter, warn: Callable[[str], None] = _warn) -> None:
    """Record the summary's baselines for each correct task that lacks one on its verdict's device: once, as later
    runs find them. A task whose baselines cannot be timed is a warning; its summary rows leave it out. `track`
    walks the tasks to time (a progress bar)."""
    todo = [(t, v.env) for t, v in judged
            if v.correct and not set(SUMMARY_BASELINES) <= set(store.baselines(t.key, str(v.env.get("device_name", ""))))]
    if not todo:
        return
    judge = Judge(device, cache_dir=store.cache_dir, config=config)
    try:
        for t, env in track(todo):
            try:
                record_baselines(judge, store, t, env, warn=warn)
            except TaskRunError as e:
                warn(f"{t.key}: baselines not recorded: {e}")
    finally:
        judge.close()


__all__ = ["SUMMARY_BASELINES", "fill_baselines", "record_baselines"]
