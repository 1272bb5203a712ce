"""What a workspace holds on disk, by kind, and what of it is safe to free (`kernelcraft gc`): scratch no live
judge uses (judge/scratch.py) and precompiled headers no build uses (judge/precompiled.py). Everything else is
reported only: the store, runs and recorded model calls are the user's; builds and cached replies are kept
because making them again costs minutes or money."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..judge import precompiled, scratch
from ..judge.resources import dir_bytes
from ..judge.worker.buildstore import builds_dir
from .db import CACHE_DIR, DB_NAME

REPLY_CACHE = "llm-cache"  # the model client's reply cache (search/optimize.py)
RUNS = "runs"
CALLS = "llm"  # a run's recorded model calls, runs/RUN/llm (store/calls.py)
# What each kind is, in a line (the order gc lists them in).
KINDS = {
    "store": "the database: runs, attempts, verdicts",
    "runs": "reports and best kernels",
    "logs": "recorded model calls (prompts and replies)",
    "replies": "the reply cache of model calls",
    "builds": "candidates' extensions, built once",
    "pch": "precompiled headers of this workspace's judges",
    "pch (shared)": "precompiled headers all your workspaces share",
    "scratch": "untrusted processes' working directories",
    "other": "ceilings, locks",
}


@dataclass(frozen=True)
class Holding:
    """One kind of what a workspace holds: its bytes, and what of it `free` may remove."""

    kind: str
    path: Path
    bytes: int
    freeable: tuple[Path, ...] = ()
    freeable_bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "what": KINDS[self.kind], "path": str(self.path), "bytes": self.bytes,
                "freeable_bytes": self.freeable_bytes}


def holdings(workspace: Path, shared_pch: bool = False) -> list[Holding]:
    """What `workspace` holds, kind by kind (KINDS), and the precompiled headers its judge shares with the user's
    other workspaces where they lie elsewhere (kind "pch (shared)"; freed only with `shared_pch`)."""
    workspace = workspace.resolve()
    cache = workspace / CACHE_DIR
    runs = workspace / RUNS
    logs = [d for d in runs.glob(f"*/{CALLS}") if d.is_dir()]
    store_bytes = sum(_file_bytes(workspace / f"{DB_NAME}{suffix}") for suffix in ("", "-wal", "-shm"))
    stale = scratch.stale(cache)
    found = [
        Holding("store", workspace / DB_NAME, store_bytes),
        Holding("runs", runs, dir_bytes(runs) - sum(dir_bytes(d) for d in logs)),
        Holding("logs", runs / f"*/{CALLS}", sum(dir_bytes(d) for d in logs)),
        Holding("replies", workspace / REPLY_CACHE, dir_bytes(workspace / REPLY_CACHE)),
        Holding("builds", builds_dir(cache), dir_bytes(builds_dir(cache))),
        _headers("pch", cache / precompiled.IN_CACHE),
        Holding("scratch", cache / scratch.ROOT, dir_bytes(cache / scratch.ROOT), tuple(stale), _bytes(stale)),
    ]
    counted = sum(h.bytes for h in found) - found[0].bytes
    found.append(Holding("other", workspace, max(0, dir_bytes(workspace) - store_bytes - counted)))
    shared = precompiled.root(cache)
    if shared is not None and workspace not in shared.parents:
        found.append(_headers("pch (shared)", shared) if shared_pch else Holding("pch (shared)", shared, dir_bytes(shared)))
    return found


def free(found: list[Holding]) -> int:
    """Remove what each holding may free; the bytes freed (what another process removed meanwhile is not counted)."""
    freed = 0
    for h in found:
        for path in h.freeable:
            before = _bytes([path])
            scratch.remove([path])
            freed += before - _bytes([path])
    return freed


def _headers(kind: str, where: Path) -> Holding:
    unused = precompiled.unused(where)
    return Holding(kind, where, dir_bytes(where), tuple(unused), _bytes(unused))


def _bytes(paths: list[Path]) -> int:
    return sum(dir_bytes(p) if p.is_dir() and not p.is_symlink() else _file_bytes(p) for p in paths)


def _file_bytes(path: Path) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0
