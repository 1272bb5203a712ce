"""Near-duplicate kernels for the SFT export: MinHash (datasketch) over token shingles of the
normalized source, in which the names a candidate binds itself are renamed in order of first use.
Two answers that differ only in comments, layout or their own variable names are then one kernel;
library names (torch.relu vs torch.sigmoid) are kept, so different code stays different."""

from __future__ import annotations

import ast
from collections.abc import Sequence

from datasketch import MinHash, MinHashLSH

from ..judge.normalize import normalized_source


def bound_names(source: str) -> set[str]:
    """Names the source defines: classes, functions, parameters, assigned variables (none when it does not parse)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def code_tokens(source: str) -> list[str]:
    """The normalized source's tokens, each bound name replaced by its rank of first appearance."""
    bound = bound_names(source)
    ranks: dict[str, str] = {}
    tokens = []
    for tok in normalized_source(source).split():
        if tok in bound:
            tok = ranks.setdefault(tok, f"<v{len(ranks)}>")
        tokens.append(tok)
    return tokens


def shingles(source: str, size: int) -> set[str]:
    """Every run of `size` consecutive tokens (the whole source when it is shorter)."""
    tokens = code_tokens(source)
    if len(tokens) <= size:
        return {" ".join(tokens)}
    return {" ".join(tokens[i:i + size]) for i in range(len(tokens) - size + 1)}


def near_duplicates(sources: Sequence[str], threshold: float, *, shingle: int = 5, num_perm: int = 128) -> list[int | None]:
    """For each source, in the order given (the one to keep first), the index of an earlier kept source
    whose estimated Jaccard similarity is at least `threshold`, or None when it is kept."""
    sketches = MinHash.bulk([[s.encode() for s in shingles(src, shingle)] for src in sources], num_perm=num_perm)
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    found: list[int | None] = []
    for i, sketch in enumerate(sketches):
        # LSH proposes pairs likely above the threshold; the estimate confirms them
        match = min((j for j in lsh.query(sketch) if sketch.jaccard(sketches[j]) >= threshold), default=None)
        if match is None:
            lsh.insert(i, sketch)
        found.append(match)
    return found
