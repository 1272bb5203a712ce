"""The RL environment: one task, played turn by turn by the roles of one model, judged by the real judge.

    env = KernelEnv(task, judge, cfg, skills=library_skills)
    obs = env.reset()                  # the selector's prompt when skills are given, else the coder's
    while obs is not None:
        result = env.step(model(obs.messages))
        obs = result.observation
    episode = env.episode()            # kernelcraft.train.episode.Episode

The selector picks skills from what BM25 recalls; the coder writes up to `max_turns` kernels, each judged,
rewarded with `rewards.coder_reward` and answered with the judge's feedback; when the coder's best turn
improved enough on a correct first turn (daVinci-kernel's trigger), the summarizer distils a skill, and the
coder regenerates the kernel with it (`skills.verify_turns` turns, not trained) so the summarizer's reward
is what admission would decide. Prompts are the agents' own templates; the environment only renders them.

`play` runs environments against a token-level generator, as RL engines need them: one role's turns as
prompt ids, completion ids and a mask (1 on the model's tokens, 0 on the feedback between turns)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

import torch

from ..agents import Coder, KernelExample, ParseFailure, extract_candidate, parse_choices, parse_drafts, render
from ..judge import DeviceDescription, JudgeConfig, Status, TaskRules, Verdict, describe_device
from ..llm import Message
from ..search import Exchange, trimmed_history
from ..search.strategy import PARSE_FAILED
from ..skills import Evidence, Skill, decide, recall, task_query
from ..tasks import Task
from .config import EnvConfig
from .episode import Episode, Role, Step, Trajectory
from .rewards import coder_reward, selector_reward, summarizer_reward
from .verdicts import Evaluator

Phase = Literal["select", "code", "summarize", "verify", "done"]


@dataclass(frozen=True)
class Observation:
    """The prompt of the next turn and the role that answers it."""

    role: Role
    messages: list[dict[str, str]]
    # "verify": a coder turn that regenerates the kernel with the summarizer's draft; it is judged for the
    # summarizer's reward and is no coder sample to train on
    phase: str = ""


@dataclass(frozen=True)
class StepResult:
    observation: Observation | None  # None: the episode is over
    role: Role  # the role whose reply this was
    reward: float  # its turn's reward; a selector's and a summarizer's are settled later (see `episode()`)
    done: bool
    info: dict[str, Any] = field(default_factory=dict)


def _chat(messages: Sequence[Message]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


class KernelEnv:
    def __init__(self, task: Task, judge: Evaluator, cfg: EnvConfig | None = None, skills: Sequence[Skill] | None = None,
                 *, sample: int = 0, group: str | None = None, device: DeviceDescription | None = None) -> None:
        self.task = task
        self.judge = judge
        self.cfg = cfg or EnvConfig()
        self.skills = list(skills or [])
        self.sample = sample
        self.group = group or task.key
        # The environment renders the coder's prompts; the model that answers them is the RL engine's. They state
        # the rules of the judge's configuration (a judge elsewhere, behind a client, is taken to run the defaults).
        self.coder = Coder(None, self.cfg.language, device or self._device())
        config = getattr(judge, "config", None)
        self.rules = TaskRules.of(config if isinstance(config, JudgeConfig) else JudgeConfig(), task, self.coder.device.kind)
        self.reset()

    def _device(self) -> DeviceDescription:
        if self.cfg.device_name or (self.cfg.device == "cuda" and not torch.cuda.is_available()):
            return DeviceDescription(self.cfg.device, self.cfg.device_name or "an NVIDIA GPU")
        return describe_device(self.cfg.device)

    # -- the episode ---------------------------------------------------------------------------------
    def reset(self) -> Observation:
        """A new episode: the first prompt, the selector's when skills are given and some match the task."""
        self._phase: Phase = "code"
        self._selector: Step | None = None
        self._chosen: tuple[Skill, ...] = ()
        self._coder: list[Step] = []
        self._sources: list[str | None] = []
        self._exchanges: list[Exchange] = []
        self._summarizer: Step | None = None
        self._draft: Skill | None = None
        self._verify_exchanges: list[Exchange] = []
        self._verify_best: float | None = None
        self._verify_judge_errors = 0
        self._recalled = recall(self.skills, task_query(self.task), self.cfg.skills.recall) if self.skills else []
        if self._recalled:
            self._phase = "select"
            self._obs = Observation("selector", _chat([
                Message("system", render("selector_system", k=self.cfg.skills.k)),
                Message("user", render("selector_task", task_source=self.task.source.strip(), cards=self._recalled))]))
        else:
            self._obs = self._coder_obs()
        return self._obs

    @property
    def done(self) -> bool:
        return self._phase == "done"

    def step(self, reply: str) -> StepResult:
        """The reply to the current observation; raises RuntimeError when the episode is over."""
        if self._phase == "select":
            return self._select(reply)
        if self._phase == "code":
            return self._code(reply)
        if self._phase == "summarize":
            return self._summarize(reply)
        if self._phase == "verify":
            return self._verify(reply)
        raise RuntimeError("the episode is over: reset() starts a new one")

    def episode(self) -> Episode:
        """The episode so far: a trajectory per role that acted, in the order they acted."""
        trajectories = []
        if self._selector is not None:
            trajectories.append(Trajectory("selector", [self._selector]))
        if self._coder:
            scheme = "+".join(sorted(s.name for s in self._chosen)) or "none"
            # coder rollouts compare with those under the same selection; the selector's with the task's
            trajectories.append(Trajectory("coder", list(self._coder),
                                           group=f"{self.group}#{scheme}" if self._selector is not None else None))
        if self._summarizer is not None:
            trajectories.append(Trajectory("summarizer", [self._summarizer]))
        return Episode(task_key=self.task.key, group=self.group, sample=self.sample, trajectories=trajectories)

    # -- roles -----------------------------------------------------------------------------------------
    def _select(self, reply: str) -> StepResult:
        choices = parse_choices(reply, {s.name for s in self._recalled}, self.cfg.skills.k)
        by_name = {s.name: s for s in self._recalled}
        self._chosen = tuple(by_name[c.name] for c in choices)
        info = {"skills": [c.name for c in choices], "reasons": [c.reason for c in choices]}
        self._selector = Step(self._obs.messages, reply, info=info)
        self._phase = "code"
        self._obs = self._coder_obs()
        return StepResult(self._obs, "selector", 0.0, False, info)

    def _coder_obs(self) -> Observation:
        opening = self.coder.opening(self.task, self.rules, self._chosen)
        return Observation("coder", _chat(trimmed_history(opening, self._exchanges, self.cfg.history_tokens,
                                                          self.coder.omitted_note)))

    def _judged(self, reply: str) -> tuple[str | None, Verdict | ParseFailure]:
        candidate = extract_candidate(reply)
        if isinstance(candidate, ParseFailure):
            return None, candidate
        return candidate, self.judge.evaluate(self.task, candidate)

    def _remeasure(self, source: str) -> Callable[[Verdict], Verdict | None]:
        again = getattr(self.judge, "remeasure", self.judge.evaluate)
        return lambda _: again(self.task, source)

    def _code(self, reply: str) -> StepResult:
        source, outcome = self._judged(reply)
        feedback = self.coder.feedback(outcome).content
        if isinstance(outcome, ParseFailure):
            step = Step(self._obs.messages, reply, status=PARSE_FAILED, info={"reason": PARSE_FAILED})
            info: dict[str, Any] = {"status": PARSE_FAILED, "verdict": None}
        else:
            assert source is not None
            r = coder_reward(outcome, self.cfg.reward, self._remeasure(source))
            speedup = outcome.effective_speedup if outcome.correct else None
            step = Step(self._obs.messages, reply, r.value, rejected=r.rejected, status=outcome.status.value, speedup=speedup,
                        info={"reason": r.reason, "parts": r.parts})
            info = {"status": outcome.status.value, "speedup": speedup, "reason": r.reason, "verdict": outcome}
        info["feedback"] = feedback
        self._coder.append(step)
        self._sources.append(source)
        self._exchanges.append(Exchange(reply, feedback))
        if len(self._coder) < self.cfg.max_turns:
            self._obs = self._coder_obs()
            return StepResult(self._obs, "coder", step.reward, False, info)
        if self._selector is not None:
            self._selector.reward = selector_reward([Trajectory("coder", self._coder).total_reward])
            # a selection none of whose kernels the judge could judge has earned nothing, and lost nothing
            self._selector.rejected = all(s.status == Status.JUDGE_ERROR.value for s in self._coder)
        return self._after_coder(step, info)

    def _after_coder(self, step: Step, info: dict[str, Any]) -> StepResult:
        gain = self._improvement()
        if gain is None:
            self._phase = "done"
            return StepResult(None, "coder", step.reward, True, info)
        first, best = gain
        self._phase = "summarize"
        self._obs = Observation("summarizer", _chat([
            Message("system", render("summarizer_system", max_skills=self.cfg.skills.max_new)),
            Message("user", render("summarizer_task", task_source=self.task.source.strip(), first=first, best=best))]))
        return StepResult(self._obs, "coder", step.reward, False, info)

    def _improvement(self) -> tuple[KernelExample, KernelExample] | None:
        """daVinci-kernel's trigger: a correct first turn, and a best turn at least the policy's factors
        better than it and than the reference."""
        correct = [i for i, s in enumerate(self._coder) if _paid_speedup(s) is not None]
        if not self.cfg.summarize or not correct or correct[0] != 0:
            return None
        best = max(correct, key=lambda i: self._coder[i].speedup or 0.0)
        if best == 0 or not self.cfg.skills.policy.improved(self._coder[0].speedup, self._coder[best].speedup or 0.0):
            return None
        return tuple(KernelExample(self._sources[i] or "", self._coder[i].speedup, self._exchanges[i].feedback)
                     for i in (0, best))  # type: ignore[return-value]

    def _summarize(self, reply: str) -> StepResult:
        drafts = parse_drafts(reply, self.cfg.skills.max_new)
        info: dict[str, Any] = {"drafts": [asdict(d) for d in drafts]}
        self._summarizer = Step(self._obs.messages, reply, info=info)
        if not drafts or self.cfg.skills.verify_turns == 0:
            self._phase = "done"  # nothing to admit (or no verification asked): the summarizer earns 0
            return StepResult(None, "summarizer", 0.0, True, info)
        d = drafts[0]  # the first draft is verified: one regeneration per episode keeps episodes short
        self._draft = Skill(name=d.name, description=d.description, scope=d.scope, tags=d.tags, content=d.content,
                            origin="summarized")
        self._phase = "verify"
        self._obs = self._verify_obs()
        return StepResult(self._obs, "summarizer", 0.0, False, info)

    def _verify_obs(self) -> Observation:
        assert self._draft is not None
        opening = self.coder.opening(self.task, self.rules, (self._draft,))
        return Observation("coder", _chat(trimmed_history(opening, self._verify_exchanges, self.cfg.history_tokens,
                                                          self.coder.omitted_note)), phase="verify")

    def _verify(self, reply: str) -> StepResult:
        source, outcome = self._judged(reply)
        self._verify_exchanges.append(Exchange(reply, self.coder.feedback(outcome).content))
        if isinstance(outcome, Verdict) and source is not None:
            self._verify_judge_errors += outcome.status is Status.JUDGE_ERROR
            r = coder_reward(outcome, self.cfg.reward, self._remeasure(source))
            if outcome.correct and not r.rejected and r.reason != "hack":  # what a coder turn would be paid for
                self._verify_best = max(self._verify_best or 0.0, outcome.effective_speedup or 0.0)
        info: dict[str, Any] = {"phase": "verify", "status": PARSE_FAILED if isinstance(outcome, ParseFailure)
                                else outcome.status.value}
        if len(self._verify_exchanges) < self.cfg.skills.verify_turns:
            self._obs = self._verify_obs()
            return StepResult(self._obs, "coder", 0.0, False, info)
        assert self._summarizer is not None and self._draft is not None
        # without the skill: the episode's own first turns, as many as the regeneration had
        turns = self.cfg.skills.verify_turns
        without = max((p for s in self._coder[:turns] if (p := _paid_speedup(s)) is not None), default=None)
        evidence = Evidence(task=self.task.key, device=self.coder.device.name, speedup_with=self._verify_best,
                            speedup_without=without)
        decision = decide(self.cfg.skills.policy, evidence)
        gain = (self._verify_best or 0.0) / (without or 1.0) if decision.admitted else None
        self._summarizer.reward = summarizer_reward(decision.admitted, gain, self.cfg.reward)
        # a skill whose regenerations the judge could not judge was never tested: no reward either way
        self._summarizer.rejected = self._verify_judge_errors == len(self._verify_exchanges)
        self._summarizer.info.update(admitted=decision.admitted, admission=decision.reason,
                                     evidence=evidence.model_dump(mode="json"), skill=self._draft.model_dump(mode="json"))
        info.update(summarizer_reward=self._summarizer.reward, admitted=decision.admitted)
        self._phase = "done"
        return StepResult(None, "coder", 0.0, True, info)


def _paid_speedup(step: Step) -> float | None:
    """A coder turn's speedup when its reward paid for it: correct, not rejected, no hack."""
    return None if step.rejected or step.info.get("reason") == "hack" else step.speedup


# -- token level -------------------------------------------------------------------------------------------
class ChatTokenizer(Protocol):
    """What `play` needs of a Hugging Face tokenizer."""

    def apply_chat_template(self, conversation: Any, **kwargs: Any) -> Any: ...
    def decode(self, token_ids: Any, **kwargs: Any) -> str: ...


def chat_ids(tokenizer: ChatTokenizer, messages: list[dict[str, str]], generation_prompt: bool) -> list[int]:
    """`messages` through the tokenizer's chat template, as token ids."""
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=generation_prompt, tokenize=True)
    return list(ids["input_ids"] if isinstance(ids, Mapping) else ids)  # transformers 5 returns a BatchEncoding


@dataclass
class RoleSample:
    """One role's part of one episode, as an engine trains on it."""

    role: Role
    prompt_ids: list[int]  # the role's first prompt
    completion_ids: list[int]  # its replies, with the environment's feedback between them
    mask: list[int]  # 1 on the model's tokens, 0 on the feedback's
    reward: float | None  # the role's return; None when it did not act or every turn was rejected
    episode: Episode


@dataclass
class _Record:
    role: Role
    prompt_ids: list[int] | None = None
    completion_ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    training_turn: bool = False

    def input_ids(self, obs: Observation, tokenizer: ChatTokenizer) -> list[int]:
        """What the model continues: for the trained role's later turns, its own earlier tokens (not a
        re-tokenization of their text, which need not give them back) and the feedback's tokens."""
        self.training_turn = obs.role == self.role and not obs.phase
        if not self.training_turn:
            return chat_ids(tokenizer, obs.messages, True)
        if self.prompt_ids is None:
            self.prompt_ids = chat_ids(tokenizer, obs.messages, True)
            return list(self.prompt_ids)
        # the tokens the template adds for the newest (feedback) message, generation prompt included
        feedback = chat_ids(tokenizer, obs.messages, True)[len(chat_ids(tokenizer, obs.messages[:-1], False)):]
        self.completion_ids += feedback
        self.mask += [0] * len(feedback)
        return self.prompt_ids + self.completion_ids

    def generated(self, ids: list[int]) -> None:
        if self.training_turn:
            self.completion_ids += ids
            self.mask += [1] * len(ids)


Generate = Callable[[list[list[int]]], list[list[int]]]


def play(envs: Sequence[KernelEnv], role: Role, generate: Generate, tokenizer: ChatTokenizer, *, end_id: int,
         workers: int = 4) -> list[RoleSample]:
    """Run every environment's episode to its end, all turns of a round generated together
    (`generate`: prompt ids in, new ids out), and judged `workers` at a time. Every role acts (the model
    plays them all); `role`'s turns are the samples. A sample whose role did not act holds `end_id`
    alone, masked out."""
    records = [_Record(role) for _ in envs]
    observations: list[Observation | None] = [env.reset() for env in envs]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kc-env") as pool:
        while live := [i for i, obs in enumerate(observations) if obs is not None]:
            inputs = [records[i].input_ids(observations[i], tokenizer) for i in live]  # type: ignore[arg-type]
            outputs = generate(inputs)
            for i, ids in zip(live, outputs):
                records[i].generated(list(ids))
            replies = [tokenizer.decode(ids, skip_special_tokens=True) for ids in outputs]
            results = list(pool.map(lambda i, reply: envs[i].step(reply), live, replies))
            for i, result in zip(live, results):
                observations[i] = result.observation
    return [_sample(record, env.episode(), end_id) for record, env in zip(records, envs)]


def _sample(record: _Record, episode: Episode, end_id: int) -> RoleSample:
    trajectory = episode.trajectory(record.role)
    if record.prompt_ids is None or trajectory is None:
        return RoleSample(record.role, [end_id], [end_id], [0], None, episode)
    accepted = any(not s.rejected for s in trajectory.steps)
    return RoleSample(record.role, record.prompt_ids, record.completion_ids, record.mask,
                      trajectory.total_reward if accepted else None, episode)
