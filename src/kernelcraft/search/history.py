"""The conversation a model sees on a later turn: the opening (rules and task) always, then as
many of the most recent attempts (its answer and the judge's feedback) as fit a token budget."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..llm import Message


@dataclass(frozen=True)
class Exchange:
    """One earlier turn: what the model answered and what it was told about it."""

    reply: str
    feedback: str


def estimate_tokens(text: str) -> int:
    """About four characters per token: the budget is a guard against overlong prompts, not a bill."""
    return len(text) // 4 + 1


def trimmed_history(opening: Sequence[Message], exchanges: Sequence[Exchange], budget_tokens: int,
                    omitted_note: Callable[[int], str]) -> list[Message]:
    """`opening` (with a note saying how many early turns were left out, if any), then the most
    recent exchanges that fit. The latest exchange is always kept: it holds the feedback being answered."""
    left = budget_tokens - sum(estimate_tokens(m.content) for m in opening)
    kept: list[Exchange] = []
    for ex in reversed(exchanges):
        cost = estimate_tokens(ex.reply) + estimate_tokens(ex.feedback)
        if kept and cost > left:
            break
        kept.append(ex)
        left -= cost
    kept.reverse()
    messages = list(opening)
    if len(kept) < len(exchanges):  # said at the end of the task message, so roles still alternate
        last = messages[-1]
        messages[-1] = Message(last.role, last.content + "\n\n" + omitted_note(len(exchanges) - len(kept)))
    for ex in kept:
        messages += [Message("assistant", ex.reply), Message("user", ex.feedback)]
    return messages
