"""From a model's reply to candidate source: fenced blocks, several blocks, prose around code,
a reply cut off inside its last block. A reply with no usable `ModelNew` is a ParseFailure whose
message is fed back to the model."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+.-]*)[^\n]*\n(.*?)(?:^[ \t]*```[ \t]*$|\Z)", re.MULTILINE | re.DOTALL)
_PYTHON_TAGS = {"", "python", "py", "python3"}
_MODEL_NEW = re.compile(r"^\s*class\s+ModelNew\b", re.MULTILINE)


@dataclass(frozen=True)
class ParseFailure:
    message: str


def _blocks(text: str) -> list[tuple[str, str]]:
    return [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]


def extract_candidate(reply: str) -> str | ParseFailure:
    """The candidate source in `reply`: the last Python block that defines `ModelNew` (models
    often show a draft, then the final version). Without fences, the reply itself if it is Python
    that defines `ModelNew`. The judge reports syntax errors in a chosen block, with their line."""
    blocks = _blocks(reply)
    with_model = [code for tag, code in blocks if _MODEL_NEW.search(code) and (tag in _PYTHON_TAGS or "import" in code)]
    if with_model:
        return with_model[-1].rstrip() + "\n"
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
