"""BM25 recall of skills by a task's text (the `bm25s` library): the first, cheap filter before
the selector model reads the skills' descriptions."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from types import ModuleType

from ..tasks import Task
from .model import Skill

# Identifiers in task code carry the meaning (log_softmax, LayerNorm, conv2d): split them into words.
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _bm25s() -> ModuleType:
    """bm25s, imported without JAX. bm25s imports JAX when it can and runs a computation with it, and
    JAX then takes 75% of the GPU's memory, which the judge's workers need; BM25 over a few dozen
    skills needs only numpy. A process that already uses JAX keeps it."""
    if "bm25s" in sys.modules or "jax" in sys.modules:
        import bm25s
        return bm25s
    sys.modules["jax"] = None  # type: ignore[assignment]  # makes `import jax` fail inside bm25s
    try:
        import bm25s
    finally:
        del sys.modules["jax"]
    return bm25s


def _words(text: str) -> str:
    return _CAMEL.sub(" ", text).replace("_", " ").replace(".", " ").lower()


def task_query(task: Task) -> str:
    """What BM25 matches skills against for a task: its name, description, tags and source."""
    return f"{task.name} {task.meta.description} {' '.join(task.meta.tags)} {task.source}"


def recall(skills: Sequence[Skill], query: str, k: int = 20) -> list[Skill]:
    """The (at most) k skills whose text best matches `query`, best first; skills that share no word
    with the query are left out."""
    if not skills or k <= 0:
        return []
    bm25s = _bm25s()
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize([_words(s.search_text()) for s in skills], stopwords="en", show_progress=False),
                    show_progress=False)
    tokens = bm25s.tokenize([_words(query)], stopwords="en", show_progress=False)
    if not tokens.vocab:
        return []
    ids, scores = retriever.retrieve(tokens, k=min(k, len(skills)), show_progress=False, backend_selection="numpy")
    return [skills[int(i)] for i, score in zip(ids[0], scores[0]) if score > 0]
