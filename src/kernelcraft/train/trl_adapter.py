"""GRPO training of the coder through TRL's GRPOTrainer, with rewards from the real judge.

Two ways in, both through TRL's own hooks:
- multi-turn (default): `EnvRollout` is GRPOTrainer's `rollout_func`. Each prompt of a batch is one task's
  episode in `KernelEnv`, played by the model being trained (Hugging Face generation, on CPU or GPU): up
  to `max_turns` coder turns, the judge's feedback between them. The completion TRL trains on is all the
  coder's turns, the feedback masked out (`env_mask`); its reward (`EpisodeReturn`) is the coder's return.
- single-turn: `JudgeReward` is an ordinary reward function; TRL generates one answer per sample and each
  is judged through the environment and scored with `rewards.coder_reward`.

What TRL allows of our advantages: one advantage per completion, the reward minus its group's mean,
optionally over the group's std (`grpo_settings`). So "grpo" and "drgrpo" map directly, and "rloo" and
"trloo" become exact leave-one-out by a reward weight of G/(G-1) without std scaling (r - mean of the
others = G/(G-1) (r - mean)); over a multi-turn completion that is TRLOO's first turn, and later turns
share it. "reinforce" (a batch baseline) has no TRL form. A rejected turn (a judge_error: the judge's own
failure) gives no reward (None), which TRL leaves out of its group's baseline with an advantage of 0;
a multi-turn completion none of whose turns was accepted is left out the same way. TRL trains one role; the
selector and summarizer train through the verl adapter (docs/training.md).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from datasets.table import InMemoryTable
from trl import GRPOConfig, GRPOTrainer
from trl.models import unwrap_model_for_generation

from ..judge import Status, open_executor
from ..skills import Skill
from ..store import Store
from ..tasks import Task, resolve_task
from .advantages import Estimator
from .config import EnvConfig, RLConfig, RLConfigError
from .env import KernelEnv, play
from .verdicts import Evaluator, ExecutorJudge, ReusedVerdicts
from .episode import Episode


HUB_NAME = re.compile(r"[\w.-]+(/[\w.-]+)?")  # a model id on the Hugging Face hub
RUN_KIND = "train-rl"  # a training run in the workspace: the verdicts its own judge measured carry its id


def grpo_settings(estimator: Estimator, num_generations: int) -> dict[str, Any]:
    """The GRPOConfig fields that give `estimator`'s advantages (see the module's docstring)."""
    if estimator == "grpo":
        return {"scale_rewards": "group", "reward_weights": [1.0]}
    if estimator == "drgrpo":
        return {"scale_rewards": "none", "loss_type": "dr_grpo", "reward_weights": [1.0]}
    if estimator in ("rloo", "trloo"):
        return {"scale_rewards": "none", "reward_weights": [num_generations / (num_generations - 1)]}
    raise RLConfigError(f"the {estimator} estimator has no TRL form (TRL subtracts each group's mean): "
                        "use rloo, trloo, grpo or drgrpo for the coder, or the verl engine")


def _completion_text(completion: Any) -> str:
    """A completion as TRL gives it to reward functions: text, or a conversation ending with the reply."""
    return completion[-1]["content"] if isinstance(completion, list) else str(completion)


def prompt_key(prompt: Any) -> str:
    """A dataset prompt as a lookup key (rollout functions receive prompts only)."""
    return json.dumps(prompt, sort_keys=True)


class JudgeReward:
    """A TRL reward function: each completion is one coder turn of a fresh episode of its row's task
    (column `task_key`), judged and scored with rewards.coder_reward; None for a rejected turn."""

    def __init__(self, tasks: Mapping[str, Task], judge: Evaluator, cfg: EnvConfig, workers: int = 4) -> None:
        self.tasks = dict(tasks)
        self.judge = judge
        self.cfg = cfg.model_copy(update={"max_turns": 1, "summarize": False})
        self.workers = workers
        self.episodes: list[Episode] = []
        self.__name__ = "kernelcraft_judge"  # what TRL logs the reward under

    def _score(self, task_key: str, completion: Any) -> tuple[float | None, Episode]:
        env = KernelEnv(self.tasks[task_key], self.judge, self.cfg)
        result = env.step(_completion_text(completion))
        step = env.episode().trajectories[0].steps[0]
        return (None if step.rejected else result.reward), env.episode()

    def __call__(self, prompts: list[Any], completions: list[Any], task_key: list[str], **kwargs: Any) -> list[float | None]:
        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="kc-reward") as pool:
            scored = list(pool.map(self._score, task_key, completions))
        self.episodes += [episode for _, episode in scored]
        if "log_metric" in kwargs:
            kwargs["log_metric"]("kernelcraft/correct", _correct_share([episode for _, episode in scored]))
        return [reward for reward, _ in scored]


class EpisodeReturn:
    """The reward function of the multi-turn path: the coder's return, computed by `EnvRollout`."""

    __name__ = "kernelcraft_episode"

    def __call__(self, prompts: list[Any], completions: list[Any], episode_return: list[float | None],
                 correct_share: list[float], **kwargs: Any) -> list[float | None]:
        if "log_metric" in kwargs:
            kwargs["log_metric"]("kernelcraft/correct", sum(correct_share) / len(correct_share))
        return list(episode_return)


class EnvRollout:
    """GRPOTrainer's `rollout_func`: the batch's prompts played as episodes of `KernelEnv` by the model
    under training, all episodes' turns of a round generated together."""

    def __init__(self, tasks: Mapping[str, Task], judge: Evaluator, cfg: EnvConfig, prompts: Mapping[str, str],
                 workers: int = 4, skills: Sequence[Skill] = ()) -> None:
        self.tasks = dict(tasks)
        self.judge = judge
        self.cfg = cfg
        self.task_of = dict(prompts)  # prompt_key -> task key
        self.workers = workers
        self.skills = list(skills)
        self.episodes: list[Episode] = []

    def __call__(self, prompts: list[Any], trainer: GRPOTrainer) -> dict[str, Any]:
        tokenizer = trainer.processing_class
        envs = [KernelEnv(self.tasks[self.task_of[prompt_key(p)]], self.judge, self.cfg, self.skills, sample=i)
                for i, p in enumerate(prompts)]
        samples = play(envs, "coder", lambda batch: _generate(trainer, batch), tokenizer, end_id=tokenizer.eos_token_id,
                       workers=self.workers)
        self.episodes += [s.episode for s in samples]
        return {"prompt_ids": [s.prompt_ids for s in samples], "completion_ids": [s.completion_ids for s in samples],
                "logprobs": None, "env_mask": [s.mask for s in samples], "episode_return": [s.reward for s in samples],
                "correct_share": [_correct_share([s.episode]) for s in samples]}


def _generate(trainer: GRPOTrainer, batch: list[list[int]]) -> list[list[int]]:
    """New tokens for each prompt of `batch` with the trainer's model and generation settings, cut after
    the first end-of-sequence token."""
    tokenizer = trainer.processing_class
    width = max(len(ids) for ids in batch)
    pad = tokenizer.pad_token_id
    input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for ids in batch], device=trainer.accelerator.device)
    attention = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in batch], device=input_ids.device)
    with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator,
                                     generation_kwargs=trainer.generation_kwargs) as model, torch.no_grad():
        out = model.generate(input_ids=input_ids, attention_mask=attention, generation_config=trainer.generation_config)
    ends = set(trainer.eos_token_ids)
    replies = []
    for row in out[:, width:].tolist():
        end = next((i + 1 for i, t in enumerate(row) if t in ends), len(row))
        replies.append(row[:end])
    return replies


def _correct_share(episodes: list[Episode]) -> float:
    """The share of correct coder turns among those judged (logged beside TRL's own metrics): a judge_error is
    not the candidate's turn."""
    steps = [s for e in episodes if (t := e.trajectory("coder")) is not None for s in t.steps
             if s.status != Status.JUDGE_ERROR.value]
    return sum(s.status == "correct" for s in steps) / len(steps) if steps else 0.0


def prompt_dataset(tasks: Sequence[Task], judge: Evaluator, cfg: EnvConfig) -> Dataset:
    """One row per task: the coder's opening prompt (conversational) and the task's key."""
    rows = [{"prompt": KernelEnv(t, judge, cfg).reset().messages, "task_key": t.key} for t in tasks]
    # The fingerprint is the rows' own hash: datasets would otherwise pickle the Arrow table to make one,
    # which fails with some pyarrow and Python versions (seen with pyarrow 26 on Python 3.12).
    fingerprint = hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()[:16]
    return Dataset(InMemoryTable.from_pylist(rows), fingerprint=fingerprint)


@dataclass(frozen=True)
class GRPOResult:
    output_dir: Path
    steps: int
    episodes: list[Episode]
    losses: list[float]  # TRL's logged loss per logging step
    wall_s: float
    judge_s: float  # time spent in new judge evaluations (repeated candidates reuse their verdict)
    evaluations: int

    def summary(self) -> dict[str, Any]:
        """The run in numbers, as `kernelcraft train rl` and the throughput benchmark print them."""
        return {"steps": self.steps, "episodes": len(self.episodes), "correct_turns": round(_correct_share(self.episodes), 3),
                "episodes_per_min": round(60 * len(self.episodes) / self.wall_s, 2) if self.wall_s else 0.0,
                "judge_evaluations": self.evaluations, "judge_s": round(self.judge_s, 1),
                "judge_s_per_episode": round(self.judge_s / len(self.episodes), 2) if self.episodes else 0.0,
                "wall_s": round(self.wall_s, 1), "losses": [round(x, 4) for x in self.losses],
                "output_dir": str(self.output_dir)}


def grpo_args(cfg: RLConfig) -> GRPOConfig:
    """GRPOTrainer's arguments for `cfg`."""
    t = cfg.trl
    save = {"save_strategy": "steps", "save_steps": t.save_steps} if t.save_steps else {"save_strategy": "no"}
    fields = {"output_dir": cfg.output_dir, "max_steps": t.steps, "per_device_train_batch_size": t.batch_size,
              "num_generations": t.num_generations, "learning_rate": t.learning_rate,
              "max_completion_length": t.max_completion_length, "temperature": t.temperature, "beta": t.beta,
              "seed": t.seed, "logging_steps": 1, "report_to": "none", "use_cpu": t.use_cpu, "bf16": t.bf16, **save,
              **grpo_settings(cfg.advantages.roles["coder"].estimator, t.num_generations),
              **t.extra}  # the extra table has the last word
    try:
        return GRPOConfig(**fields)
    except (TypeError, ValueError) as e:  # an unknown field in trl.extra, or a combination TRL refuses
        raise RLConfigError(f"trl: {str(e).strip().splitlines()[0]}") from None


def train_grpo(cfg: RLConfig, judge: Evaluator | None = None, skills: Sequence[Skill] = ()) -> GRPOResult:
    """Train `cfg.model` with GRPO on `cfg.tasks`, the judge as the reward; the model is saved to
    `cfg.output_dir`. Without `judge`, a CPU or CUDA judge of the workspace's build cache is used, and the
    workspace's stored verdicts are reused (the verdicts it measures are stored there, under a run of its own)."""
    if not Path(cfg.model).expanduser().is_dir() and not HUB_NAME.fullmatch(cfg.model):
        raise RLConfigError(f"model {cfg.model!r}: no such checkpoint directory (nor a hub name, owner/name)")
    tasks = [resolve_task(spec).with_sizes(cfg.device, cfg.sizes) for spec in cfg.tasks]
    own = store = run_id = None
    if judge is None:
        judge_config = cfg.judge_config()
        own = ExecutorJudge(open_executor(cfg.device, cache_dir=Path(cfg.workspace).resolve() / "cache", config=judge_config,
                                          gpus=cfg.gpus, ray=cfg.ray), judge_config)
        store = Store(Path(cfg.workspace))
        run_id = store.start_run(RUN_KIND, {"model": cfg.model, "tasks": cfg.tasks, "device": cfg.device})
    verdicts = ReusedVerdicts(judge or own, store, run_id=run_id)  # type: ignore[arg-type]
    by_key = {t.key: t for t in tasks}
    dataset = prompt_dataset(tasks, verdicts, cfg.env)
    played: EnvRollout | JudgeReward  # what played the episodes, and keeps them
    if cfg.trl.multi_turn:
        played = EnvRollout(by_key, verdicts, cfg.env, {prompt_key(r["prompt"]): r["task_key"] for r in dataset},
                            cfg.trl.judge_workers, skills)
        kwargs: dict[str, Any] = {"reward_funcs": EpisodeReturn(), "rollout_func": played}
    else:
        played = JudgeReward(by_key, verdicts, cfg.env, cfg.trl.judge_workers)
        kwargs = {"reward_funcs": played}
    started = time.monotonic()
    try:
        try:
            trainer = GRPOTrainer(model=cfg.model, args=grpo_args(cfg), train_dataset=dataset, **kwargs)
        except OSError as e:  # transformers' word for a checkpoint it cannot find or read
            raise RLConfigError(f"cannot load the model {cfg.model!r}: {str(e).strip().splitlines()[0]}") from None
        trainer.train()
        trainer.save_model(cfg.output_dir)
    finally:
        if own is not None:
            own.close()
        if store is not None and run_id is not None:
            store.finish_run(run_id)
            store.close()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    return GRPOResult(Path(cfg.output_dir), trainer.state.global_step, played.episodes, losses,
                      time.monotonic() - started, verdicts.seconds, verdicts.evaluations)
