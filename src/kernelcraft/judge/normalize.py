"""A candidate's source with comments and layout removed, so that two answers differing only in
comments or whitespace are recognised as one kernel and judged once."""

from __future__ import annotations

import hashlib
import io
import json
import re
import tokenize
from typing import Any

from .config import JudgeConfig
from .version import JUDGE_VERSION

_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING}
_C_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_C_LINE_COMMENT = re.compile(r"(?m)^\s*//.*$")


def _normalize_string(token: str) -> str:
    """Kernel source lives in string literals: drop C/C++ comments, indentation and blank lines.
    Line breaks stay (the preprocessor needs them); a `//` after code on a line stays too, since
    it may sit inside a C string literal."""
    text = _C_LINE_COMMENT.sub("", _C_BLOCK_COMMENT.sub("", token))
    return "\n".join(line.strip() for line in text.splitlines() if line.strip())


def normalized_source(source: str) -> str:
    """Python tokens without comments, one space apart, indentation kept as markers; string
    literals normalised as C++ source. Unparseable source is returned with whitespace collapsed."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return " ".join(source.split())
    parts = []
    for tok in tokens:
        if tok.type in _SKIP:
            continue
        if tok.type == tokenize.STRING:
            parts.append(_normalize_string(tok.string))
        elif tok.type == tokenize.INDENT:
            parts.append("<indent>")
        elif tok.type == tokenize.DEDENT:
            parts.append("<dedent>")
        elif tok.type == tokenize.NEWLINE:
            parts.append(";")
        else:
            parts.append(tok.string)
    return " ".join(parts)


def normalized_hash(source: str) -> str:
    return hashlib.sha256(normalized_source(source).encode()).hexdigest()


def context_hash(task_source: str, task_meta: dict[str, Any], config: JudgeConfig, device_name: str) -> str:
    """What a verdict depends on besides the candidate: the task as judged, the judge's settings and
    version, and the device. Two verdicts with equal context and normalized source are interchangeable."""
    body = {"task": task_source, "meta": task_meta, "judge": config.to_dict(), "version": JUDGE_VERSION, "device": device_name}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()
