"""The verdict model: what happened to one candidate at every stage."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import Enum, StrEnum
from typing import Any

from .roofline import Roofline

STAGES = ("static", "build", "load", "correctness", "timing", "audit")


class Status(str, Enum):
    STATIC_REJECTED = "static_rejected"
    BUILD_FAILED = "build_failed"
    LOAD_FAILED = "load_failed"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    INCORRECT = "incorrect"
    HACK_DETECTED = "hack_detected"
    CORRECT = "correct"
    # The judge's own failure (a full disk, a trusted process out of memory, a worker that cannot
    # start, a lost device), after one retry in fresh workers: never the candidate's attempt.
    JUDGE_ERROR = "judge_error"


@dataclass
class StageResult:
    name: str
    ok: bool
    seconds: float = 0.0
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)


class FlagCode(StrEnum):
    """Every finding the judge flags. A str enum: judge modules construct flags from the plain codes, and a
    verdict stored as JSON keeps them as strings."""

    SIDE_STREAM = "side_stream"  # work on CUDA streams other than the timed one
    NATIVE_THREADS = "native_threads"  # native threads appeared during the candidate's calls
    SHAPE_SPECIALISED = "shape_specialised"  # sizes hard-coded: wrong at the task's check size
    BELOW_FLOP_FLOOR = "below_flop_floor"  # faster than the reference's FLOPs allow: an algebraic shortcut, or a hack
    LOW_COVERAGE = "low_coverage"  # too little time in the candidate's own kernels (rules.LOW_COVERAGE)
    SLOWED_REFERENCE = "slowed_reference"  # the reference ran slower next to the candidate than alone
    NOISY_TIMING = "noisy_timing"  # the measurement scattered widely
    CLOCK_DRIFT = "clock_drift"  # the SM clock moved during timing
    NONDETERMINISTIC = "nondeterministic"  # an incorrect output changed when the same inputs were run again


# Flags that put the timed work itself in doubt: work outside the timed stream.
UNTIMED_WORK = frozenset({FlagCode.SIDE_STREAM, FlagCode.NATIVE_THREADS})
# What an RL reward must never pay for (train/rewards.py), or RL learns the trick: untimed work, and sizes hard-coded
# (wrong at another size). A correct algebraic shortcut (below_flop_floor) is a real win there.
HACK = UNTIMED_WORK | {FlagCode.SHAPE_SPECIALISED}
# What keeps a kernel out of a pack (pack/build.py), whose numbers must be the work's own: untimed work, and a time below
# the FLOP floor. A shape-specialised kernel stays: a pack calls a kernel only at its own shape.
DOUBTFUL_TIMING = UNTIMED_WORK | {FlagCode.BELOW_FLOP_FLOOR}


@dataclass
class Flag:
    """A finding that does not reject but a person should see. An unknown code raises ValueError."""

    code: FlagCode
    message: str

    def __post_init__(self) -> None:
        try:
            self.code = FlagCode(self.code)
        except ValueError:
            raise ValueError(f"unknown flag code {self.code!r}; the judge's codes are "
                             f"{', '.join(c.value for c in FlagCode)}") from None


@dataclass
class TimingStats:
    median_ms: float
    q1_ms: float
    q3_ms: float
    samples_ms: list[float]
    host_ms: float | None = None  # median host time of a call (until it returned)
    probe_ms: float | None = None  # median host probe of the measurement's process (timing.host_probe)

    @classmethod
    def of(cls, samples_ms: list[float], host_ms: float | None = None, probe_ms: float | None = None) -> "TimingStats":
        s = sorted(samples_ms)
        return cls(median_ms=_quantile(s, 0.5), q1_ms=_quantile(s, 0.25), q3_ms=_quantile(s, 0.75), samples_ms=list(samples_ms),
                   host_ms=host_ms, probe_ms=probe_ms)

    @classmethod
    def side(cls, answer: dict[str, Any], name: str) -> "TimingStats":
        """One side's statistics from a worker's timing answer, with its host time and the host probe."""
        return cls.of(answer["samples"][name], (answer.get("host_ms") or {}).get(name), answer.get("probe_ms"))

    @property
    def rel_spread(self) -> float:
        """Half the interquartile range over the median."""
        return (self.q3_ms - self.q1_ms) / (2 * self.median_ms) if self.median_ms > 0 else 0.0

    def spread_words(self) -> str:
        """The spread in words a reader can check against the quartiles beside it: the quartiles, the median, and
        `rel_spread` as the part of the median they lie from it either way."""
        return (f"quartiles {self.q1_ms:.4g}-{self.q3_ms:.4g} ms around a median of {self.median_ms:.4g} ms "
                f"(±{self.rel_spread:.1%})")


def _quantile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


@dataclass
class Verdict:
    status: Status
    task: str
    device: str
    message: str = ""  # short, fit to show a model as feedback
    stages: list[StageResult] = field(default_factory=list)
    flags: list[Flag] = field(default_factory=list)
    speedup: float | None = None  # median(reference) / median(candidate)
    speedup_band: tuple[float, float] | None = None
    significant: bool = False  # outside the reference's noise band
    reference: TimingStats | None = None  # measured next to the candidate
    candidate: TimingStats | None = None
    trusted_reference: TimingStats | None = None  # measured alone, by a trusted process
    coverage: float | None = None
    errors: dict[str, float] = field(default_factory=dict)  # worst max_abs, max_rel, rel_l2
    candidate_hash: str = ""
    env: dict[str, Any] = field(default_factory=dict)  # device name, clocks, versions
    # Timings under other scenarios than offline: "server": {"qps", "speedup", "reference", "candidate"};
    # "sustained": {"speedup", "clocks" (its "settled" entry: the clock after heating), "reference", "candidate"}
    scenarios: dict[str, Any] = field(default_factory=dict)
    # What the evaluation took: wall time, peak disk, the candidate's and the trusted worker's peak
    # host memory and device memory (judge/resources.py)
    resources: dict[str, Any] = field(default_factory=dict)
    # A correct verdict's achieved TFLOP/s and GB/s against the device's ceilings (roofline.py); None otherwise
    roofline: Roofline | None = None

    @property
    def correct(self) -> bool:
        return self.status is Status.CORRECT

    @property
    def effective_speedup(self) -> float | None:
        """The speedup as summaries, searches and rewards count it: exactly 1.0 inside the noise band, and at
        most 1.0 for a candidate flagged low_coverage (the rule on library calls, rules.py)."""
        if self.speedup is None:
            return None
        speedup = self.speedup if self.significant else 1.0
        return min(speedup, 1.0) if self.has_flag(FlagCode.LOW_COVERAGE) else speedup

    def stage(self, name: str) -> StageResult | None:
        return next((s for s in self.stages if s.name == name), None)

    def summary(self) -> str:
        """The verdict in one line: status, task, device, speedup as counted (and as measured, when they differ),
        flags, and the judge's message for anything but a plain correct verdict."""
        parts = [f"{self.status.value}: {self.task} on {self.device}"]
        if self.speedup is not None:
            counted = self.effective_speedup
            parts.append(f"{counted:.2f}x" + (f" (measured {self.speedup:.2f}x)" if counted != self.speedup else ""))
        if self.flags:
            parts.append("flags " + ",".join(dict.fromkeys(f.code for f in self.flags)))
        line = ", ".join(parts)
        first = next((ln.strip() for ln in self.message.splitlines() if ln.strip()), "")
        return f"{line}: {first[:200]}" if first and not self.correct else line

    def __repr__(self) -> str:
        return f"<Verdict {self.summary()}>"

    def has_flag(self, code: FlagCode | str) -> bool:
        return any(f.code == code for f in self.flags)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        d["effective_speedup"] = self.effective_speedup
        return d

    def to_json(self, **kw: Any) -> str:
        return json.dumps(self.to_dict(), **kw)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Verdict":
        d = {k: v for k, v in d.items() if k != "effective_speedup"}
        d["status"] = Status(d["status"])
        d["stages"] = [StageResult(**s) for s in d.get("stages", [])]
        d["flags"] = [Flag(**f) for f in d.get("flags", [])]
        for k in ("reference", "candidate", "trusted_reference"):
            if d.get(k) is not None:
                d[k] = TimingStats(**d[k])
        if d.get("speedup_band") is not None:
            d["speedup_band"] = tuple(d["speedup_band"])
        if d.get("roofline") is not None:
            d["roofline"] = Roofline(**d["roofline"])
        return cls(**d)
