"""Device ceilings for the physical-floor audit: memory bandwidth and matmul peak, measured once
per device (in a worker: worker/ceilings.py) and cached by the parent in the judge's cache directory: `ceilings.json`,
with its SHA-256 in `ceilings.json.sha256`. Both are the judge's files (integrity.py, worker/integrity.py): ceilings read
from anything else would let a candidate raise them, and so switch the floor off."""

from __future__ import annotations

import json
import os
import threading
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Callable

from .integrity import write_file
from .locks import file_lock
from .worker.ceilings import best_of
from .worker.integrity import Untrusted, read_trusted, sha256, verify, warn

FILE = "ceilings.json"
DIGEST_FILE = FILE + ".sha256"
_LIMIT = 1 << 20
_LOCK_S = 60.0  # the lock covers a read or a write of two small files


def _lock(cache_dir: Path, shared: bool) -> AbstractContextManager[bool]:
    # The file and its digest are written one after the other: a reader must not see one without the other.
    return file_lock(cache_dir / "locks" / "ceilings.lock", _LOCK_S, shared=shared)


def _read(cache_dir: Path) -> dict[str, Any]:
    path = cache_dir / FILE
    if not path.exists():
        return {}
    try:
        digest = read_trusted(cache_dir / DIGEST_FILE, os.geteuid(), 128).decode(errors="replace").strip()
        cached = json.loads(verify(path, os.geteuid(), digest, _LIMIT))
        if not isinstance(cached, dict):
            raise ValueError("not a JSON object")
        return cached
    except (Untrusted, ValueError) as e:
        warn(f"the cached ceilings {path}", e)
        return {}


def cached_ceilings(cache_dir: Path) -> dict[str, Any]:
    """The ceilings the judge recorded in `cache_dir`, by device key: {} where there are none, or where
    the file is not the judge's (with a warning), so they are measured again."""
    with _lock(cache_dir, shared=True):
        return _read(cache_dir)


def record_ceilings(cache_dir: Path, key: str, measured: dict[str, Any]) -> dict[str, Any]:
    """Keep a measurement of the device `key`: the best of it and what the judge recorded (best_of).
    Returns the ceilings kept."""
    with _lock(cache_dir, shared=False):
        cached = _read(cache_dir)
        cached[key] = best_of(cached.get(key), measured)
        data = json.dumps(cached, indent=1).encode()
        write_file(cache_dir / FILE, data)
        write_file(cache_dir / DIGEST_FILE, sha256(data).encode())
        return cached[key]


class CeilingsCache:
    """This device's ceilings for one judge: measured once per machine (`measure`, in a trusted worker),
    kept on disk (cached_ceilings, record_ceilings) and here. The first evaluation asks before it starts
    any worker, so the pool is quiet: a ceiling measured under load would raise the floor and reject
    honest kernels."""

    def __init__(self, cache_dir: Path, key: Callable[[], str], measure: Callable[[], dict[str, Any]]) -> None:
        self.cache_dir = cache_dir
        self.key = key  # the device's key ("cpu|<name>|<torch version>"); asked only when the ceilings are
        self.measure = measure
        self.known: dict[str, Any] | None = None
        self._lock = threading.Lock()  # its own: measuring must not stall reference lookups

    def get(self, refresh: bool = False) -> dict[str, Any]:
        """The ceilings; `refresh` measures again and keeps the best of old and new (before any floor reject)."""
        with self._lock:
            if self.known is not None and not refresh:
                return self.known
            key = self.key()
            ceilings = cached_ceilings(self.cache_dir).get(key)
            if ceilings is None or refresh:
                ceilings = record_ceilings(self.cache_dir, key, self.measure())
            self.known = ceilings
            return ceilings
