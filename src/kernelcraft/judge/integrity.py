"""Files the judge shares between evaluations (device ceilings, published builds), as written: only
by the judge's trusted side, whole at once, mode 0644 in directories of mode 0755 whatever the umask.
Readers check them (worker/integrity.py, which the worker imports too).
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from .worker.integrity import READ_FLAGS

FILE_MODE = 0o644  # set explicitly: the judge's umask may differ, and workers of another user read them
DIR_MODE = 0o755


def make_dir(path: Path) -> Path:
    """Make (or keep) a directory of the judge's, mode 0755 whatever the umask. Returns `path`."""
    path.mkdir(parents=True, exist_ok=True)
    st = os.lstat(path)
    if st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) != DIR_MODE:
        os.chmod(path, DIR_MODE)
    return path


def write_file(path: Path, data: bytes) -> None:
    """Write a file of the judge's whole at once (a reader sees the old file or the new one), mode 0644."""
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), FILE_MODE)
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_output(directory: Path, name: str, limit: int) -> bytes:
    """At most `limit` bytes of a file an untrusted process left in `directory` (a directory of the
    judge's making), read without following links: a link left there could point the judge at any
    file it may read."""
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=dfd)
    finally:
        os.close(dfd)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(f"{directory / name} is not a regular file")
        return f.read(limit)


def output_left(directory: Path, name: str, limit: int) -> bytes | None:
    """What an untrusted process left in `name` (read_output), or None where it left no such file: whatever
    it left instead is its own failure, never the machine's."""
    try:
        return read_output(directory, name, limit)
    except OSError:
        return None
