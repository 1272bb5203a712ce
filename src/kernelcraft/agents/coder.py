"""The coder: turns a task (and the judge's feedback on earlier attempts) into messages, asks the
model, and parses the answer into candidate source."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..judge import DeviceDescription, KernelProfile, TaskRules, Verdict
from ..llm import ChatReply, ChatRequest, LLMClient, Message
from ..tasks import Task
from .languages import LANGUAGES
from .parse import ParseFailure, Truncated, extract_candidate
from .prompts import render

@dataclass(frozen=True)
class Proposal:
    request: ChatRequest
    reply: ChatReply
    candidate: str | ParseFailure


@dataclass(frozen=True)
class KernelExample:
    """An earlier kernel as a prompt shows it: its source, its measured speedup (None: not correct),
    and what the judge said."""

    source: str
    speedup: float | None
    feedback: str = ""


class SkillText(Protocol):
    """What the coder needs of a skill: its name and the technique in words."""

    @property
    def name(self) -> str: ...
    @property
    def content(self) -> str: ...


# The ways a strategy can direct the coder beyond the plain task (templates coder_<kind>.j2).
DIRECTIONS = ("idea", "contrastive", "mutation", "crossover")


class Coder:
    """The coder's prompts and, with a client, its answers. Without one (an RL engine's model answers)
    it renders prompts only."""

    def __init__(self, client: LLMClient | None, language: str, device: DeviceDescription) -> None:
        if language not in LANGUAGES:
            raise ValueError(f"unknown language {language!r}: use {' or '.join(LANGUAGES)}")
        self.client = client
        self.language = language
        self.device = device

    def opening(self, task: Task, rules: TaskRules, skills: Sequence[SkillText] = ()) -> list[Message]:
        """The judge's rules as `rules` numbers them (with the chosen skills' techniques) and the task, as the first
        two messages."""
        lang = LANGUAGES[self.language]
        system = render("coder_system", language=lang, rules=rules, skills=list(skills))
        user = render("coder_task", language_name=lang.name, task_source=task.source.strip(), device=self.device)
        return [Message("system", system), Message("user", user)]

    @staticmethod
    def directed(opening: Sequence[Message], direction: str, **values: Any) -> list[Message]:
        """`opening` with the task message extended by a strategy's direction: an idea to implement,
        two exemplars to contrast, a parent to mutate, two parents to cross."""
        if direction not in DIRECTIONS:
            raise ValueError(f"unknown direction {direction!r}")
        messages = list(opening)
        last = messages[-1]
        messages[-1] = Message(last.role, last.content + "\n\n" + render(f"coder_{direction}", **values))
        return messages

    @staticmethod
    def feedback(outcome: Verdict | ParseFailure, kernels: KernelProfile | None = None) -> Message:
        """What the model hears about its last answer; for a correct kernel, also where it stands on the
        hardware: its roofline and, when it was profiled, its top kernels with their limiters."""
        if isinstance(outcome, Truncated):
            return Message("user", render("coder_truncated", max_tokens=outcome.max_tokens))
        if isinstance(outcome, ParseFailure):
            return Message("user", render("coder_feedback", parse_error=outcome.message))
        v = outcome
        return Message("user", render(
            "coder_feedback", parse_error=None, status=v.status.value, message=v.message.strip(), speedup=v.speedup,
            reference_ms=v.reference.median_ms if v.reference else None, candidate_ms=v.candidate.median_ms if v.candidate else None,
            band=v.speedup_band, coverage=v.coverage, flags=v.flags, roofline=v.roofline, kernels=kernels))

    @staticmethod
    def omitted_note(count: int) -> str:
        """Said to the model when `count` early attempts no longer fit its context."""
        return render("coder_history_omitted", count=count).strip()

    def ready(self, messages: Sequence[Message], *, task: str, sample: int = 0) -> bool:
        """Whether `propose` with these arguments would be answered without a model call (see LLMClient.ready)."""
        if self.client is None:
            return False
        return self.client.ready(self.client.request(messages, sample=sample, purpose="coder", task=task))

    def propose(self, messages: Sequence[Message], *, task: str, sample: int = 0) -> Proposal:
        """One answer to `messages`, parsed (a reply cut at the token limit without complete code is
        Truncated). LLM errors (budget, endpoint) propagate."""
        if self.client is None:
            raise RuntimeError("this coder renders prompts only: it has no LLM client")
        request = self.client.request(messages, sample=sample, purpose="coder", task=task)
        reply = self.client.chat(request)
        return Proposal(request, reply, extract_candidate(reply.text, request.sampling.max_tokens if reply.truncated else None))
