"""The skill selector: from the skills a retriever recalled for a task, a model picks at most k,
with a reason for each."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ..llm import ChatReply, LLMClient, Message
from ..tasks import Task
from .parse import extract_json
from .prompts import render


class SkillCard(Protocol):
    """What the selector sees of a skill: its metadata, not its content."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def scope(self) -> str: ...
    @property
    def tags(self) -> Sequence[str]: ...


@dataclass(frozen=True)
class SkillChoice:
    name: str
    reason: str


@dataclass(frozen=True)
class Selection:
    choices: list[SkillChoice]
    reply: ChatReply


def parse_choices(text: str, known: set[str], k: int) -> list[SkillChoice]:
    """The model's picks that name a recalled skill, first k, each once. A reply with no usable JSON
    picks nothing: the no-skill scheme is the safe reading."""
    data = extract_json(text)
    raw = data.get("skills", []) if isinstance(data, dict) else data if isinstance(data, list) else []
    picks: dict[str, SkillChoice] = {}
    for item in raw:
        name, reason = (item.get("name"), item.get("reason", "")) if isinstance(item, dict) else (item, "")
        if isinstance(name, str) and name in known and name not in picks:
            picks[name] = SkillChoice(name, str(reason).strip())
    return list(picks.values())[:k]


class SkillSelector:
    def __init__(self, client: LLMClient) -> None:
        self.client = client

    def select(self, task: Task, cards: Sequence[SkillCard], k: int, sample: int = 0) -> Selection:
        system = render("selector_system", k=k)
        user = render("selector_task", task_source=task.source.strip(), cards=list(cards))
        request = self.client.request([Message("system", system), Message("user", user)], sample=sample,
                                      purpose="selector", task=task.key)
        reply = self.client.chat(request)
        return Selection(parse_choices(reply.text, {c.name for c in cards}, k), reply)
