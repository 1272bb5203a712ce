"""Files the judge shares between evaluations (device ceilings, published builds), as read: written
only by the judge's trusted side (judge/integrity.py), and checked whenever read, by the judge or by a
worker. Standard library only.

A file is the judge's when it is a regular file (not a link) owned by the judge's user and writable by
no group or other user, in a directory of which the same holds. Ownership stops a candidate running
as another user; while candidates still run as the judge's own user it cannot, so a reader also checks
the file's SHA-256 against what the judge recorded when it wrote the file (the caller's record).
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from pathlib import Path

# Not through a link; not blocking on a FIFO left in a file's place (what is opened is checked to be a
# regular file before it is read).
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class Untrusted(Exception):
    """A shared file is not the judge's, or not what the judge wrote: the message says why."""


def _check(st: os.stat_result, path: Path, uid: int, want_dir: bool) -> None:
    kind_ok = stat.S_ISDIR(st.st_mode) if want_dir else stat.S_ISREG(st.st_mode)
    if not kind_ok:
        raise Untrusted(f"{path} is not a {'directory' if want_dir else 'regular file'}")
    if st.st_uid != uid:
        raise Untrusted(f"{path} is owned by uid {st.st_uid}, not by the judge's uid {uid}")
    if st.st_mode & 0o022:
        raise Untrusted(f"{path} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})")


def check_dir(path: Path, uid: int) -> None:
    """Raise Untrusted unless `path` is a directory of the judge's (not a link)."""
    try:
        st = os.lstat(path)
    except OSError as e:
        raise Untrusted(f"{path}: {e.strerror or e}") from None
    _check(st, path, uid, want_dir=True)


def read_trusted(path: Path, uid: int, limit: int | None = None) -> bytes:
    """The bytes of a file of the judge's in a directory of the judge's (the file checked as opened, so
    one swapped in after the check is not what is read); Untrusted if either is not the judge's, or the
    file has more than `limit` bytes."""
    check_dir(path.parent, uid)
    try:
        fd = os.open(path, READ_FLAGS)
    except OSError as e:
        raise Untrusted(f"{path}: {e.strerror or e}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        _check(st, path, uid, want_dir=False)
        if limit is not None and st.st_size > limit:
            raise Untrusted(f"{path} has {st.st_size} bytes, more than the judge ever writes there ({limit})")
        return f.read()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def verify(path: Path, uid: int, digest: str, limit: int | None = None) -> bytes:
    """The bytes of a file of the judge's whose SHA-256 is `digest` (what the judge recorded); Untrusted otherwise."""
    data = read_trusted(path, uid, limit)
    if sha256(data) != digest:
        raise Untrusted(f"{path} is not the file the judge wrote (its SHA-256 differs from the judge's record)")
    return data


def warn(what: str, e: Exception) -> None:
    """The one line said when a shared file is ignored: it is never trusted, and is made again."""
    print(f"warning: ignoring {what}: {e}", file=sys.stderr, flush=True)
