"""The episode model of RL: an Episode (one rollout of one task) holds a Trajectory per role that
acted, and each trajectory its Steps (turns), with the reward and advantage of each."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["selector", "coder", "summarizer"]
ROLES: tuple[Role, ...] = ("selector", "coder", "summarizer")


@dataclass
class Step:
    """One turn of one role."""

    prompt: list[dict[str, str]]  # the chat messages the role saw ({"role": ..., "content": ...})
    reply: str
    reward: float = 0.0  # shaped reward of this turn (rewards.py or the environment)
    advantage: float = 0.0  # filled by advantages.py
    rejected: bool = False  # excluded from the loss and from every baseline; its advantage stays 0
    verdict_id: int | None = None
    status: str = ""  # verdict status of a coder turn ("correct", "incorrect", ...)
    speedup: float | None = None
    token_ids: list[int] | None = None  # prompt+reply token ids, where the engine gives them
    loss_mask: list[int] | None = None  # 1 on reply tokens
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class Trajectory:
    role: Role
    steps: list[Step]
    # The baseline group of this trajectory when it is not its episode's: e.g. a task's selection
    # schemes are samples of the task, while the coder rollouts under one scheme are samples of
    # task+scheme.
    group: str | None = None

    @property
    def total_reward(self) -> float:
        """The trajectory's return: the sum of its accepted turns' rewards."""
        return sum(s.reward for s in self.steps if not s.rejected)


@dataclass
class Episode:
    """One rollout of one task: a trajectory per role that acted."""

    task_key: str
    group: str  # episodes with the same group are samples of the same prompt (task [+ scheme])
    sample: int
    trajectories: list[Trajectory]

    def trajectory(self, role: Role) -> Trajectory | None:
        """This episode's trajectory of `role`, or None if that role did not act."""
        return next((t for t in self.trajectories if t.role == role), None)


def role_groups(episodes: list[Episode]) -> dict[tuple[str, Role], list[Trajectory]]:
    """The trajectories of each (group, role): the samples a baseline or a normalisation compares,
    so one role's rewards never enter another role's statistics."""
    groups: dict[tuple[str, Role], list[Trajectory]] = defaultdict(list)
    for episode in episodes:
        for trajectory in episode.trajectories:
            groups[(trajectory.group or episode.group, trajectory.role)].append(trajectory)
    return dict(groups)
