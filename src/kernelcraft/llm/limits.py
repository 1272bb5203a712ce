"""How long a reply may be: the default, the output maxima providers document for their models,
and the lookup by model name or glob that prices and limits share."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import TypeVar

# Long enough for a large kernel file written by a reasoning model; an 8192 limit cut 2 of 10
# frontier-model replies to KernelBench level 3 tasks (../shared/real-model-corpus).
DEFAULT_MAX_TOKENS = 32768

# Output-token maxima the providers document, by model name or glob; the first match counts, so
# narrower patterns come first. A model not listed gets DEFAULT_MAX_TOKENS.
KNOWN_MAX_TOKENS: dict[str, int] = {
    "claude-3-haiku*": 4096, "claude-3-opus*": 4096, "claude-3-5-*": 8192, "claude-3-7-sonnet*": 64000,
    "claude-opus-4-5*": 64000, "claude-opus-4*": 32000, "claude-sonnet-4*": 64000, "claude-haiku-4*": 64000,
    "gpt-4o*": 16384, "gpt-4.1*": 32768, "gpt-5*": 128000, "o1-mini*": 65536, "o1*": 100000, "o3*": 100000,
    "o4-mini*": 100000, "deepseek-chat": 8192, "deepseek-reasoner": 65536,
}

V = TypeVar("V")


def by_model(table: Mapping[str, V], model: str) -> V | None:
    """`table`'s value for `model`: its exact name first, else the first glob that matches it (a
    provider prefix such as `openai/` is tried without too)."""
    names = [model, model.rsplit("/", 1)[-1]]
    for name in names:
        if name in table:
            return table[name]
    return next((v for pattern, v in table.items() for name in names if fnmatch.fnmatchcase(name, pattern)), None)


def known_max_tokens(model: str) -> int | None:
    """The documented output maximum of `model`, when this table knows it."""
    return by_model(KNOWN_MAX_TOKENS, model)
