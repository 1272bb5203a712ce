"""The build cache: `load_inline` keyed by source hash, flags, architecture and versions.

Installed into the worker before the candidate is imported: the candidate's own `load_inline`
call then builds into (or loads from) `<cache>/builds/<key>`, so an identical extension is
compiled once per machine, and distinct ones never collide on a name. A compiler error is kept
there too: the same build fails at once the next time instead of compiling for minutes again.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import platform
import re
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch
import torch.utils.cpp_extension as cpp_extension


class BuildError(Exception):
    """Compilation of a candidate's extension failed; the message holds the first compiler errors.
    `machine_fault`: the machine, not the source, failed it (a full disk)."""

    def __init__(self, message: str, machine_fault: bool = False) -> None:
        super().__init__(message)
        self.machine_fault = machine_fault


_ERROR_RE = re.compile(r"\berror\b|undefined reference|fatal")  # not torch's "Error building extension" header
# Build-system lines around an error: ninja's step counter, its FAILED line, and compiler command
# lines thousands of characters long. They tell a model nothing about its code.
_NOISE_RE = re.compile(r"^\s*(\[\d+/\d+\]|FAILED:|ninja:)|-DTORCH_EXTENSION_NAME|\s-isystem\s")
_MAX_LINE = 300
# A compiler's or linker's diagnostic is the same on every try; a compiler killed for memory, or a
# full disk, is not, and is never kept.
_DIAGNOSTIC_RE = re.compile(r"\berror\b\s*:|undefined reference")
_TRANSIENT_RE = re.compile(r"Killed|signal|died|No space left|Cannot allocate memory|out of memory|Resource temporarily",
                           re.IGNORECASE)
_DISK_FULL_RE = re.compile(r"No space left on device|Disk quota exceeded")
FAILED_LOG = "failed.log"


def trim_compiler_output(text: str, max_lines: int = 25) -> str:
    """The first compiler errors with a little context, not pages of build log."""
    lines = [line if len(line) <= _MAX_LINE else line[:_MAX_LINE] + " ..."
             for line in text.splitlines() if not _NOISE_RE.search(line)]
    idx = [i for i, line in enumerate(lines) if _ERROR_RE.search(line)]
    if not idx:
        return "\n".join(lines[-max_lines:])
    keep: list[str] = []
    for i in idx:
        for line in lines[max(0, i - 1): i + 3]:
            if line not in keep:
                keep.append(line)
        if len(keep) >= max_lines:
            break
    return "\n".join(keep[:max_lines])


def cache_key(arguments: dict[str, Any]) -> str:
    material = {
        "args": {k: v for k, v in arguments.items() if k not in ("name", "build_directory", "verbose")},
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "arch": os.environ.get("TORCH_CUDA_ARCH_LIST", ""),
        "capability": torch.cuda.get_device_capability() if torch.cuda.is_available() else None,
        "python": sys.version_info[:2],
        "machine": platform.machine(),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=repr).encode()).hexdigest()


class BuildRecorder:
    """Wraps `load_inline`; remembers build time, keys and the extension modules it returned."""

    def __init__(self, cache_root: Path, on_module: Callable[[Any, list[str] | None], None]) -> None:
        self.cache_root = cache_root
        self.on_module = on_module
        self.seconds = 0.0
        self.keys: list[str] = []
        self.original = cpp_extension.load_inline
        self.signature = inspect.signature(self.original)

    def install(self) -> None:
        cpp_extension.load_inline = self.load_inline

    def load_inline(self, *args: Any, **kwargs: Any) -> Any:
        bound = self.signature.bind(*args, **kwargs)
        arguments = dict(bound.arguments)
        key = cache_key(arguments)[:24]
        name = f"kc_{key}"
        build_dir = self.cache_root / "builds" / name
        try:
            build_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise BuildError(f"the judge could not make the build directory: {e}", machine_fault=True) from None
        failed = build_dir / FAILED_LOG
        if failed.is_file():
            raise BuildError(f"{failed.read_text()}\n(this build failed the same way before; {failed} keeps it: delete "
                             "that file to compile again)")
        arguments.update(name=name, build_directory=str(build_dir), verbose=False)
        t0 = time.perf_counter()
        try:
            module = self.original(**arguments)
        except (RuntimeError, OSError, ImportError) as e:  # torch raises RuntimeError with the compiler log
            message = trim_compiler_output(str(e))
            if _DIAGNOSTIC_RE.search(message) and not _TRANSIENT_RE.search(str(e)):
                partial = failed.with_suffix(f".{os.getpid()}")  # whole or absent for a neighbour reading it
                partial.write_text(message)
                partial.replace(failed)
            raise BuildError(message, machine_fault=bool(_DISK_FULL_RE.search(str(e)))) from None
        finally:
            self.seconds += time.perf_counter() - t0
        self.keys.append(key)
        self.on_module(module, arguments.get("functions"))
        return module
