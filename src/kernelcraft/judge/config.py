"""Judge configuration: tolerances, seeds, timing recipe, limits. One dataclass, JSON-serialisable.

The worker process receives this as JSON, so it stays a plain dataclass (no pydantic on the worker side).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

# Per-dtype tolerance (atol = rtol), as KernelBench uses today.
DEFAULT_TOLERANCE = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2}


@dataclass(frozen=True)
class Timeouts:
    """Seconds allowed per stage; on expiry the worker's whole process group is killed."""

    setup: float = 120.0
    build: float = 600.0
    load: float = 120.0
    correctness: float = 300.0
    profile: float = 120.0
    timing: float = 600.0
    # With `scale`, a candidate's correctness, timing and profiling commands get what the reference's own
    # time says they need (timeouts.py): `floor`, plus `slowdown` times the reference's call, capped by
    # the values above. A hung kernel on a 3 ms task dies in seconds, and frees the device for the others.
    scale: bool = True
    floor: float = 10.0
    slowdown: float = 100.0  # how many times slower than the reference a candidate's call may run
    first_call: float = 120.0  # added to a Triton candidate's first call: its kernels compile (and autotune) there


SCENARIOS = ("offline", "server", "sustained")  # the timing scenarios (TimingConfig): offline is the headline


@dataclass(frozen=True)
class TimingConfig:
    """The timing recipe (docs/judge.md), with its knobs."""

    warmup_ms: float = 25.0
    warmup_calls: int = 3
    min_iters: int = 20
    max_iters: int = 300
    target_ms: float = 300.0  # total measured time per side aimed for
    # The trusted time (the reference alone, for the slowed-reference audit) needs to be good to
    # a few percent, not to the candidate's precision; it is taken for every task, under the lock.
    trusted_target_ms: float = 100.0
    input_sets: int = 3  # rotating input sets, generated outside the timed region
    fresh_inputs: bool = True  # roll every timed input so no two iterations see the same contents
    # Timed rounds whose outputs the task's trusted worker checks, on average: the judge checks each round with
    # probability spot_checks / rounds, drawn after the candidate's call returned (rounds.py). A candidate wrong
    # on half the rounds or more (as it must be to move the median) goes unseen with probability
    # (1 - spot_checks / rounds) ** (rounds / 2) < exp(-spot_checks / 2): under 0.7% at 10.
    spot_checks: int = 10
    flush_bytes: int = 256 * 1024 * 1024  # L2 flush buffer on cuda
    cpu_flush_bytes: int = 32 * 1024 * 1024
    min_noise: float = 0.01  # a speedup within max(noise, this) of 1.0 is reported as none
    remeasure_above: float = 3.0  # re-time any speedup above this before believing it
    # A measurement whose reference's half-IQR over median exceeds this was taken on a busy host:
    # it is taken again up to noisy_retimes times and the quietest one kept.
    retime_spread_above: float = 0.2
    noisy_retimes: int = 2
    # Stop the judge's other workers (their builds, compilers, start-ups) while one is timed: a
    # short call's time is mostly host time, which they slow several times over.
    hold_others_still: bool = True
    # Pin the timed rounds to the CPU where the host runs fastest now (timing.FastCpu), and move them
    # when its probe's median slows past this factor of the speed it was picked at.
    fast_cpu: bool = True
    fast_cpu_slower_than: float = 1.3
    # The server scenario (besides offline, back to back): a pause before every timed call,
    # exponential with mean 1/server_qps seconds, not timed. Reported in Verdict.scenarios.
    server: bool = False
    server_qps: float = 200.0
    server_max_iters: int = 100
    # The sustained scenario (a third, beside offline and server): the device is first kept busy (a large
    # matmul, over and over, as a training job keeps it) until its clock has settled, at least
    # sustained_min_heat_s and at most sustained_heat_s seconds; then the rounds run back to back, as
    # offline. Reported in Verdict.scenarios with the clock it ran at.
    sustained: bool = False
    sustained_heat_s: float = 30.0
    sustained_min_heat_s: float = 5.0

    def for_scenario(self, scenario: str | None) -> "TimingConfig":
        """These settings for a scenario: offline (and sustained) as they are, "server" under its own cap on rounds."""
        if scenario != "server":
            return self
        return replace(self, max_iters=self.server_max_iters, min_iters=min(self.min_iters, self.server_max_iters))


@dataclass(frozen=True)
class JudgeConfig:
    """Everything the judge can be told. The rules of docs/judge.md hold whatever these say."""

    seeds: int = 5  # correctness seeds (secret, drawn per judge session)
    binary_seeds: int = 2  # 0/1 input sets of tasks that ask for the binary_exact check
    atol: float | None = None  # None: per dtype (task metadata first)
    rtol: float | None = None
    allow_tf32: bool = False
    static_checks: bool = True  # off only to test the runtime defences behind them
    second_shape: bool = True  # re-check at the task's "check" size, where it declares one (flag only)
    # Accuracy against a float64 truth (worker/expected.py): an element passes within the tolerance of the
    # truth, or within `truth_factor` times the task-dtype reference's own error against it. Where
    # the truth does not apply (or is off), the reference's output is compared with the tolerance.
    truth: bool = True
    truth_factor: float = 2.0
    truth_max_gb: float = 4.0  # float64 outputs (and inputs) larger than this: the reference is the truth
    truth_max_seconds: float = 20.0  # one float64 forward slower than this: likewise
    # The rule on library calls (rules.py; docs/judge.md, "Library calls and coverage"), on the share of the forward's time
    # in the candidate's own kernels: below `coverage_credit_below` a correct candidate is flagged low_coverage and
    # its speedup earns no credit; at `coverage_reject_below` or less (or with none of its kernels run) it is rejected.
    coverage_credit_below: float = 0.5
    coverage_reject_below: float = 0.0
    floor_margin: float = 0.9  # faster than margin * bytes floor => hack_detected
    slowed_reference_flag: float = 1.3  # ref time next to candidate / trusted ref time
    slowed_reference_reject: float = 2.0
    control_reuse_s: float = 60.0  # a control this recent (the reference next to itself) may clear the flag; a reject takes its own
    cpu_threads: int = 1  # torch threads in cpu workers: stable, comparable timings
    memory_limit_gb: float = 32.0  # address-space limit of cpu workers (cuda needs a large VA space)
    file_size_limit_gb: float = 64.0
    timeouts: Timeouts = field(default_factory=Timeouts)
    timing: TimingConfig = field(default_factory=TimingConfig)

    def tolerance(self, dtype: str, task_atol: float | None = None, task_rtol: float | None = None) -> tuple[float, float]:
        base = DEFAULT_TOLERANCE[dtype]
        atol = self.atol if self.atol is not None else task_atol if task_atol is not None else base
        rtol = self.rtol if self.rtol is not None else task_rtol if task_rtol is not None else base
        return float(atol), float(rtol)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "JudgeConfig":
        """The configuration these options describe; a wrong name, type or range is a ValueError naming the option."""
        d = dict(d)
        nested = {"timeouts": Timeouts, "timing": TimingConfig}
        for name, kind in nested.items():
            value = d.get(name, {})
            if not isinstance(value, dict):
                raise ValueError(f"{name} = {value!r}: expected a table of options")
            _check(kind, value, f"{name}.")
        _check(cls, {k: v for k, v in d.items() if k not in nested}, "")
        return cls(timeouts=Timeouts(**d.pop("timeouts", {})), timing=TimingConfig(**d.pop("timing", {})), **d)

    def with_overrides(self, overrides: dict[str, Any]) -> "JudgeConfig":
        """A copy with nested overrides, e.g. {"timeouts": {"correctness": 10}, "seeds": 3}."""
        d = self.to_dict()
        for k, v in overrides.items():
            if isinstance(v, dict) and isinstance(d.get(k), dict):
                d[k] = {**d[k], **v}
            else:
                d[k] = v
        return JudgeConfig.from_dict(d)


# Options that must be above zero; every other number must be zero or more. All must be finite.
_POSITIVE = {"seeds", "cpu_threads", "truth_factor", "truth_max_seconds", "memory_limit_gb", "file_size_limit_gb", "min_iters", "max_iters", "target_ms",
             "trusted_target_ms", "input_sets", "server_qps", "server_max_iters", "sustained_heat_s",
             *(f.name for f in fields(Timeouts))}
_KINDS = {"int": (int,), "float": (int, float), "bool": (bool,)}


def _check(cls: type, d: dict[str, Any], prefix: str) -> None:
    """Each option of `d` is a field of `cls` with a value of its type and range (TOML gives any type)."""
    types = {f.name: str(f.type) for f in fields(cls)}  # the nested tables are checked on their own
    unknown = set(d) - set(types)
    if unknown:
        raise ValueError(f"unknown judge option(s): {', '.join(prefix + u for u in sorted(unknown))}")
    for name, value in d.items():
        base, _, optional = types[name].partition(" | ")
        if value is None and optional:
            continue
        if base == "bool":
            if not isinstance(value, bool):
                raise ValueError(f"{prefix}{name} = {value!r}: expected true or false")
            continue
        if isinstance(value, bool) or not isinstance(value, _KINDS[base]):
            raise ValueError(f"{prefix}{name} = {value!r}: expected {'an integer' if base == 'int' else 'a number'}")
        if not math.isfinite(value) or value < 0 or (value == 0 and name in _POSITIVE):
            bound = "above zero" if name in _POSITIVE else "zero or more"
            raise ValueError(f"{prefix}{name} = {value!r}: expected a finite number {bound}")


__all__ = ["DEFAULT_TOLERANCE", "JudgeConfig", "TimingConfig", "Timeouts"]
