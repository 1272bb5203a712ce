"""Precompiled torch/extension.h for candidates' C++ builds (parent side). A small extension spends most of
its compile parsing that header (about 40 s of a CPU build on a 2-core machine, 15 s with the header
precompiled). GCC uses a precompiled header only where it was made with the same flags, so the judge keeps
one per set of flags it has seen: the first build with new flags compiles as before while a header compiler
(worker/precompile.py, sandboxed like a builder) makes it in the background, and later builds include it.

Only flag sets that cannot name a file are precompiled (`eligible`): the header is shared by every later build
with those flags, so what goes into it must come from PyTorch's headers alone. GCC checks the rest itself: a
header that does not fit a compile is ignored there, and the build parses torch/extension.h as it always did.

Where: KERNELCRAFT_PCH_DIR, else the judge's cache (`pch/`); "off" precompiles nothing. Only the judge writes
there, one set's directory whole by one rename, and keeps the `LIMIT` most recently used (each is most of a GB).
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
from .locks import file_lock
from .worker.precompile import HEADER, torch_header, uses_cuda

ENV = "KERNELCRAFT_PCH_DIR"
LIMIT = 4
_IN_USE_S = 3600.0  # longer than any build may run
# Flags that change how the header compiles and name no file: optimisation, target, language, macros, warnings.
_SAFE_FLAG = re.compile(r"-(O[0-3sgz]?|Ofast|g[0-3]?|std=[\w+]+|m[\w.-]+|m\w+=[\w.,-]+|f[\w-]+|D\w+(=[\w.-]*)?|U\w+|W[\w-]*|w|pthread)")

_making: set[str] = set()
_making_lock = threading.Lock()


def root(cache_dir: Path) -> Path | None:
    """Where the precompiled headers of a judge with this cache live (None: off)."""
    chosen = os.environ.get(ENV, "")
    if chosen.lower() == "off" or not gcc_version():
        return None
    return Path(chosen).resolve() if chosen else cache_dir / "pch"


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
            staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=where))
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
    used = sorted((d for d in where.iterdir() if d.is_dir() and not d.name.startswith(".")),
                  key=lambda d: d.stat().st_mtime, reverse=True)
    for d in used[LIMIT:]:
        if time.time() - d.stat().st_mtime > _IN_USE_S:
            shutil.rmtree(d, ignore_errors=True)


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
