"""Suite metrics as KernelBench defines them (docs/judge.md), against each recorded baseline.

Rules, in one place:
- A correct task's speedup is its verdict's effective speedup (judge.SPEEDUP_CREDIT): 1.00x inside the noise band,
  and 1.00x at most for a candidate flagged low_coverage (the judge's rule on library calls, judge/rules.py).
- A task is judged unless the judge failed on its own side (`judge_error`: a full disk, a lost device...,
  never the candidate's fault); a task not judged is left out of every denominator and reported apart,
  with its cause. A missing or failed task is judged and counts as not fast.
- fast_p against eager (strict), the reference every verdict is timed next to, is over ALL judged tasks.
- Against another baseline X, a correct task's speedup is its effective speedup times X's recorded time
  over eager (strict)'s recorded time on the same device (`baseline_ratios`). A failed task is not fast
  against any baseline; a correct task without X recorded cannot be placed and leaves X's denominator
  (`BaselineSummary.missing` counts them).
- Geometric mean, median and win rate are over the correct tasks placed against the baseline.
- Speedups measured on different devices are never put together: a set of tasks judged on several device names
  is summarized once per device name (`summarize_by_level`)."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from ..judge import Status, Verdict, baseline_kind
from ..store import Baseline

FAST_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)

EAGER = baseline_kind("reference")  # eager under the judge's strict precision: every verdict's reference
LEGACY_COMPILE = "compile"  # torch.compile under strict precision, as older workspaces recorded it
# Every baseline a summary may be against, in the order reports show them, with the name each headline gives it.
BASELINES: dict[str, str] = {
    EAGER: "eager (strict)",
    baseline_kind("reference_default"): "eager (PyTorch defaults)",
    baseline_kind("compiled"): "torch.compile (PyTorch defaults)",
    baseline_kind("tunableop"): "TunableOp",
    LEGACY_COMPILE: "torch.compile (strict, legacy)",
}
UNKNOWN_CAUSE = "unknown cause"


def baseline_label(kind: str) -> str:
    """The name reports give a store kind: "eager (strict)", or "eager (strict) @server" for another scenario."""
    base, _, scenario = kind.partition("@")
    label = BASELINES.get(base, base)
    return f"{label} @{scenario}" if scenario else label


def baseline_ratios(baselines: dict[str, Baseline]) -> dict[str, float]:
    """Each recorded offline baseline's median time over eager (strict)'s, from a task's baselines on one device."""
    eager = baselines.get(EAGER)
    if eager is None or eager.median_ms <= 0:
        return {}
    return {kind: baselines[kind].median_ms / eager.median_ms for kind in BASELINES if kind != EAGER and kind in baselines}


def judge_error_cause(message: str) -> str:
    """A judge_error verdict's cause, as summaries group it: the first line of its message."""
    lines = message.strip().splitlines()
    return lines[0] if lines else UNKNOWN_CAUSE


@dataclass(frozen=True)
class TaskOutcome:
    task_key: str
    level: int | None
    correct: bool
    speedup: float | None = None  # effective speedup vs eager (strict) (Verdict.effective_speedup)
    baseline_ratios: dict[str, float] = field(default_factory=dict)  # kind -> its recorded time / eager (strict)'s
    judge_error: str | None = None  # the cause, when the judge failed on its side and the task was not judged
    device_name: str = ""  # the device its verdict came from; "" for a task missing or failed before the judge

    @classmethod
    def of_verdict(cls, task_key: str, level: int | None, v: Verdict, baselines: dict[str, Baseline]) -> "TaskOutcome":
        """A task judged once (`eval-suite`), with the baselines recorded for its verdict's device."""
        device_name = str(v.env.get("device_name", ""))
        if v.status is Status.JUDGE_ERROR:
            return cls(task_key, level, False, judge_error=judge_error_cause(v.message), device_name=device_name)
        if not v.correct:
            return cls(task_key, level, False, device_name=device_name)
        return cls(task_key, level, True, v.effective_speedup, baseline_ratios(baselines), device_name=device_name)

    def speedup_vs(self, kind: str) -> float | None:
        """The speedup against baseline `kind`; None unless correct and, beyond eager (strict), recorded."""
        if not self.correct or self.speedup is None:
            return None
        if kind == EAGER:
            return self.speedup
        ratio = self.baseline_ratios.get(kind)
        return None if ratio is None else self.speedup * ratio


@dataclass(frozen=True)
class BaselineSummary:
    """fast_p and the speedup statistics of a set of tasks against one baseline."""

    kind: str
    label: str
    tasks: int  # fast_p's denominator: the judged tasks, less the correct ones without this baseline
    correct: int  # correct tasks placed against this baseline
    missing: int  # correct tasks without this baseline recorded, left out
    fast_p: dict[float, float]
    geomean: float | None
    median: float | None
    win_rate: float | None  # share of the placed correct tasks faster than the baseline


@dataclass
class Summary:
    label: str
    total: int  # every task, judged or not
    judged: int
    correct: int
    baselines: list[BaselineSummary] = field(default_factory=list)  # eager (strict) first
    not_judged: dict[str, int] = field(default_factory=dict)  # judge_error cause -> tasks
    device_name: str = ""  # the device every speedup here was measured on ("" when none was named)

    @property
    def eager(self) -> BaselineSummary:
        """Against eager (strict), the reference every verdict's speedup is measured against."""
        return self.baselines[0]

    @property
    def fast_p(self) -> dict[float, float]:
        return self.eager.fast_p

    @property
    def geomean(self) -> float | None:
        return self.eager.geomean

    @property
    def median(self) -> float | None:
        return self.eager.median

    @property
    def win_rate(self) -> float | None:
        return self.eager.win_rate

    def vs(self, kind: str) -> BaselineSummary | None:
        """The summary against baseline `kind`, None when no correct task has it recorded."""
        return next((b for b in self.baselines if b.kind == kind), None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def geomean(xs: list[float]) -> float | None:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def against(kind: str, judged: list[TaskOutcome]) -> BaselineSummary:
    """Judged tasks' fast_p and speedup statistics against baseline `kind` (the module's rules)."""
    correct = [o for o in judged if o.correct and o.speedup is not None]
    speeds = [x for o in correct if (x := o.speedup_vs(kind)) is not None]
    missing = len(correct) - len(speeds)
    tasks = len(judged) - missing
    return BaselineSummary(
        kind=kind, label=baseline_label(kind), tasks=tasks, correct=len(speeds), missing=missing,
        fast_p={p: (sum(1 for x in speeds if x > p) / tasks if tasks else 0.0) for p in FAST_P},
        geomean=geomean(speeds), median=statistics.median(speeds) if speeds else None,
        win_rate=sum(1 for x in speeds if x > 1.0) / len(speeds) if speeds else None)


def summarize(label: str, outcomes: list[TaskOutcome], device_name: str = "") -> Summary:
    """Against eager (strict), and against each other baseline some correct task has recorded; `device_name` names the
    device the outcomes were judged on (the caller keeps devices apart)."""
    judged = [o for o in outcomes if o.judge_error is None]
    summaries = [against(kind, judged) for kind in BASELINES]
    return Summary(label=label, total=len(outcomes), judged=len(judged), correct=summaries[0].correct,
                   baselines=[s for s in summaries if s.kind == EAGER or s.correct],
                   not_judged=dict(Counter(o.judge_error for o in outcomes if o.judge_error is not None)),
                   device_name=device_name)


def _most_common_device(outcomes: list[TaskOutcome]) -> str:
    """The device name most of the outcomes were judged on (ties: the first in name order); "" when none has one."""
    counts = Counter(o.device_name for o in outcomes if o.device_name)
    return min(counts, key=lambda name: (-counts[name], name)) if counts else ""


def _placed(outcomes: list[TaskOutcome]) -> list[tuple[str, TaskOutcome]]:
    """Each outcome with the device name it is summarized under: its own, else its level's most common, else the most
    common of all (summarize_by_level's rule)."""
    fallback = _most_common_device(outcomes)
    home = {lv: _most_common_device([o for o in outcomes if o.level == lv]) or fallback for lv in {o.level for o in outcomes}}
    return [(o.device_name or home[o.level], o) for o in outcomes]


def _per_device(label: str, placed: list[tuple[str, TaskOutcome]]) -> list[Summary]:
    """One summary of the placed outcomes per device name, in name order."""
    return [summarize(label, [o for d, o in placed if d == device], device) for device in sorted({d for d, _ in placed})]


def summarize_per_device(label: str, outcomes: list[TaskOutcome]) -> list[Summary]:
    """One summary per device name (summarize_by_level's rule for outcomes without one), the device with the most
    tasks first: a run's headline, and the devices summarized apart."""
    return sorted(_per_device(label, _placed(outcomes)), key=lambda s: -s.total) or [summarize(label, [])]


def summarize_by_level(outcomes: list[TaskOutcome]) -> list[Summary]:
    """One summary per level (tasks without a level together), then one over everything; each once per device name
    when the outcomes come from several, since speedups on different devices are never averaged together.

    An outcome without a device name (a task missing or failed before the judge; in a run, a task without a correct
    candidate) counts, as not fast, only in the row of its level's most common device name (the most common over all
    levels when its level has none; ties: the first in name order), so that no task is counted twice. With a single
    device name (the usual case) that is one summary per level, as before."""
    levels = sorted({o.level for o in outcomes}, key=lambda lv: (lv is None, lv or 0))
    placed = _placed(outcomes)
    out = [s for lv in levels
           for s in _per_device(f"level {lv}" if lv is not None else "tasks", [(d, o) for d, o in placed if o.level == lv])]
    if len(levels) > 1:
        out += _per_device("all", placed)
    return out


def not_judged_text(counts: dict[str, int], what: str = "not judged") -> str:
    """Judge errors by cause in a line: "not judged: 2 (disk full)", "not judged: 3 (disk full: 2; worker could
    not start: 1)"; "" when there were none."""
    if len(counts) == 1:
        (cause, n), = counts.items()
        return f"{what}: {n} ({cause})"
    causes = "; ".join(f"{cause}: {n}" for cause, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"{what}: {sum(counts.values())} ({causes})" if counts else ""
