"""Precompiled torch/extension.h for candidates' C++ builds (parent side). A small extension spends most of
its compile parsing that header (on a 2-core machine, 48 CPU seconds of a CPU build without it, 23 with it).
GCC uses a precompiled header only where it was made with the same flags, so the judge keeps one per set of
flags: a header compiler (worker/precompile.py, sandboxed like a builder) makes it in the background, and
later builds with those flags include it.

When: making one costs about 58 CPU seconds and 750 MB, about what two and a half builds save. A judge process
makes it at its second build with a set of flags (a search or a suite: a lone `eval` builds once and makes
none), so it pays for itself from the third build after that, in this process or any later one of the user's.

Only flag sets that cannot name a file are precompiled (`eligible`): the header is shared by every later build
with those flags, so what goes into it must come from PyTorch's headers alone. GCC checks the rest itself: a
header that does not fit a compile is ignored there, and the build parses torch/extension.h as it always did.

Where: KERNELCRAFT_PCH_DIR, else the user's cache (`shared_dir`: $XDG_CACHE_HOME/kernelcraft/pch, by default
~/.cache/kernelcraft/pch), shared by all their workspaces, or the judge's cache (`pch/`) where workers running
as another user could not reach the user's; "off" precompiles nothing. Only the judge writes there, one set's
directory whole by one rename, and keeps the `LIMIT` most recently used (each is most of a GB).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from functools import cache
from pathlib import Path
from typing import Any, Callable

import torch
import torch.utils.cpp_extension as cpp_extension

from .integrity import make_dir
from .isolation import closed_to_workers
from .locks import file_lock
from .worker.precompile import HEADER, torch_header, uses_cuda

ENV = "KERNELCRAFT_PCH_DIR"
IN_CACHE = "pch"  # a judge cache's own, where workers could not read the user's
LIMIT = 4
_IN_USE_S = 3600.0  # longer than any build may run
# Flags that change how the header compiles and name no file: optimisation, target, language, macros, warnings.
_SAFE_FLAG = re.compile(r"-(O[0-3sgz]?|Ofast|g[0-3]?|std=[\w+]+|m[\w.-]+|m\w+=[\w.,-]+|f[\w-]+|D\w+(=[\w.-]*)?|U\w+|W[\w-]*|w|pthread)")

_STAGING = ".staging-"  # + the set's signature: a header being made, published by a rename

_making: set[str] = set()
_built: set[str] = set()  # the sets of flags this process has built with
_making_lock = threading.Lock()


def shared_dir() -> Path | None:
    """The user's own directory of precompiled headers, shared by all their workspaces (None: no home)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    try:
        cache = Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    except RuntimeError:  # no HOME and no passwd entry
        return None
    return cache / "kernelcraft" / "pch"


def root(cache_dir: Path) -> Path | None:
    """Where the precompiled headers of a judge with this cache live (None: off)."""
    chosen = os.environ.get(ENV, "")
    if chosen.lower() == "off" or not gcc_version():
        return None
    if chosen:
        return Path(chosen).resolve()
    shared = shared_dir()
    # A builder of another user (the judge runs as root) must read the header: not through root's home.
    return shared if shared is not None and closed_to_workers(shared) is None else cache_dir / IN_CACHE


def wanted(sig: str) -> bool:
    """Whether the header for the flags `sig` should be made now: at this process's second build with them (a process
    that builds twice with one set of flags, a search or a suite, builds with it again; a lone eval builds once)."""
    with _making_lock:
        if sig in _built:
            return True
        _built.add(sig)
        return False


def eligible(arguments: dict[str, Any]) -> bool:
    """Whether a build with these load_inline arguments may share a precompiled header: it compiles C++
    files, and its flags are all of the kinds that name no file."""
    if arguments.get("extra_include_paths") or not arguments.get("cpp_sources"):
        return False
    flags = arguments.get("extra_cflags") or []
    return isinstance(flags, list) and all(isinstance(f, str) and _SAFE_FLAG.fullmatch(f.strip()) for f in flags)


def signature(arguments: dict[str, Any]) -> str:
    """The precompiled header's key: the compiler, PyTorch, and the flags the header compiles with."""
    what = [gcc_version(), torch.__version__, str(torch_header()), uses_cuda(arguments),
            [f.strip() for f in arguments.get("extra_cflags") or []]]
    return hashlib.sha256(json.dumps(what).encode()).hexdigest()[:24]


def ready(where: Path, sig: str) -> Path | None:
    """The header to include (`-include` it: GCC then reads the .gch beside it) where it has been made;
    marked used now, so that no judge removes it under the build about to read it."""
    header = where / sig / HEADER
    if not header.with_name(header.name + ".gch").is_file():
        return None
    try:
        os.utime(where / sig)
    except OSError:
        return None
    return header


def make_later(where: Path, sig: str, make: Callable[[Path], bool]) -> None:
    """Make the header for `sig` in a thread of its own, unless this process or another judge is at it:
    `make(gch)` writes the .gch (through the sandbox) and says whether it did; the judge then publishes it."""
    with _making_lock:
        if sig in _making:
            return
        _making.add(sig)
    threading.Thread(target=_make, args=(where, sig, make), name=f"pch-{sig[:8]}", daemon=True).start()


def _make(where: Path, sig: str, make: Callable[[Path], bool]) -> None:
    try:
        with file_lock(make_dir(where) / f".{sig}.lock", 0) as held:
            if not held or ready(where, sig):
                return
            for left in where.glob(f"{_STAGING}{sig}-*"):  # a judge that died making it: the lock is free again
                shutil.rmtree(left, ignore_errors=True)
            staging = Path(tempfile.mkdtemp(prefix=f"{_STAGING}{sig}-", dir=where))
            try:
                made = make_dir(staging / HEADER.parent) / (HEADER.name + ".gch")
                if not make(made):
                    return
                shutil.copyfile(torch_header(), staging / HEADER)
                for f in (made, staging / HEADER):
                    f.chmod(0o644)
                make_dir(staging)
                os.rename(staging, where / sig)
                _prune(where)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    except OSError:
        pass  # no room for it, or a judge published it meanwhile: builds go on without, as before
    finally:
        with _making_lock:
            _making.discard(sig)


def _prune(where: Path) -> None:
    """Keep the LIMIT most recently used headers, and any used within the hour (a build may be reading it)."""
    for d in _headers(where)[LIMIT:]:
        if _unused(d):
            shutil.rmtree(d, ignore_errors=True)


def _headers(where: Path) -> list[Path]:
    """The published headers' directories, the most recently used first (one another judge removes meanwhile
    is left out)."""
    found = []
    for d in where.iterdir():
        try:
            if not d.name.startswith(".") and d.is_dir():
                found.append((d.stat().st_mtime, d))
        except OSError:
            continue
    return [d for _, d in sorted(found, reverse=True)]


def _unused(header_dir: Path) -> bool:
    try:
        return time.time() - header_dir.stat().st_mtime > _IN_USE_S
    except OSError:
        return False


def unused(where: Path) -> list[Path]:
    """What no judge uses in a directory of headers (`kernelcraft gc`): headers no build took within the hour
    (made again when a search repays them), and what judges that died making one left (its set's lock free)."""
    if not where.is_dir():
        return []
    found = [d for d in _headers(where) if _unused(d)]
    for left in where.glob(f"{_STAGING}*"):
        sig = left.name.removeprefix(_STAGING).rsplit("-", 1)[0]
        with file_lock(where / f".{sig}.lock", 0) as held:
            if held:
                found.append(left)
    return found


@cache
def gcc_version() -> str:
    """The C++ compiler's version line where it is GCC (the only compiler whose precompiled headers this
    uses), else ""."""
    compiler = cpp_extension.get_cxx_compiler()
    try:
        if not cpp_extension.check_compiler_is_gcc(compiler):
            return ""
        return subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30).stdout.split("\n")[0]
    except (OSError, subprocess.SubprocessError):
        return ""
