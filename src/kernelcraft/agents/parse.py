"""From a model's reply to candidate source: fenced blocks, several blocks, prose around code,
a reply cut off inside its last block. A reply with no usable `ModelNew` is a ParseFailure whose
message is fed back to the model; a reply cut at the token limit before its code was complete is
a Truncated one."""

from __future__ import annotations

import ast
import json
import re
from typing import Any
from dataclasses import dataclass

_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+.-]*)[^\n]*\n(.*?)(?:(^[ \t]*```[ \t]*$)|\Z)", re.MULTILINE | re.DOTALL)
_PYTHON_TAGS = {"", "python", "py", "python3"}
_MODEL_NEW = re.compile(r"^\s*class\s+ModelNew\b", re.MULTILINE)


@dataclass(frozen=True)
class ParseFailure:
    message: str


@dataclass(frozen=True)
class Truncated(ParseFailure):
    """The reply was cut at the token limit before it held a complete candidate."""

    max_tokens: int = 0


@dataclass(frozen=True)
class _Block:
    tag: str
    code: str
    closed: bool  # ended by its closing fence, not by the end of the reply


def _blocks(text: str) -> list[_Block]:
    return [_Block(m.group(1).lower(), m.group(2), m.group(3) is not None) for m in _FENCE.finditer(text)]


def extract_candidate(reply: str, cut_at: int | None = None) -> str | ParseFailure:
    """The candidate source in `reply`: the last Python block that defines `ModelNew` (models
    often show a draft, then the final version). Without fences, the reply itself if it is Python
    that defines `ModelNew`. The judge reports syntax errors in a chosen block, with their line.
    `cut_at`: the reply was cut at this many tokens, so only a block that was closed counts, and
    without one the reply is Truncated."""
    blocks = _blocks(reply)
    with_model = [b.code for b in blocks if _MODEL_NEW.search(b.code) and (b.tag in _PYTHON_TAGS or "import" in b.code)
                  and (b.closed or cut_at is None)]
    if with_model:
        return with_model[-1].rstrip() + "\n"
    if cut_at is not None:
        return Truncated(f"the reply was cut at the {cut_at}-token limit before its code was complete", cut_at)
    if not blocks and _MODEL_NEW.search(reply):
        try:
            ast.parse(reply)
            return reply.strip() + "\n"
        except SyntaxError:
            pass
    if not reply.strip():
        return ParseFailure("the reply was empty")
    if blocks:
        return ParseFailure(f"none of the {len(blocks)} code block(s) defines `class ModelNew`")
    return ParseFailure("the reply holds no code block defining `class ModelNew`")


_JSON_START = re.compile(r"[\[{]")


def extract_json(reply: str) -> Any:
    """The JSON value of a reply: the last ```json block, else the first parseable object or array
    in the text. None when there is none (the caller decides what a missing answer means)."""
    blocks = [b.code for b in _blocks(reply) if b.tag in ("json", "")]
    for text in reversed(blocks):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            continue
    decoder = json.JSONDecoder()
    for m in _JSON_START.finditer(reply):
        try:
            return decoder.raw_decode(reply, m.start())[0]
        except json.JSONDecodeError:
            continue
    return None


_SECTION = re.compile(r"^#+\s*(performance analysis|algorithm design|code)\b", re.IGNORECASE | re.MULTILINE)


def contrastive_sections(reply: str) -> dict[str, str]:
    """The three parts a contrastive answer must have (performance analysis, algorithm design,
    code), by heading; a missing part is absent from the result."""
    marks = list(_SECTION.finditer(reply))
    return {m.group(1).lower(): reply[m.end(): marks[i + 1].start() if i + 1 < len(marks) else len(reply)].strip()
            for i, m in enumerate(marks)}
