"""Scratch directories of the judge's untrusted processes (a worker, a builder, a header compiler, a profile
run): each one's cwd, HOME and TMPDIR, under the cache's `scratch/`, and gone on every way out.

A judge process keeps the scratch of everything it starts in a directory of its own, `scratch/j<pid>-<token>`,
which it holds locked (flock) while it lives; the kernel drops the lock however the process ends. Each untrusted
process's directory is removed as that process ends (a timeout included: builds.py, worker_process.py); the judge
process's whole directory when it exits (`release`, through sandbox.shutdown: a normal exit, Ctrl-C and SIGTERM
through the CLI); and a directory whose lock nobody holds (its judge was killed outright or crashed) by the next
judge that opens the cache, and by `kernelcraft gc` (`stale`). Two judges sharing one cache never remove each
other's: each holds its own lock. What a judge of the flat layout before this one left (`w-...`, `b-...` directly
in `scratch/`) goes once no process works in it and it has not changed for an hour.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .integrity import make_dir

ROOT = "scratch"
_OWN = "j"  # a judge process's directory: j<pid>-<token>
_NEW = ".new-"  # one being claimed: not yet locked, never swept while young
_IDLE_S = 3600.0  # a directory of the old layout, or a claim never finished, untouched this long is no one's


@dataclass(frozen=True)
class _Claim:
    path: Path
    fd: int  # open on `path`, holding its flock


_claims: dict[tuple[int, str], _Claim] = {}  # (pid, cache): a forked child claims its own
_claims_lock = threading.Lock()


def make_scratch(cache_dir: Path, prefix: str) -> Path:
    """A fresh scratch directory for one untrusted process, in this judge process's own directory of the cache
    (claimed at the first, after removing what dead judges left)."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=_own(Path(cache_dir))))


def _own(cache_dir: Path) -> Path:
    key = (os.getpid(), str(cache_dir.resolve()))
    with _claims_lock:
        claim = _claims.get(key)
        if claim is None:
            root = make_dir(cache_dir / ROOT)
            remove(stale(cache_dir))
            claim = _claims[key] = _claim(root)
        return claim.path


def _claim(root: Path) -> _Claim:
    """Make and lock this process's directory under a name no sweep takes, then give it its name: a sweep never
    sees it unlocked."""
    new = make_dir(Path(tempfile.mkdtemp(prefix=_NEW, dir=root)))  # 0755: workers of another user pass through it
    fd = os.open(new, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    fcntl.flock(fd, fcntl.LOCK_EX)
    path = root / f"{_OWN}{os.getpid()}-{new.name.removeprefix(_NEW)}"
    os.rename(new, path)
    return _Claim(path, fd)


def release() -> None:
    """Remove this process's scratch directories, whatever is left in them (its untrusted processes are killed
    first: sandbox.shutdown)."""
    with _claims_lock:
        mine = [k for k in _claims if k[0] == os.getpid()]
        for key in mine:
            claim = _claims.pop(key)
            shutil.rmtree(claim.path, ignore_errors=True)
            os.close(claim.fd)


def stale(cache_dir: Path) -> list[Path]:
    """What no live process uses in the cache's scratch: directories of judges that are gone (their lock is
    free), claims never finished, and the old layout's directories no process works in that have not changed
    for an hour."""
    root = cache_dir / ROOT
    try:
        entries = list(os.scandir(root))
    except OSError:
        return []
    found, cwds = [], None
    for entry in entries:
        path = Path(entry.path)
        if entry.name.startswith(_OWN) and entry.is_dir(follow_symlinks=False):
            if not _held(path):
                found.append(path)
        elif _idle(path):
            if not entry.name.startswith(_NEW):
                cwds = _working_dirs() if cwds is None else cwds
                if any(c == path or path in c.parents for c in cwds):
                    continue
            found.append(path)
    return found


def remove(paths: list[Path]) -> None:
    """Remove what a sweep found (`stale` here, precompiled.unused): directories whole, files; another sweep may
    have removed them meanwhile."""
    for path in paths:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _held(path: Path) -> bool:
    """Whether a live process holds the directory's lock (a directory that vanished counts as held: not ours)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # the lock, where taken, goes with it


def _idle(path: Path) -> bool:
    try:
        return time.time() - os.lstat(path).st_mtime > _IDLE_S
    except OSError:
        return False


def _working_dirs() -> list[Path]:
    """The working directories of the processes this one may look at (a worker or builder works in its scratch)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                found.append(Path(os.readlink(f"/proc/{entry.name}/cwd")))
            except OSError:
                pass
    return found
