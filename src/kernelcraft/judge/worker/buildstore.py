"""The shared build cache on disk: its layout, and the rule by which a build is trusted (the worker
reads it; the judge publishes, judge/publish.py). Standard library only.

`<cache>/builds/kc_<key>/` holds one published build: `built.json`, the judge's record of it
({"key", "status": "built" or "failed", "file", "sha256", "build_s"}), and the one file it names: the
extension's shared object `kc_<key>.so`, or `failed.log` with the compiler's diagnostic. Only the
judge's trusted side publishes (builds.py), a key's directory whole, by one rename, and never changes
it after. Readers, the judge and workers alike, use a build only when `lookup` verifies it: the
directory and both files are the judge's (integrity.py), the record names this key, and the file's
SHA-256 is the recorded one. Anything else (a directory without the record, a planted failed.log, a
shared object swapped) is ignored, and replaced when the judge next builds that key.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from .integrity import Untrusted, check_dir, read_trusted, verify, warn

MARKER = "built.json"
FAILED_LOG = "failed.log"
_MARKER_LIMIT = 4096
_LOG_LIMIT = 1 << 20


@dataclass(frozen=True)
class Published:
    """A verified build of one key: its shared object, or the compiler's diagnostic it failed with."""

    key: str
    path: Path
    failed: bool
    build_s: float
    message: str = ""  # failed.log's text

    def failure(self) -> str:
        """A failed build's message when it is met again."""
        return (f"{self.message}\n(this build failed the same way before; {self.path.parent} keeps it: delete that "
                "directory to compile again)")


def builds_dir(cache_dir: Path) -> Path:
    return cache_dir / "builds"


def module_name(key: str) -> str:
    """The extension's module name (load_inline's `name`): its PyInit symbol is named after it."""
    return f"kc_{key}"


def library_name(key: str) -> str:
    return f"{module_name(key)}.so"


def key_dir(builds: Path, key: str) -> Path:
    return builds / module_name(key)


def lookup(builds: Path, key: str, uid: int) -> Published | None:
    """The key's published build if there is one and it verifies (files of the judge's user `uid`);
    otherwise None, with a warning where something unverified is there."""
    where = key_dir(builds, key)
    if not os.path.lexists(where):
        return None
    try:
        return verified(where, key, uid)
    except Untrusted as e:
        warn(f"the build directory {where}", e)
        return None


def verified(where: Path, key: str, uid: int) -> Published:
    """The build published in `where` for `key`, files of the judge's user `uid`; Untrusted otherwise."""
    check_dir(where.parent, uid)
    check_dir(where, uid)
    try:
        record = json.loads(read_trusted(where / MARKER, uid, _MARKER_LIMIT))
    except ValueError:
        raise Untrusted(f"{where / MARKER} is not a record of the judge's") from None
    status = record.get("status") if isinstance(record, dict) else None
    expected = {"built": library_name(key), "failed": FAILED_LOG}.get(status)
    if expected is None or record.get("file") != expected or record.get("key") != key or not isinstance(record.get("sha256"), str):
        raise Untrusted(f"{where / MARKER} is not a record of this build")
    failed = status == "failed"
    data = verify(where / expected, uid, record["sha256"], _LOG_LIMIT if failed else None)
    return Published(key, where / expected, failed, float(record.get("build_s", 0.0)),
                     data.decode(errors="replace") if failed else "")
