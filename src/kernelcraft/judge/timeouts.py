"""How long each of a candidate's commands may take, from what the reference's own run took
(parent side). A floor, plus the reference's time times the slowdown a candidate may have, capped by
the stage's configured timeout: a hung kernel on a 3 ms task is killed in seconds, and the device
lock it holds goes to the other evaluations, instead of after the five minutes a stage may take."""

from __future__ import annotations

from dataclasses import dataclass

from .config import JudgeConfig
from .protocol import Facts

_PROFILER_START_S = 20.0  # the profiler's own start-up (CUPTI) before the first profiled call


@dataclass(frozen=True)
class CommandTimeouts:
    """Seconds for each of a candidate's commands (and the trusted worker's comparison)."""

    first_call: float  # the first seed: a Triton candidate's kernels compile there
    run_seed: float
    compare: float
    spot_check: float  # the trusted worker's check of a timed call: inputs made, the reference (and truth) run
    timing: float
    profile: float
    scaled: bool


def command_timeouts(cfg: JudgeConfig, facts: Facts, *, triton: bool, cpu: bool) -> CommandTimeouts:
    """The timeouts of one evaluation. Without scaling (`timeouts.scale = false`), and for Triton on
    the CPU (its interpreter runs kernels in Python, at a speed unrelated to the reference's), each
    command gets its stage's configured timeout."""
    t, timing = cfg.timeouts, cfg.timing
    if not t.scale or (cpu and triton):
        return CommandTimeouts(t.correctness, t.correctness, t.correctness, t.correctness, t.timing, t.profile, False)
    call, inputs = facts.call_s, facts.input_s
    run = t.floor + 2 * inputs + t.slowdown * call
    # The trusted worker computes the seed again (and its float64 truth) unless it holds it.
    recompute = 2 * (inputs + call + facts.truth_s)
    compare = t.floor + (0 if facts.cached else recompute)
    # The rounds a measurement takes at most: warm-up until each side has run warmup_ms (at most 200),
    # then as many timed rounds as fit target_ms at the reference's speed, each both sides' calls, the
    # inputs rolled, and in the server scenario a pause of 1/qps on average before every call.
    fastest = max(call, 1e-6)
    warm = min(200, max(timing.warmup_calls, int(timing.warmup_ms / 1e3 / fastest) + 1))
    iters = min(timing.max_iters, max(timing.min_iters, int(timing.target_ms / 1e3 / fastest)))
    pause = 2 * 3 / timing.server_qps if timing.server else 0.0
    per_round = (1 + t.slowdown) * call + 3 * inputs + pause
    heat = timing.sustained_heat_s if timing.sustained else 0.0  # the sustained scenario's command heats first
    measure = t.floor + heat + (warm + iters + 1) * per_round
    profile = t.floor + _PROFILER_START_S + 3 * (1 + t.slowdown) * call
    first = run + (t.first_call if triton else 0.0)
    return CommandTimeouts(min(first, t.correctness), min(run, t.correctness), min(compare, t.correctness),
                           min(t.floor + recompute, t.correctness), min(measure, t.timing), min(profile, t.profile), True)
