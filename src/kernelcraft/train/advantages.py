"""Per-agent advantages: each role's steps are compared only with the same role's steps of the same
group (samples of one prompt), with the role's own estimator; the role's loss weight is applied by
the trainer, not folded into the advantage.

Estimators, over a (group, role) bucket of trajectories:
- reinforce: the trajectory return minus the mean return of the role over the whole batch (a batch
  baseline, not a group one; that is what distinguishes it from drgrpo).
- rloo: the return minus the mean return of the group's other samples.
- grpo: (return - group mean) / group std, the sample included (Bessel-corrected std, as TRL's
  scale_rewards="group", without its epsilon: a group with one sample or no spread gets 0).
- drgrpo: return - group mean, no std scaling.
- trloo: turn level; each turn's return-to-go in its trajectory minus the mean of the other
  samples' return-to-go at the same turn.
The first four give every turn of a multi-turn trajectory the trajectory's advantage.

A leave-one-out baseline with no other sample (a group of one; a turn only one sample reached) is
0: any baseline that does not depend on the sample keeps the gradient unbiased, so the lone sample
keeps its plain REINFORCE signal rather than losing it.

Rejected steps get advantage 0 and count neither in returns nor in baselines; a trajectory whose
steps are all rejected is no sample at all.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, Field, field_validator

from .episode import ROLES, Episode, Role, Trajectory, role_groups

Estimator = Literal["reinforce", "rloo", "grpo", "drgrpo", "trloo"]


class RoleConfig(BaseModel):
    estimator: Estimator
    weight: float = Field(ge=0)  # the role's loss weight


def _default_roles() -> dict[Role, RoleConfig]:
    """daVinci-kernel's: the policy with turn-level leave-one-out, the others with group leave-one-out."""
    return {
        "selector": RoleConfig(estimator="rloo", weight=0.3),
        "coder": RoleConfig(estimator="trloo", weight=1.0),
        "summarizer": RoleConfig(estimator="rloo", weight=0.5),
    }


class AdvantageConfig(BaseModel):
    roles: dict[Role, RoleConfig] = Field(default_factory=_default_roles)

    @field_validator("roles")
    @classmethod
    def _every_role(cls, v: dict[Role, RoleConfig]) -> dict[Role, RoleConfig]:
        """A configuration naming some roles keeps the defaults for the others."""
        return {**_default_roles(), **v}


def role_weight(role: Role, cfg: AdvantageConfig) -> float:
    """The loss weight of `role`'s steps."""
    return cfg.roles[role].weight


def assign_advantages(episodes: list[Episode], cfg: AdvantageConfig) -> None:
    """Fill Step.advantage of every step of `episodes`, in place."""
    groups = role_groups(episodes)
    batch: dict[Role, list[float]] = {role: [] for role in ROLES}
    for (_, role), trajectories in groups.items():
        batch[role] += [t.total_reward for t in trajectories if _accepted(t)]
    for (_, role), trajectories in groups.items():
        for trajectory in trajectories:
            for step in trajectory.steps:
                step.advantage = 0.0
        estimator = cfg.roles[role].estimator
        if estimator == "trloo":
            _turn_level_loo(trajectories)
            continue
        samples = [t for t in trajectories if _accepted(t)]
        if not samples:
            continue
        returns = np.array([t.total_reward for t in samples])
        for trajectory, advantage in zip(samples, _trajectory_advantages(estimator, returns, batch[role])):
            for step in trajectory.steps:
                if not step.rejected:
                    step.advantage = float(advantage)


def zscore(x: np.ndarray) -> np.ndarray:
    """(x - mean) / std with the Bessel-corrected std; 0 where there is one value or no spread."""
    std = x.std(ddof=1) if len(x) > 1 else 0.0
    return (x - x.mean()) / std if std > 0 else np.zeros_like(x)


def _trajectory_advantages(estimator: Estimator, returns: np.ndarray, batch_returns: list[float]) -> np.ndarray:
    if estimator == "reinforce":
        return returns - np.mean(batch_returns)
    if estimator == "rloo":
        return _leave_one_out(returns)
    if estimator == "grpo":
        return zscore(returns)
    return returns - returns.mean()  # drgrpo


def _turn_level_loo(trajectories: list[Trajectory]) -> None:
    """TRLOO: at each turn index, leave-one-out over the samples whose turn there was accepted."""
    to_go = [np.cumsum([0.0 if s.rejected else s.reward for s in t.steps][::-1])[::-1] for t in trajectories]
    for turn in range(max((len(t.steps) for t in trajectories), default=0)):
        live = [(t.steps[turn], g[turn]) for t, g in zip(trajectories, to_go)
                if turn < len(t.steps) and not t.steps[turn].rejected]
        for (step, _), advantage in zip(live, _leave_one_out(np.array([g for _, g in live]))):
            step.advantage = float(advantage)


def _leave_one_out(x: np.ndarray) -> np.ndarray:
    """Each value minus the mean of the others (minus 0 when it is alone)."""
    if len(x) < 2:
        return x.copy()
    return x - (x.sum() - x) / (len(x) - 1)


def _accepted(trajectory: Trajectory) -> bool:
    return any(not s.rejected for s in trajectory.steps)

