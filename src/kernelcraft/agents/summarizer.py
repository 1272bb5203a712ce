"""The skill summarizer: from a trajectory that improved a lot, a model distils candidate skills.
They are only candidates: the skill library admits one after the judge shows it reproduces a gain."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..llm import ChatReply, LLMClient, Message
from ..tasks import Task
from .coder import KernelExample
from .parse import extract_json
from .prompts import render

_NAME = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class SkillDraft:
    name: str
    description: str
    scope: str
    tags: list[str]
    content: str


@dataclass(frozen=True)
class Summary:
    drafts: list[SkillDraft]
    reply: ChatReply


def skill_name(text: str) -> str:
    """A skill name: lowercase words joined by hyphens."""
    return _NAME.sub("-", text.lower()).strip("-")[:64]


def parse_drafts(text: str, max_skills: int) -> list[SkillDraft]:
    """Well-formed drafts only (a name and content at least), at most `max_skills`."""
    data = extract_json(text)
    raw = data.get("skills", []) if isinstance(data, dict) else data if isinstance(data, list) else []
    drafts = []
    for item in raw:
        if not isinstance(item, dict):
            continue
        name, content = skill_name(str(item.get("name", ""))), str(item.get("content", "")).strip()
        if not name or not content:
            continue
        tags = item.get("tags", [])
        drafts.append(SkillDraft(name=name, description=str(item.get("description", "")).strip(),
                                 scope=str(item.get("scope", "")).strip(), content=content,
                                 tags=[str(t) for t in tags] if isinstance(tags, list) else [str(tags)]))
    return drafts[:max_skills]


class SkillSummarizer:
    def __init__(self, client: LLMClient) -> None:
        self.client = client

    def summarize(self, task: Task, first: KernelExample, best: KernelExample, max_skills: int, sample: int = 0) -> Summary:
        system = render("summarizer_system", max_skills=max_skills)
        user = render("summarizer_task", task_source=task.source.strip(), first=first, best=best)
        request = self.client.request([Message("system", system), Message("user", user)], sample=sample,
                                      purpose="summarizer", task=task.key)
        reply = self.client.chat(request)
        return Summary(parse_drafts(reply.text, max_skills), reply)
