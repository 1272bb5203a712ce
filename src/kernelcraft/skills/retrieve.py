"""BM25 recall of skills by a task's text (the `bm25s` library): the first, cheap filter before
the selector model reads the skills' descriptions."""

from __future__ import annotations

import re
from collections.abc import Sequence

import bm25s

from .model import Skill

# Identifiers in task code carry the meaning (log_softmax, LayerNorm, conv2d): split them into words.
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _words(text: str) -> str:
    return _CAMEL.sub(" ", text).replace("_", " ").replace(".", " ").lower()


def recall(skills: Sequence[Skill], query: str, k: int = 20) -> list[Skill]:
    """The (at most) k skills whose text best matches `query`, best first; skills that share no word
    with the query are left out."""
    if not skills or k <= 0:
        return []
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize([_words(s.search_text()) for s in skills], stopwords="en", show_progress=False),
                    show_progress=False)
    tokens = bm25s.tokenize([_words(query)], stopwords="en", show_progress=False)
    if not tokens.vocab:
        return []
    ids, scores = retriever.retrieve(tokens, k=min(k, len(skills)), show_progress=False)
    return [skills[int(i)] for i, score in zip(ids[0], scores[0]) if score > 0]
