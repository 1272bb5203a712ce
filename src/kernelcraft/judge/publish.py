"""Publishing a build into the shared build cache (worker/buildstore.py: its layout and the rule by which
a build is trusted). Only the judge's trusted side publishes, a key's directory whole, by one rename,
and never changes it after.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
from pathlib import Path

from .integrity import make_dir, write_file
from .worker.buildstore import FAILED_LOG, MARKER, key_dir, library_name, verified
from .worker.integrity import Untrusted, sha256


def publish_build(builds: Path, key: str, library: bytes, build_s: float) -> None:
    """Publish the shared object a builder made for `key`, written into a directory of the judge's (the
    builder's own files are not the judge's once it runs as another user), with its record."""
    _publish(builds, key, library_name(key), library, {"status": "built", "build_s": build_s})


def publish_failure(builds: Path, key: str, message: str, build_s: float) -> None:
    """Publish a compiler's diagnostic for `key`: the same build then fails at once instead of compiling again."""
    _publish(builds, key, FAILED_LOG, message.encode(), {"status": "failed", "build_s": build_s})


def _publish(builds: Path, key: str, name: str, data: bytes, record: dict[str, object]) -> None:
    """Write the build's directory aside, then rename it into place. The caller holds the key's lock (or
    waited long enough) and found no verified build: what stands in its place is not the judge's and
    goes first."""
    make_dir(builds)
    staging = make_dir(Path(tempfile.mkdtemp(prefix=".staging-", dir=builds)))
    try:
        write_file(staging / name, data)
        write_file(staging / MARKER, json.dumps({"key": key, "file": name, "sha256": sha256(data), **record}).encode())
        final = key_dir(builds, key)
        if os.path.lexists(final) and not _is_published(final, key):
            _discard(builds, final)
        try:
            os.rename(staging, final)
        except OSError:
            if not _is_published(final, key):
                raise
            # else published meanwhile by a judge that went on without the lock: the first one stays
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _is_published(where: Path, key: str) -> bool:
    try:
        verified(where, key, os.geteuid())
        return True
    except Untrusted:
        return False


def _discard(builds: Path, path: Path) -> None:
    """Move what is not the judge's out of the way (within builds/: moving a directory elsewhere would
    need write access to it), then delete what can be deleted."""
    aside = builds / f".rejected-{path.name}-{secrets.token_hex(4)}"
    os.rename(path, aside)
    if aside.is_dir() and not aside.is_symlink():
        shutil.rmtree(aside, ignore_errors=True)
    else:
        aside.unlink(missing_ok=True)
