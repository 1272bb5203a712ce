"""A conversation that goes round in circles: a model told the judge's verdict on its answer may give the same
answer again, and then again, each one judged (or its verdict reused) and shown the same feedback. After
`REPEAT_LIMIT` equal answers in a row the sample ends: more turns would ask the same question again."""

from __future__ import annotations

from collections.abc import Sequence

from ..judge import normalized_hash

REPEAT_LIMIT = 3  # equal answers in a row that end a sample


def answer_key(source: str | None, reply: str | None) -> str | None:
    """What makes two answers equal: the candidate up to comments and layout (as verdict reuse compares them), or,
    for a reply that held no candidate, its text up to whitespace; None for a turn that got no reply."""
    if source is not None:
        return "source:" + normalized_hash(source)
    return None if reply is None else "reply:" + " ".join(reply.split())


def repeating(keys: Sequence[str | None]) -> bool:
    """Whether the latest `REPEAT_LIMIT` answers are one answer."""
    last = keys[-REPEAT_LIMIT:]
    return len(last) == REPEAT_LIMIT and last[0] is not None and len(set(last)) == 1


def repeat_note(sample: int, turns: int) -> str:
    """The line that says a sample ended for repeating itself (`sample` as stored, from 0; `turns` it took)."""
    return (f"sample {sample + 1} stopped after turn {turns}: the model gave the same answer {REPEAT_LIMIT} turns in a row "
            "(the same kernel, up to comments and layout)")
