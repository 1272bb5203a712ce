"""Training the model on the judge: SFT data export, RL episodes, advantages and rewards, and adapters to real
RL engines (TRL, verl).

The core (episodes, per-agent advantages, shaped rewards, the multi-turn environment, the RL config)
needs only what kernelcraft needs. The parts with heavy optional dependencies (the `train` extra) are
imported from their modules: `sft` (datasets, datasketch), `trl_adapter` (TRL), `verl_adapter` (verl). The reward
service is the top-level `kernelcraft.service` (FastAPI, uvicorn; its client needs httpx only).
"""

from .advantages import AdvantageConfig, Estimator, RoleConfig, assign_advantages, role_weight
from .config import EnvConfig, RLConfig, RLConfigError
from .env import KernelEnv, Observation, StepResult
from .episode import ROLES, Episode, Role, Step, Trajectory, role_groups
from .rewards import CoderReward, RewardConfig, coder_reward, normalize_rewards, selector_reward, summarizer_reward
from .verdicts import ReusedVerdicts

__all__ = [
    "ROLES", "AdvantageConfig", "CoderReward", "EnvConfig", "Episode", "Estimator", "KernelEnv", "Observation",
    "RLConfig", "RLConfigError", "ReusedVerdicts", "RewardConfig", "Role", "RoleConfig", "Step", "StepResult", "Trajectory",
    "assign_advantages", "coder_reward", "normalize_rewards", "role_groups", "role_weight", "selector_reward",
    "summarizer_reward",
]
