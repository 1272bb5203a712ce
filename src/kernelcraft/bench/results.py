"""A bench's numbers, read back from its arms' stores (nothing here measures): per arm and per level, the correct
tasks, fast_p and the geometric mean against eager (strict), eager at PyTorch's defaults and torch.compile
(report.metrics' rules, over the bench's own baselines), judge calls, tokens and dollars, and wall time; per arm, the
best result against judge calls spent (after k judge calls of a task, its best speedup so far; fast_1 over the tasks
for each k)."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ..judge import baseline_kind
from ..report import EAGER, Summary, TaskOutcome, TaskReport, against, baseline_label, baseline_ratios, load_run, summarize
from ..search import RUN_KIND, SCREENING
from ..store import Store
from .spec import ARMS_DIR, BenchSpec, BenchState

DEFAULTS = baseline_kind("reference_default")
COMPILED = baseline_kind("compiled")
KINDS = (EAGER, DEFAULTS, COMPILED)  # what every row and curve is against
ALL = "all"  # the level of tasks without one, and the row over every level
NOT_TIMED = "not timed (the bench ran with --no-baselines)"


@dataclass(frozen=True)
class TaskRecord:
    """One task of one arm: its best result, the best so far after each of its judge calls, what it spent."""

    key: str
    level: str
    outcome: TaskOutcome  # placed against the bench's baselines
    best_after: list[float | None]  # best effective speedup against eager (strict) after judge call 1, 2, ...
    tokens: int
    cost_usd: float | None
    unpriced_calls: int
    judge_s: float  # the judge's wall time on the task's evaluations
    model_s: float  # the model's, as the client measured its calls (a batch reply: none)


@dataclass(frozen=True)
class ArmRow:
    """One arm over one level's tasks (or `all`)."""

    arm: str
    level: str
    summary: Summary
    judge_calls: int
    most_judge_calls: int  # the most one task spent: never above the budget
    tokens: int
    cost_usd: float | None
    unpriced_calls: int
    judge_s: float
    model_s: float

    def fast_1(self, kind: str) -> float | None:
        """fast_1 against `kind`; None where no correct task has that baseline recorded."""
        b = self.summary.vs(kind)
        return b.fast_p[1.0] if b is not None else (0.0 if kind == EAGER or self.summary.correct == 0 else None)

    def geomean(self, kind: str) -> float | None:
        b = self.summary.vs(kind)
        return b.geomean if b is not None else None


@dataclass(frozen=True)
class Curve:
    """fast_1 against `kind` after k = 1, 2, ... judge calls per task (None: no task placed against `kind`)."""

    arm: str
    level: str
    kind: str
    fast_1: list[float | None]


@dataclass(frozen=True)
class ArmStatus:
    arm: str
    shape: str  # the strategy's shape and skills, as `optimize` describes a run
    run_id: str | None  # None: not started
    finished: bool
    wall_s: float  # every invocation's time in this arm


@dataclass(frozen=True)
class BenchResults:
    target: str
    device_name: str
    model: str
    judge_calls: int  # per task
    tokens: int | None  # per task
    prices: dict[str, dict[str, float]]
    arms: list[ArmStatus]
    rows: list[ArmRow]
    curves: list[Curve]
    missing: dict[str, str] = field(default_factory=dict)  # baseline kind -> why some tasks lack it

    @property
    def finished(self) -> bool:
        return all(a.finished for a in self.arms)

    @property
    def overall(self) -> str:
        """The level of the rows over every task: `all`, or the one level when every task has it."""
        levels = {r.level for r in self.rows}
        return next(iter(levels)) if len(levels) == 1 else ALL

    def row(self, arm: str, level: str | None = None) -> ArmRow | None:
        """An arm's row for `level` (default: over every task)."""
        return next((r for r in self.rows if r.arm == arm and r.level == (level or self.overall)), None)

    def curve(self, arm: str, kind: str, level: str | None = None) -> Curve | None:
        """An arm's curve against `kind` for `level` (default: over every task)."""
        return next((c for c in self.curves if c.arm == arm and c.kind == kind and c.level == (level or self.overall)), None)

    @property
    def plotted(self) -> str:
        """The baseline the plot is against: torch.compile, or eager (strict) where no task has torch.compile's time."""
        return COMPILED if any(v is not None for c in self.curves if c.kind == COMPILED for v in c.fast_1) else EAGER

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["levels"] = sorted({r.level for r in self.rows})
        d["labels"] = {kind: baseline_label(kind) for kind in KINDS}
        return d


def gather(workspace: Path, spec: BenchSpec, state: BenchState) -> BenchResults:
    """The bench in `workspace` as its stores have it now (a stopped bench too: its arms' unfinished tasks count as
    they stand)."""
    with Store(workspace) as bench_store:
        baselines = {t["key"]: bench_store.baselines(t["key"], state.device_name) for t in spec.tasks}
    statuses, records = [], {}
    for arm in spec.arms:
        path = workspace / ARMS_DIR / arm.name
        runs = _runs(path)
        if not runs:
            statuses.append(ArmStatus(arm.name, spec.arm_config(arm).search.describe(), None, False,
                                      state.arm_wall_s.get(arm.name, 0.0)))
            continue
        with Store(path) as store:
            run = load_run(store, runs[0])
            records[arm.name] = [_record(store, runs[0], t, baseline_ratios(baselines[t.key]), state.device_name)
                                 for t in run.tasks]
        config = run.config or spec.arm_config(arm)  # the run's own: its skill snapshot is known once it started
        statuses.append(ArmStatus(arm.name, config.search.describe(), runs[0], run.finished,
                                  state.arm_wall_s.get(arm.name, 0.0)))
    priced = bool(spec.base.llm.prices)
    rows = [_row(arm, level, group, state.device_name, priced) for arm, tasks in records.items()
            for level, group in _levels(tasks)]
    curves = [Curve(arm, level, kind, _curve(group, kind, spec.judge_calls, state.device_name))
              for arm, tasks in records.items() for level, group in _levels(tasks) for kind in KINDS]
    return BenchResults(target=spec.target, device_name=state.device_name, model=spec.base.llm.model,
                        judge_calls=spec.judge_calls, tokens=spec.tokens,
                        prices={name: p.model_dump() for name, p in spec.base.llm.prices.items()}, arms=statuses,
                        rows=rows, curves=curves, missing=_missing(baselines, state))


def _runs(path: Path) -> list[str]:
    if not (path / "kernelcraft.db").is_file():
        return []
    with Store(path) as store:
        return [r.id for r in store.runs(RUN_KIND)]


def _record(store: Store, run_id: str, task: TaskReport, ratios: dict[str, float], device_name: str) -> TaskRecord:
    own = task.outcome()
    outcome = replace(own, baseline_ratios=ratios, device_name=own.device_name or device_name)
    # Each judged attempt is a judge call, its verdict reused or not, as the task's judge budget counts them
    # (TaskContext.judge); a template search's screening verdicts are not its result.
    judged = sorted((a for a in task.attempts if a.verdict_id is not None and not a.meta.get(SCREENING)),
                    key=lambda a: a.created_at)
    best: float | None = None
    best_after = []
    for a in judged:
        if a.correct:
            best = a.speedup if best is None else max(best, a.speedup)
        best_after.append(best)
    verdicts = store.verdicts(run_id=run_id, task_key=task.key)
    u = task.usage
    return TaskRecord(task.key, _level(task.level), outcome, best_after, u.prompt_tokens + u.completion_tokens,
                      u.cost_usd, u.unpriced_calls,
                      judge_s=sum(store.verdict(v.id).resources.get("wall_s", 0.0) for v in verdicts), model_s=u.latency_s)


def _level(level: int | None) -> str:
    return f"level {level}" if level is not None else ALL


def _levels(tasks: list[TaskRecord]) -> list[tuple[str, list[TaskRecord]]]:
    """Each level's tasks, then every task together when there is more than one level."""
    levels = sorted({t.level for t in tasks})
    groups = [(level, [t for t in tasks if t.level == level]) for level in levels]
    return groups + [(ALL, tasks)] if len(levels) > 1 else groups


def _row(arm: str, level: str, tasks: list[TaskRecord], device_name: str, priced: bool) -> ArmRow:
    """`priced`: whether the bench stated a price (without one, dollars are n/a: cached replies' zero is no price)."""
    costs = [t.cost_usd for t in tasks if t.cost_usd is not None]
    calls = [len(t.best_after) for t in tasks]
    return ArmRow(arm, level, summarize(level, [t.outcome for t in tasks], device_name), sum(calls), max(calls, default=0),
                  sum(t.tokens for t in tasks), sum(costs) if costs and priced else None, sum(t.unpriced_calls for t in tasks),
                  sum(t.judge_s for t in tasks), sum(t.model_s for t in tasks))


def _curve(tasks: list[TaskRecord], kind: str, judge_calls: int, device_name: str) -> list[float | None]:
    """fast_1 against `kind` after each k judge calls per task (a task that spent fewer keeps its last best); None
    where no task has `kind` recorded."""
    if kind != EAGER and not any(kind in t.outcome.baseline_ratios for t in tasks):
        return [None] * judge_calls
    points = []
    for k in range(1, judge_calls + 1):
        outcomes = []
        for t in tasks:
            best = t.best_after[min(k, len(t.best_after)) - 1] if t.best_after else None
            outcomes.append(replace(t.outcome, correct=best is not None, speedup=best, device_name=device_name))
        judged = [o for o in outcomes if o.judge_error is None]
        points.append(against(kind, judged).fast_p[1.0])
    return points


def _missing(baselines: dict[str, dict[str, Any]], state: BenchState) -> dict[str, str]:
    """Why a baseline column is n/a for some tasks: each cause with its count."""
    missing = {}
    for kind in (DEFAULTS, COMPILED):
        lacking = [key for key, recorded in baselines.items() if kind not in recorded]
        if lacking:
            causes = Counter(state.baseline_notes.get(key, NOT_TIMED) for key in lacking)
            missing[kind] = f"n/a for {len(lacking)} of {len(baselines)} tasks: " + "; ".join(
                f"{cause}" + (f" ({n} tasks)" if len(causes) > 1 else "") for cause, n in causes.most_common())
    return missing


__all__ = ["ALL", "COMPILED", "DEFAULTS", "KINDS", "ArmRow", "ArmStatus", "BenchResults", "Curve", "TaskRecord", "gather"]
