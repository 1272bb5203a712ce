"""verl as the RL engine: an agent loop that plays `KernelEnv` against verl's inference servers, a custom
reward function that scores a reply through the judge service, the dataset of role rows, and the launch
command (docs/training.md has the recipes).

Role-aware grouping: verl groups a step's samples by `uid`, one per dataset row, the row repeated
`rollout.n` times. Every row here is one task and one role (`extra_info.group` = "task|role"), so each
uid's group holds samples of a single task and role, and one role's rewards never move another's
baseline. The role's loss weight is folded into the reward the loop returns, which is a loss weight for
verl's estimators without std scaling (`rloo`; `grpo` with `norm_adv_by_std_in_grpo=False`), the ones the
launch command uses. verl keeps one scalar reward per sample, so a coder row's turns share its return
(TRLOO's first turn); the environment's episodes (`KernelEnv.episode()`) keep the turn-level rewards.

Samples with no reward: verl cannot leave a sample out of its group's mean, so a row whose role earned none
(none of its turns accepted: judge errors, the judge's own failures) is masked out entirely
(`loop_reward`): it carries no gradient, and its reward of 0 only enters the others' baseline.

verl is optional and imported only here, when installed; everything but `KernelAgentLoop` works without it.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from datasets import Dataset

from ..agents import ParseFailure, extract_candidate
from ..judge import Status, Verdict
from ..skills import Skill
from ..tasks import Task, resolve_task, task_from_source
from .advantages import role_weight
from .config import EnvConfig, RLConfig, RLConfigError
from .env import KernelEnv, RoleSample, play
from .episode import Role
from .rewards import RewardConfig, coder_reward
from ..service import JudgeClient

try:  # verl is an optional engine: its agent loop exists only where verl is installed
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register
except ImportError:
    AgentLoopBase = None

AGENT_NAME = "kernelcraft"
DATA_SOURCE = "kernelcraft"
URL_ENV = "KERNELCRAFT_JUDGE_URL"
TOKEN_ENV = "KERNELCRAFT_JUDGE_TOKEN"


class ServiceJudge:
    """The judge service as the environment's evaluator: tasks travel by source (with their sizes), so the
    service needs no task files; `remeasure` asks for a fresh measurement."""

    def __init__(self, client: JudgeClient, device: str) -> None:
        self.client = client
        self.device = device

    def evaluate(self, task: Task, source: str) -> Verdict:
        return self._submit(task, source, fresh=False)

    def remeasure(self, task: Task, source: str) -> Verdict:
        return self._submit(task, source, fresh=True)

    def _submit(self, task: Task, source: str, fresh: bool) -> Verdict:
        return self.client.evaluate(None, source, task_source=task.source, task_name=task.key,
                                    sizes=task.sizes_for(self.device), fresh=fresh)


def role_group(task_key: str, role: Role) -> str:
    """The baseline group of a row: one task, one role."""
    return f"{task_key}|{role}"


def role_rows(tasks: Sequence[Task], roles: Sequence[Role], cfg: RLConfig, skills: Sequence[Skill] = ()) -> list[dict[str, Any]]:
    """verl's dataset: one row per task and role, each carrying everything the agent loop and the reward
    function need (the task's source and sizes, the environment's settings, the judge service's address)."""
    rows = []
    for task in tasks:
        first = KernelEnv(task, _NoJudge(), cfg.env, skills).reset().messages  # the selector's with skills, else the coder's
        for role in roles:
            rows.append({
                "data_source": DATA_SOURCE, "agent_name": AGENT_NAME, "prompt": first,
                "ability": "kernels", "reward_model": {"style": "rule", "ground_truth": ""},
                "extra_info": {
                    "index": len(rows), "task_key": task.key, "task_source": task.source,
                    "sizes": json.dumps(task.sizes_for(cfg.device)), "device": cfg.device, "role": role,
                    "group": role_group(task.key, role), "weight": role_weight(role, cfg.advantages),
                    "env": cfg.env.model_dump_json(), "judge_url": cfg.verl.judge_url, "token_env": cfg.verl.token_env,
                    "skills": json.dumps([s.model_dump(mode="json") for s in skills]),
                },
            })
    return rows


class _NoJudge:
    """Rendering the first prompts judges nothing."""

    def evaluate(self, task: Task, source: str) -> Verdict:
        raise RuntimeError("no judge: only prompts are rendered here")


def _row_task(info: dict[str, Any]) -> Task:
    return task_from_source(info["task_source"], info["task_key"]).with_sizes(info["device"], json.loads(info["sizes"]))


_clients: dict[tuple[str, str], JudgeClient] = {}
_clients_lock = threading.Lock()


def _client(url: str, token_env: str) -> JudgeClient:
    """One client per service and token in a process (verl calls the reward function per sample)."""
    token = os.environ.get(token_env)
    if not token:
        raise RuntimeError(f"{token_env} is not set: it must hold the judge service's token on every node")
    with _clients_lock:
        if (url, token) not in _clients:
            _clients[(url, token)] = JudgeClient(url, token)
        return _clients[(url, token)]


class JudgeFailed(RuntimeError):
    """The judge failed on its own side on a sample, twice: the sample has no score (the message is one line)."""


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None,
                  url: str | None = None, token_env: str | None = None, reward: dict[str, Any] | None = None,
                  **kwargs: Any) -> float:
    """verl's custom reward function: the reply's candidate judged by the reward service, scored with
    rewards.coder_reward. A judge_error is the judge's failure, not the candidate's: it is judged once more, fresh,
    and a second one raises JudgeFailed rather than score a kernel nobody judged. The service is `url`
    (reward_kwargs), else the row's, else $KERNELCRAFT_JUDGE_URL; its token is in $`token_env`."""
    info = extra_info or {}
    candidate = extract_candidate(solution_str)
    if isinstance(candidate, ParseFailure):
        return 0.0
    address = url or info.get("judge_url") or os.environ.get(URL_ENV)
    if not address:
        raise RuntimeError(f"no judge service: give reward_kwargs.url, the row's judge_url or ${URL_ENV}")
    env = EnvConfig.model_validate_json(info["env"]) if "env" in info else EnvConfig()
    cfg = RewardConfig.model_validate(reward) if reward is not None else env.reward
    judge = ServiceJudge(_client(address, token_env or info.get("token_env") or TOKEN_ENV), info.get("device", "cuda"))
    task = _row_task(info)
    verdict = judge.evaluate(task, candidate)
    if verdict.status is Status.JUDGE_ERROR:
        verdict = judge.remeasure(task, candidate)
    if verdict.status is Status.JUDGE_ERROR:
        raise JudgeFailed(f"the judge failed on its side twice on a {task.key} sample ({' '.join(verdict.message.split())}): "
                          "no score for a kernel nobody judged")
    return coder_reward(verdict, cfg, lambda _: judge.remeasure(task, candidate)).value


def loop_reward(sample: RoleSample, weight: float) -> tuple[list[int], float]:
    """The response mask and reward verl gets for a row's sample: the role's return times its loss weight; a sample
    without a return (the role did not act, or none of its turns was accepted) is masked out entirely."""
    if sample.reward is None:
        return [0] * len(sample.mask), 0.0
    return sample.mask, weight * sample.reward


@lru_cache(maxsize=1)
def _templates() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("kernelcraft.train", "templates"),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    env.filters["q"] = shlex.quote
    return env


@dataclass(frozen=True)
class VerlLaunch:
    data: Path  # train.parquet
    agent_loops: Path  # the agent loop registry file verl reads
    reward: Path  # the file verl loads compute_score from
    script: Path  # launch.sh
    overrides: list[str]  # verl's hydra overrides


def verl_overrides(cfg: RLConfig, data: Path, agent_loops: Path, reward: Path) -> list[str]:
    """verl.trainer.main_ppo's settings for `cfg` (keys as in verl's ppo_trainer.yaml)."""
    v = cfg.verl
    estimator = cfg.advantages.roles["coder"].estimator
    if estimator in ("grpo", "reinforce"):
        raise RLConfigError(f"the {estimator} estimator would undo the role weights in verl: use rloo, trloo or drgrpo")
    adv = ["algorithm.adv_estimator=rloo"] if estimator in ("rloo", "trloo") else [
        "algorithm.adv_estimator=grpo", "algorithm.norm_adv_by_std_in_grpo=False"]
    return [
        *adv,
        f"data.train_files={data}", f"data.val_files={data}", f"data.train_batch_size={v.train_batch_size}",
        f"data.max_prompt_length={v.max_prompt_length}", f"data.max_response_length={v.max_response_length}",
        "data.return_raw_chat=True", "data.filter_overlong_prompts=True",
        f"actor_rollout_ref.model.path={cfg.model}", f"actor_rollout_ref.actor.optim.lr={v.learning_rate}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={v.train_batch_size}",
        f"actor_rollout_ref.rollout.name={v.rollout}", "actor_rollout_ref.rollout.mode=async",
        f"actor_rollout_ref.rollout.n={v.n}", f"actor_rollout_ref.rollout.agent.agent_loop_config_path={agent_loops}",
        f"custom_reward_function.path={reward}", "custom_reward_function.name=compute_score",
        f"trainer.nnodes={v.nnodes}", f"trainer.n_gpus_per_node={v.gpus_per_node}",
        f"trainer.total_training_steps={v.total_training_steps}", f"trainer.default_local_dir={Path(cfg.output_dir).resolve()}",
        "trainer.logger=[console]", "trainer.val_before_train=False", "trainer.test_freq=-1",
        *v.overrides,
    ]


def prepare_verl(cfg: RLConfig, out: Path, skills: Sequence[Skill] = ()) -> VerlLaunch:
    """Write verl's inputs to `out`: the role rows (parquet), the agent loop registry, the reward function
    file, and launch.sh. Tasks are resolved here, so the nodes need no task files."""
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    tasks = [resolve_task(spec).with_sizes(cfg.device, cfg.sizes) for spec in cfg.tasks]
    data, agent_loops, reward = out / "train.parquet", out / "agent_loops.yaml", out / "reward.py"
    Dataset.from_list(role_rows(tasks, cfg.verl.roles, cfg, skills)).to_parquet(str(data))
    # JSON is YAML: the registry entry verl's agent loop workers instantiate by import path
    agent_loops.write_text(json.dumps([{"name": AGENT_NAME, "_target_": f"{__name__}.KernelAgentLoop"}], indent=1) + "\n")
    # verl loads this file by path, outside any package: it re-exports the installed function
    reward.write_text(f"from {__name__} import compute_score  # noqa: F401\n")
    overrides = verl_overrides(cfg, data, agent_loops, reward)
    script = out / "launch.sh"
    script.write_text(_templates().get_template("verl_launch.sh.j2").render(
        overrides=overrides, ray_address=cfg.verl.ray_address, judge_url=cfg.verl.judge_url, token_env=cfg.verl.token_env))
    script.chmod(0o755)
    return VerlLaunch(data, agent_loops, reward, script, overrides)


if AgentLoopBase is not None:

    @register(AGENT_NAME)
    class KernelAgentLoop(AgentLoopBase):
        """One row's episode: every role played by the model through verl's server manager, the row's role's
        turns returned as the sample (feedback masked), its weighted return as the reward."""

        async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
            info = kwargs["extra_info"]
            role: Role = info["role"]
            env_cfg = EnvConfig.model_validate_json(info["env"])
            skills = [Skill.model_validate(s) for s in json.loads(info["skills"])]
            judge = ServiceJudge(_client(info["judge_url"], info["token_env"]), info["device"])
            env = KernelEnv(_row_task(info), judge, env_cfg, skills, group=info["group"])
            request_id = uuid.uuid4().hex  # one sticky session: the turns reuse the server's prefix cache

            def generate(batch: list[list[int]]) -> list[list[int]]:
                replies = []
                for ids in batch:
                    out = asyncio.run_coroutine_threadsafe(self.server_manager.generate(
                        request_id=request_id, prompt_ids=ids, sampling_params=sampling_params), self.loop).result()
                    replies.append(list(getattr(out, "token_ids", out)))  # TokenOutput, or ids in older verl
                return replies

            end = self.tokenizer.eos_token_id
            [sample] = await self.loop.run_in_executor(
                None, lambda: play([env], role, generate, self.tokenizer, end_id=end, workers=1))
            rollout = self.config.actor_rollout_ref.rollout
            limit = rollout.response_length
            episode = sample.episode
            mask, reward = loop_reward(sample, info["weight"])
            return AgentLoopOutput(
                prompt_ids=sample.prompt_ids[-rollout.prompt_length:], response_ids=sample.completion_ids[:limit],
                response_mask=mask[:limit], reward_score=reward,
                num_turns=sum(len(t.steps) for t in episode.trajectories) * 2, metrics={},
                extra_fields={"kernelcraft_role": role,
                              "kernelcraft_statuses": [s.status for t in episode.trajectories for s in t.steps if s.status]})
