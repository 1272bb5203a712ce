"""Rewards per role, shaped so that RL cannot learn hacks (CUDA-L1) or lazy kernels (Dr.Kernel).

Coder, from one verdict:
- a judge_error (the judge failed on its side: a full disk, a lost device...) is no verdict on the candidate:
  no reward, and the turn is rejected (out of the loss and of every baseline), so a trainer skips it;
- a hack (status hack_detected, or a verdict with one of `hack_flags`, judge.verdict.HACK) earns only
  -hack_penalty: a flagged win must never pay, or RL learns the flag's trick;
- anything else not correct earns 0;
- a correct one earns correct_weight + speedup_weight * min(speedup, speedup_cap) + coverage_weight * coverage,
  the speedup counted as the judge counts it (Verdict.effective_speedup): 1.0 inside the noise band, and
  at most 1.0 for a turn flagged low_coverage (the judge's rule on library calls: too little of the time
  in its own kernels earns no speedup credit; reason "low_coverage"), and a verdict flagged
  slowed_reference paid no more than its speedup over the reference timed alone. A speedup above
  remeasure_above is measured again through `remeasure`, and the lower of the two is rewarded; with
  no re-measurement, or one that is not correct (a judge_error included), the win is rewarded only up to
  remeasure_above.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, Field

from ..judge import LOW_COVERAGE, Status, Verdict, honest_speedup
from ..judge.verdict import HACK, FlagCode
from .advantages import zscore
from .episode import Episode, role_groups


class RewardConfig(BaseModel):
    """Defaults follow daVinci-kernel (Dr.Kernel caps the speedup at 3)."""

    correct_weight: float = 0.5
    speedup_weight: float = 0.5
    coverage_weight: float = 0.5
    speedup_cap: float = Field(6.0, gt=0)
    hack_penalty: float = Field(1.0, ge=0)  # subtracted for hack_detected or a hack flag
    # judge.verdict.HACK: untimed work and hard-coded sizes. Left out there: below_flop_floor (a correct algebraic
    # shortcut is a real win), low_coverage (the judge's rule caps its speedup at 1.0, and the coverage term pays
    # less), noisy_timing and clock_drift (about the measurement, not the kernel), and slowed_reference, which a busy
    # machine raises too: a verdict with it is paid only its speedup over the reference timed alone, and the judge
    # itself rejects a significant win that rests on a slowed reference.
    hack_flags: list[FlagCode] = Field(default_factory=lambda: sorted(HACK))
    remeasure_above: float = Field(3.0, gt=0)  # speedups above this are re-measured before they are rewarded
    normalize: bool = False  # z-score per (group, role), clipped to +-clip
    clip: float = Field(1.5, gt=0)
    admitted_weight: float = 0.5  # summarizer: for a skill admitted to the library
    gain_weight: float = 0.5  # summarizer: times the verified gain, capped at speedup_cap


@dataclass(frozen=True)
class CoderReward:
    value: float
    rejected: bool
    reason: str  # "", "judge_error", "not_correct", "hack", "low_coverage", "remeasured", "not_remeasured"
    parts: dict[str, float]  # correct, speedup, coverage, penalty: the weighted terms, summing to value


def coder_reward(verdict: Verdict, cfg: RewardConfig,
                 remeasure: Callable[[Verdict], Verdict | None] | None = None) -> CoderReward:
    """The reward of one coder turn; `remeasure` evaluates the same candidate again (on another
    device, ideally) and is called only for a speedup above cfg.remeasure_above."""
    if verdict.status is Status.JUDGE_ERROR:
        return CoderReward(0.0, True, "judge_error", _parts())
    if _is_hack(verdict, cfg):
        return _hack(cfg)
    if not verdict.correct:
        return CoderReward(0.0, False, "not_correct", _parts())
    coverage = verdict.coverage or 0.0  # a correct verdict without coverage shows no own kernel at work
    speedup, reason = honest_speedup(verdict), LOW_COVERAGE if verdict.has_flag(LOW_COVERAGE) else ""
    if speedup > cfg.remeasure_above:
        again = remeasure(verdict) if remeasure is not None else None
        if again is not None and _is_hack(again, cfg):
            return _hack(cfg)
        if again is None or not again.correct:
            speedup, reason = cfg.remeasure_above, "not_remeasured"
        else:
            speedup, reason = min(speedup, honest_speedup(again)), "remeasured"
    parts = _parts(correct=cfg.correct_weight, speedup=cfg.speedup_weight * min(speedup, cfg.speedup_cap),
                   coverage=cfg.coverage_weight * coverage)
    return CoderReward(sum(parts.values()), False, reason, parts)


def selector_reward(coder_returns: list[float]) -> float:
    """The selector's reward: the mean return of the coder trajectories run under its selection."""
    return float(np.mean(coder_returns)) if coder_returns else 0.0


def summarizer_reward(admitted: bool, verified_gain: float | None, cfg: RewardConfig) -> float:
    """The summarizer's reward: admitted_weight for a skill the library admitted, plus gain_weight
    times the gain its verification measured (speedup with the skill over speedup without, as
    admission compares them; capped at speedup_cap). A skill not admitted earns 0: its gain, if
    any, did not clear admission's thresholds, so it is not verified."""
    if not admitted:
        return 0.0
    return cfg.admitted_weight + cfg.gain_weight * min(verified_gain or 0.0, cfg.speedup_cap)


def normalize_rewards(episodes: list[Episode], cfg: RewardConfig) -> None:
    """With cfg.normalize, replace each accepted step's reward by its z-score among the accepted
    steps of its (group, role), clipped to +-cfg.clip, in place; the raw reward goes to
    Step.info["raw_reward"]. Without it, nothing changes."""
    if not cfg.normalize:
        return
    for trajectories in role_groups(episodes).values():
        steps = [s for t in trajectories for s in t.steps if not s.rejected]
        for step, z in zip(steps, np.clip(zscore(np.array([s.reward for s in steps])), -cfg.clip, cfg.clip)):
            step.info["raw_reward"] = step.reward
            step.reward = float(z)


def _is_hack(verdict: Verdict, cfg: RewardConfig) -> bool:
    return verdict.status is Status.HACK_DETECTED or any(verdict.has_flag(code) for code in cfg.hack_flags)


def _hack(cfg: RewardConfig) -> CoderReward:
    return CoderReward(-cfg.hack_penalty, False, "hack", _parts(penalty=-cfg.hack_penalty))


def _parts(correct: float = 0.0, speedup: float = 0.0, coverage: float = 0.0, penalty: float = 0.0) -> dict[str, float]:
    return {"correct": correct, "speedup": speedup, "coverage": coverage, "penalty": penalty}
