"""The candidate's side of the build cache: `load_inline` keyed by source hash, flags, architecture
and versions.

Installed into the worker before the candidate is imported: the candidate's own `load_inline` call
then loads the judge's published build of its key (buildstore.py), or asks the judge to build it
(judge/builds.py); the candidate's process never writes the cache. An identical extension is compiled once
per machine, distinct ones never collide on a name, and a compiler error is kept too: the same build
fails at once the next time instead of compiling for minutes again.
"""

from __future__ import annotations

import hashlib
import importlib.util
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

from ..protocol import ARCH_VARIABLE, Built
from .buildstore import builds_dir, lookup, module_name


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
SET_BY_JUDGE = frozenset({"name", "build_directory", "verbose"})  # load_inline's arguments the judge sets


def kept_as_failed(full_output: str, message: str) -> bool:
    """A compiler's or linker's diagnostic (`message`, trimmed from `full_output`), the same on every try:
    kept as the build's failure."""
    return bool(_DIAGNOSTIC_RE.search(message)) and not _TRANSIENT_RE.search(full_output)


def machine_failed(full_output: str) -> bool:
    """The machine failed the build (a full disk), not the source."""
    return bool(_DISK_FULL_RE.search(full_output))


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


def request_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
    """load_inline's arguments as a build request carries them: JSON, without those the judge sets itself."""
    return json.loads(json.dumps({k: v for k, v in arguments.items() if k not in SET_BY_JUDGE}, default=str))


def arch_list() -> str:
    """This process's ARCH_VARIABLE, as torch's load_inline would read it now ("" where unset)."""
    return os.environ.get(ARCH_VARIABLE, "")


def cache_key(arguments: dict[str, Any], capability: str, arch: str) -> str:
    """The build's key: a request's arguments (`request_arguments`), the device's compute capability
    ("9.0"; "" on the CPU), the CUDA architectures asked for (`arch`, the candidate's ARCH_VARIABLE; "": the
    device's own), the versions and the machine's architecture. The judge and the worker compute it alike."""
    material = {
        "args": arguments,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "arch": arch,
        "capability": capability,
        "python": sys.version_info[:2],
        "machine": platform.machine(),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:24]


def import_extension(name: str, path: Path, is_python_module: bool) -> Any:
    """Import a published extension where it lies, as load_inline does once it has built, without its
    build step: that would write a lock and build files into the judge's directory."""
    if not is_python_module:
        torch.ops.load_library(str(path))
        return str(path)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise BuildError(f"{path} cannot be imported as the extension {name}", machine_fault=True)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildRecorder:
    """Wraps `load_inline` in the candidate's process. A build the judge has published is imported from
    the shared cache, read only, once verified (buildstore.lookup); any other is asked of the judge
    (`ask`, a build request of the arguments and the architectures the candidate's environment asks for
    as it calls, which torch would build for), which builds and publishes it. Remembers build time, keys
    and the extension modules it returned."""

    def __init__(self, cache_root: Path, judge_uid: int, capability: str, on_module: Callable[[Any, list[str] | None], None],
                 ask: Callable[[dict[str, Any], str], Built] | None) -> None:
        self.builds = builds_dir(cache_root)
        self.judge_uid = judge_uid
        self.capability = capability
        self.on_module = on_module
        self.ask = ask  # None: nothing is built now (a profile's driver; a worker once its candidate has loaded)
        self.seconds = 0.0
        self.keys: list[str] = []
        self.signature = inspect.signature(cpp_extension.load_inline)

    def install(self) -> None:
        cpp_extension.load_inline = self.load_inline

    def load_inline(self, *args: Any, **kwargs: Any) -> Any:
        arguments = request_arguments(dict(self.signature.bind(*args, **kwargs).arguments))
        arch = arch_list()
        key = cache_key(arguments, self.capability, arch)
        t0 = time.perf_counter()
        try:
            module = self._load(key, arguments, arch)
        finally:
            self.seconds += time.perf_counter() - t0
        self.keys.append(key)
        self.on_module(module, arguments.get("functions"))
        return module

    def _load(self, key: str, arguments: dict[str, Any], arch: str) -> Any:
        found = lookup(self.builds, key, self.judge_uid)
        if found is None:
            if self.ask is None:
                raise BuildError(f"the extension {module_name(key)} is not built, and extensions are built only while the "
                                 "candidate loads (at import or in ModelNew's constructor)")
            reply = self.ask(arguments, arch)
            if not reply.ok:
                raise BuildError(str(reply.message or "the judge did not build the extension"), machine_fault=bool(reply.machine_fault))
            found = lookup(self.builds, key, self.judge_uid)
            if found is None:  # the judge published it: whatever changed it since is no fault of the build
                raise BuildError(f"the judge's build of {module_name(key)} does not verify", machine_fault=True)
        if found.failed:
            raise BuildError(found.failure())
        try:
            return import_extension(module_name(key), found.path, bool(arguments.get("is_python_module", True)))
        except (OSError, ImportError, RuntimeError) as e:  # built, but it does not load (an undefined symbol)
            raise BuildError(trim_compiler_output(str(e))) from None
