"""The idea planner: a model proposes optimization ideas in plain language, conditioned on the ideas
already tried and what they reached; each idea is then implemented by the coder."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..judge import DeviceDescription, TaskRules
from ..llm import ChatReply, LLMClient, Message
from ..tasks import Task
from .coder import KernelExample
from .languages import LANGUAGES
from .parse import extract_json
from .prompts import render


@dataclass(frozen=True)
class TriedIdea:
    idea: str
    speedup: float | None  # the best correct implementation's speedup, None if none was correct
    status: str = ""  # the most common failure when none was correct


@dataclass(frozen=True)
class Plan:
    ideas: list[str]
    reply: ChatReply


_NUMBERED = re.compile(r"^\s*(?:\d+[.)]|[-*])\s+(.+)$", re.MULTILINE)


def parse_ideas(text: str, width: int) -> list[str]:
    """At most `width` distinct ideas: from the JSON answer, else from a numbered or bulleted list."""
    data = extract_json(text)
    raw = data.get("ideas", []) if isinstance(data, dict) else data if isinstance(data, list) else []
    ideas = [str(i).strip() for i in raw if isinstance(i, (str, int, float)) and str(i).strip()]
    if not ideas:
        ideas = [m.group(1).strip() for m in _NUMBERED.finditer(text)]
    unique = list(dict.fromkeys(ideas))
    return unique[:width]


class Planner:
    def __init__(self, client: LLMClient, language: str, device: DeviceDescription) -> None:
        self.client = client
        self.language = language
        self.device = device

    def plan(self, task: Task, *, width: int, tried: Sequence[TriedIdea], seeds: Sequence[KernelExample],
             rules: TaskRules, sample: int = 0) -> Plan:
        """`width` ideas for the next round (fewer if the model gave fewer), under the judge's `rules`. LLM errors
        propagate."""
        system = render("planner_system", language=LANGUAGES[self.language], rules=rules)
        user = render("planner_task", device=self.device, task_source=task.source.strip(), tried=list(tried),
                      seeds=list(seeds), width=width)
        request = self.client.request([Message("system", system), Message("user", user)], sample=sample,
                                      purpose="planner", task=task.key)
        reply = self.client.chat(request)
        return Plan(parse_ideas(reply.text, width), reply)
