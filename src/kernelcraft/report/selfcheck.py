"""The suite self-check's results (`kernelcraft self-check`): per task, the verdict the judge gave the
task's own reference as its candidate, and what the evaluation took of the machine; per level, how
many came out correct, the noise band, and the peaks. Read from the store, so a check made in slices
(a short GPU allowance at a time) reads as one."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

from ..judge import JUDGE_VERSION, Verdict
from ..store import Store

SELF_CHECK_RUN = "self-check"


@dataclass(frozen=True)
class SelfCheckRow:
    """One task's self-check verdict, as the table and the JSON show it."""

    task: str
    level: int | None
    status: str
    speedup: float | None
    noise: float | None  # half the reference's interquartile range over its median (the band's half-width)
    within_noise: bool  # the speedup lies inside the noise band of 1.00x
    truth: str  # "float64", or why the reference is its own truth
    wall_s: float
    disk_peak_bytes: int
    host_peak_bytes: int  # the larger of the candidate's and the trusted worker's
    device_peak_bytes: int
    message: str
    verdict_id: int

    @classmethod
    def of(cls, level: int | None, v: Verdict, verdict_id: int) -> "SelfCheckRow":
        r = v.resources
        timing = v.stage("timing")
        correctness = v.stage("correctness")
        return cls(task=v.task, level=level, status=v.status.value, speedup=v.speedup,
                   noise=timing.details.get("noise") if timing else None,
                   within_noise=v.speedup is not None and not v.significant,
                   truth=str(correctness.details.get("truth", "")) if correctness else "",
                   wall_s=float(r.get("wall_s", 0.0)), disk_peak_bytes=int(r.get("disk_peak_bytes", 0)),
                   host_peak_bytes=max(int(r.get("candidate_host_peak_bytes", 0)), int(r.get("reference_host_peak_bytes", 0))),
                   device_peak_bytes=max(int(r.get("candidate_device_peak_bytes", 0)), int(r.get("reference_device_bytes", 0))),
                   message=v.message, verdict_id=verdict_id)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SelfCheckLevel:
    """A level's (or the whole suite's) self-check in one line."""

    label: str
    total: int
    correct: int
    incorrect: int
    judge_error: int
    other: int  # timeouts, runtime errors, rejects: each one a finding
    within_noise: int  # correct and within the noise band of 1.00x
    noise_median: float | None
    noise_max: float | None
    wall_s: float
    disk_peak_bytes: int
    host_peak_bytes: int
    device_peak_bytes: int
    truth: int  # tasks decided against a float64 truth

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize_self_check(rows: list[SelfCheckRow]) -> list[SelfCheckLevel]:
    """One line per level, then one over every task where there is more than one level."""
    levels = sorted({r.level for r in rows}, key=lambda lv: (lv is None, lv or 0))
    groups = [(f"level {lv}" if lv is not None else "tasks", [r for r in rows if r.level == lv]) for lv in levels]
    if len(groups) > 1:
        groups.append(("all", rows))
    return [_level(label, group) for label, group in groups]


def _level(label: str, rows: list[SelfCheckRow]) -> SelfCheckLevel:
    noise = [r.noise for r in rows if r.noise is not None]
    count = {s: sum(1 for r in rows if r.status == s) for s in ("correct", "incorrect", "judge_error")}
    return SelfCheckLevel(
        label=label, total=len(rows), correct=count["correct"], incorrect=count["incorrect"], judge_error=count["judge_error"],
        other=len(rows) - sum(count.values()), within_noise=sum(1 for r in rows if r.status == "correct" and r.within_noise),
        noise_median=statistics.median(noise) if noise else None, noise_max=max(noise) if noise else None,
        wall_s=sum(r.wall_s for r in rows), disk_peak_bytes=max((r.disk_peak_bytes for r in rows), default=0),
        host_peak_bytes=max((r.host_peak_bytes for r in rows), default=0),
        device_peak_bytes=max((r.device_peak_bytes for r in rows), default=0),
        truth=sum(1 for r in rows if r.truth == "float64"))


def self_checked(store: Store, device_name: str, levels: dict[str, int | None]) -> dict[str, SelfCheckRow]:
    """The latest self-check verdict of each task in `levels` (task key -> level) on this device name
    under this judge version, from any self-check run of the workspace."""
    found: dict[str, SelfCheckRow] = {}
    for run in store.runs(SELF_CHECK_RUN):
        for row in store.verdicts(run_id=run.id):
            if row.task_key not in levels or row.device_name != device_name:
                continue
            v = store.verdict(row.id)
            if v.env.get("judge_version") != JUDGE_VERSION:
                continue
            known = found.get(row.task_key)
            if known is None or known.verdict_id < row.id:
                found[row.task_key] = SelfCheckRow.of(levels[row.task_key], v, row.id)
    return found
