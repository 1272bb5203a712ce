"""Suite metrics as KernelBench and judge-hardening.md define them: fast_p over ALL tasks (a missing
or failed task counts as not fast), geometric mean and median over correct ones, win rate."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from ..store import Baseline

FAST_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)


@dataclass(frozen=True)
class TaskOutcome:
    task_key: str
    level: int | None
    correct: bool
    speedup: float | None = None  # effective speedup vs eager (1.0 when inside the noise band)
    compile_ratio: float | None = None  # torch.compile time / eager time, where a baseline was recorded

    @property
    def speedup_vs_compile(self) -> float | None:
        if self.speedup is None or self.compile_ratio is None:
            return None
        return self.speedup * self.compile_ratio


@dataclass
class Summary:
    label: str
    total: int
    correct: int
    fast_p: dict[float, float] = field(default_factory=dict)
    geomean: float | None = None
    median: float | None = None
    win_rate: float | None = None  # share of correct tasks that are faster than the reference
    fast_p_compile: dict[float, float] = field(default_factory=dict)
    geomean_compile: float | None = None
    compile_tasks: int = 0


def compile_ratio(baselines: dict[str, Baseline]) -> float | None:
    """torch.compile time over eager time from a task's recorded baselines, when both are there."""
    if "compile" in baselines and "eager" in baselines:
        return baselines["compile"].median_ms / baselines["eager"].median_ms
    return None


def geomean(xs: list[float]) -> float | None:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def summarize(label: str, outcomes: list[TaskOutcome]) -> Summary:
    total = len(outcomes)
    ok = [o for o in outcomes if o.correct and o.speedup is not None]
    speeds = [o.speedup for o in ok]
    s = Summary(label=label, total=total, correct=len(ok))
    s.fast_p = {p: (sum(1 for x in speeds if x > p) / total if total else 0.0) for p in FAST_P}
    s.geomean = geomean(speeds)
    s.median = statistics.median(speeds) if speeds else None
    s.win_rate = sum(1 for x in speeds if x > 1.0) / len(speeds) if speeds else None
    # against torch.compile: over the tasks whose compile baseline was recorded
    s.compile_tasks = sum(1 for o in outcomes if o.compile_ratio is not None)
    vs_compile = [o.speedup_vs_compile for o in ok if o.compile_ratio is not None]
    if s.compile_tasks:
        s.fast_p_compile = {p: sum(1 for x in vs_compile if x > p) / s.compile_tasks for p in FAST_P}
        s.geomean_compile = geomean(vs_compile)
    return s


def summarize_by_level(outcomes: list[TaskOutcome]) -> list[Summary]:
    """One summary per level (tasks without a level together), then one over everything."""
    levels = sorted({o.level for o in outcomes}, key=lambda lv: (lv is None, lv or 0))
    out = [summarize(f"level {lv}" if lv is not None else "tasks", [o for o in outcomes if o.level == lv]) for lv in levels]
    if len(levels) > 1:
        out.append(summarize("all", outcomes))
    return out
