"""The options of an RL run: the environment (turns, language, skills, rewards), the advantages, the
model and tasks, and the settings of each engine (TRL, verl). One pydantic model, loaded from one TOML
file by `kernelcraft train rl --config FILE`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Optional, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..agents.languages import language_for
from ..judge import JudgeConfig
from ..settings import SettingsError, one_line, read_toml
from ..skills import AdmissionPolicy
from .advantages import AdvantageConfig
from .episode import Role
from .rewards import RewardConfig

M = TypeVar("M", bound=BaseModel)


def model_from_toml(model: type[M], path: Path, error: type[Exception]) -> M:
    """A pydantic model from a TOML file; a missing file, bad TOML or a bad value is `error` with one
    line naming the file and the key."""
    try:
        return model.model_validate(read_toml(path))
    except SettingsError as e:
        raise error(str(e)) from None
    except ValidationError as e:
        raise error(f"{path}: {one_line(e)}") from None


class RLConfigError(Exception):
    """A config file that cannot be used; printed as one line."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt key in a TOML file is an error, not a silent default


class EnvSkillOptions(_Strict):
    """Skills in the environment: the selector sees what BM25 recalls, the summarizer's first draft is
    verified by regenerating the kernel with it."""

    recall: int = Field(20, ge=1)  # skills BM25 recalls for the selector to read
    k: int = Field(3, ge=1)  # skills the selector may pick
    max_new: int = Field(2, ge=1)  # drafts the summarizer may write
    verify_turns: int = Field(1, ge=0)  # coder turns regenerating the kernel with the draft; 0: no verification
    policy: AdmissionPolicy = Field(default_factory=AdmissionPolicy)  # also the summarizer's trigger


class EnvConfig(_Strict):
    """One episode: up to `max_turns` coder turns, with a selector turn before them when skills are given
    and a summarizer turn after them when the trajectory improved enough."""

    max_turns: int = Field(3, ge=1)
    language: Literal["cuda", "cpp", "triton"] | None = None  # None: the device's own (agents/templates/languages.toml)
    device: Literal["cuda", "cpu"] = "cuda"  # where the kernels run (what the coder's prompt names)
    device_name: str = ""  # the target named in the prompt; empty: the local device's name
    history_tokens: int = Field(24000, ge=2000)  # the coder's conversation is cut to this (about 4 characters each)
    summarize: bool = True
    skills: EnvSkillOptions = Field(default_factory=EnvSkillOptions)

    @model_validator(mode="after")
    def _language(self) -> "EnvConfig":
        self.language = language_for(self.device, self.language)
        return self
    reward: RewardConfig = Field(default_factory=RewardConfig)


class TRLOptions(_Strict):
    """GRPO through TRL's GRPOTrainer. Any other GRPOConfig field goes in `extra`."""

    steps: int = Field(100, ge=1)
    num_generations: int = Field(4, ge=2)  # samples per prompt: the group of the baseline
    batch_size: int = Field(4, ge=1)  # prompts x samples per device and step; a multiple of num_generations
    learning_rate: float = Field(1e-6, gt=0)
    max_completion_length: int = Field(2048, ge=1)  # tokens per turn
    temperature: float = Field(1.0, gt=0)
    multi_turn: bool = True  # run whole episodes through TRL's rollout_func; false: one judged turn per sample
    beta: float = Field(0.0, ge=0)  # KL coefficient
    seed: int = 0
    judge_workers: int = Field(4, ge=1)  # candidates judged at once
    save_steps: int | None = Field(None, ge=1)  # None: the final model only
    use_cpu: bool = False
    bf16: bool = True  # TRL's default; false on a CPU without bf16 support
    extra: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _whole_groups(self) -> "TRLOptions":
        if self.batch_size % self.num_generations:
            raise ValueError(f"trl.batch_size ({self.batch_size}) must be a multiple of trl.num_generations "
                             f"({self.num_generations})")
        return self


class VerlOptions(_Strict):
    """What `kernelcraft train rl --engine verl` writes into verl's launch command (docs/training.md)."""

    nnodes: int = Field(1, ge=1)
    gpus_per_node: int = Field(1, ge=1)
    ray_address: str | None = None  # a Ray cluster's dashboard, e.g. http://head:8265: submit the job there
    rollout: Literal["vllm", "sglang"] = "vllm"
    n: int = Field(4, ge=2)  # samples per dataset row (role rows: one group per task and role)
    train_batch_size: int = Field(8, ge=1)  # dataset rows per step
    max_prompt_length: int = Field(8192, ge=256)
    max_response_length: int = Field(16384, ge=256)  # all turns of one role, feedback included
    learning_rate: float = Field(1e-6, gt=0)
    total_training_steps: int = Field(100, ge=1)
    judge_url: str = "http://127.0.0.1:8765"  # `kernelcraft serve-judge` on the judge machine
    token_env: str = "KERNELCRAFT_JUDGE_TOKEN"  # the variable that holds the service's token on every node
    roles: list[Role] = Field(default_factory=lambda: ["coder"], min_length=1)  # a dataset row per task and role
    overrides: list[str] = Field(default_factory=list)  # more hydra overrides, e.g. "trainer.save_freq=10"


class RLConfig(_Strict):
    """Everything `kernelcraft train rl` needs."""

    model: str  # a local checkpoint directory or a hub name, loaded by the engine's own code
    tasks: list[str] = Field(min_length=1)  # task specs, as `kernelcraft eval` takes them
    sizes: dict[str, Any] = Field(default_factory=dict)  # module-constant overrides for every task, as --set
    device: Literal["cuda", "cpu"] = "cuda"  # where the judge runs the kernels
    workspace: str = "kernelcraft-workspace"  # the judge's build cache lives here
    gpus: Optional[str] = None  # the judge's GPUs: "all" (the default) or "0,1", as --gpus takes them
    ray: Optional[str] = None  # judge on a Ray cluster instead (auto, local or its address), as --ray takes it
    output_dir: str = "kernelcraft-rl"
    judge: dict[str, Any] = Field(default_factory=dict)  # JudgeConfig overrides
    skills: bool = False  # the selector picks from the workspace's skill library first
    env: EnvConfig = Field(default_factory=EnvConfig)
    advantages: AdvantageConfig = Field(default_factory=AdvantageConfig)
    trl: TRLOptions = Field(default_factory=TRLOptions)
    verl: VerlOptions = Field(default_factory=VerlOptions)

    @field_validator("judge")
    @classmethod
    def _judge_options(cls, v: dict[str, Any]) -> dict[str, Any]:
        try:
            JudgeConfig().with_overrides(v)  # unknown options fail here, not in the middle of a run
        except TypeError as e:  # an unknown key of a nested table (timing, timeouts)
            raise ValueError(str(e)) from None
        return v

    @model_validator(mode="after")
    def _env_device(self) -> "RLConfig":
        # the prompt names the device the judge measures on: one setting, not two that could disagree
        self.env = self.env.model_copy(update={"device": self.device})
        return self

    def judge_config(self) -> JudgeConfig:
        return JudgeConfig().with_overrides(self.judge)

    @classmethod
    def from_toml(cls, path: Path) -> "RLConfig":
        """The run described by a TOML file (keys of this model; tables for the nested ones)."""
        return model_from_toml(cls, path, RLConfigError)
