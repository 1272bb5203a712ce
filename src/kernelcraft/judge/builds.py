"""The judge's side of a candidate's extension builds. While it loads, a worker asks for what its
`load_inline` call would build (a build request: untrusted input). The judge builds each key once, in a
builder process (worker/builder.py) started through the sandbox like a worker, and publishes the result in
the shared build cache (worker/buildstore.py), from which the worker then imports it: the candidate's process
never writes the cache, and no build of one candidate can stand in for another's.
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch.utils.cpp_extension as cpp_extension

from .worker.buildcache import SET_BY_JUDGE, cache_key, kept_as_failed, machine_failed, trim_compiler_output
from .publish import publish_build, publish_failure
from .worker.buildstore import builds_dir, library_name, lookup, module_name
from .integrity import output_left
from .locks import file_lock
from . import precompiled
from .protocol import ARCH_LIST_RE, ARCH_VARIABLE, BuildRequest, Built, ProtocolError, decode_request
from .sandbox import hold_group, run_untrusted, scrubbed_env
from .scratch import make_scratch

_ARGUMENTS = frozenset(inspect.signature(cpp_extension.load_inline).parameters) - SET_BY_JUDGE
_LIBRARY_LIMIT = 1 << 30
_HEADER_TIMEOUT_S = 900.0
_OUTPUT_LIMIT = 4 << 20


class BuildTimeout(Exception):
    """A candidate's builds ran past the build timeout."""


@dataclass
class BuildBudget:
    """The seconds of building left to one candidate's load: its builds together get the build timeout,
    as when they ran in its own process, however many it asks for."""

    total: float
    left: float = field(init=False)

    def __post_init__(self) -> None:
        self.left = self.total

    def spend(self, seconds: float) -> None:
        self.left -= seconds
        if self.left <= 0:
            raise BuildTimeout(f"the candidate's builds ran past the build timeout ({self.total:g} s)")


@dataclass(frozen=True)
class BuildService:
    """Answers build requests for one judge: its cache, device (a CUDA build targets it) and build jobs."""

    cache_dir: Path
    device: str
    device_index: int
    build_jobs: int
    capability: str  # the device's compute capability, part of every key ("" on the CPU)
    cpus: frozenset[int] | None = None  # the host CPUs its builders run on (None: all of the judge's)

    def answer(self, line: dict[str, Any], budget: BuildBudget) -> Built:
        """The reply to a worker's build request (a protocol.BuildRequest's line): ok once the key's build is
        published (built, or failed the same way before), else why not. The key is the judge's own, from the
        arguments and the architectures asked for, which the builder's environment gets. Raises BuildTimeout
        once `budget` is spent."""
        try:
            request = decode_request(line)
        except ProtocolError:
            request = None
        arguments = request.arguments if isinstance(request, BuildRequest) else None
        if not isinstance(arguments, dict) or not set(arguments) <= _ARGUMENTS:
            return Built(False, "the judge could not read the build request (load_inline's arguments expected)")
        arch = request.arch_list
        if not isinstance(arch, str) or ARCH_LIST_RE.fullmatch(arch) is None:
            return Built(False, f"{ARCH_VARIABLE}={str(arch)[:80]!r} is not a list of CUDA architectures such as "
                                "\"9.0\", \"9.0a\" or \"8.0;8.6+PTX\"")
        key = cache_key(arguments, self.capability, arch)
        builds = builds_dir(self.cache_dir)
        if lookup(builds, key, os.geteuid()) is not None:
            return Built(True)
        # Once per key, across this judge's threads and every judge sharing the cache. A holder that takes
        # more than half of this candidate's time (stuck, or a process holding the lock on purpose) is not
        # waited for: the build goes ahead, and the first published stays.
        t0 = time.monotonic()
        with file_lock(self.cache_dir / "locks" / f"build-{key}.lock", budget.left / 2):
            budget.spend(time.monotonic() - t0)
            if lookup(builds, key, os.geteuid()) is not None:  # built while this one waited
                return Built(True)
            return self._build(builds, key, arguments, arch, budget)

    def _build(self, builds: Path, key: str, arguments: dict[str, Any], arch: str, budget: BuildBudget) -> Built:
        scratch = make_scratch(self.cache_dir, "b-")
        try:
            (scratch / "build").mkdir()
            header = self._precompiled(arguments)
            spec = {"arguments": arguments, "name": module_name(key), "build_directory": str(scratch / "build"),
                    "error": str(scratch / "error.txt"), "precompiled": str(header) if header else None}
            (scratch / "spec.json").write_text(json.dumps(spec))
            env = scrubbed_env(self.device, self.device_index, self.cache_dir, scratch, self.build_jobs)
            # The architectures the candidate's load_inline asked for, as torch would have read them there.
            env.pop(ARCH_VARIABLE, None)
            if arch:
                env[ARCH_VARIABLE] = arch
            code, build_s = run_untrusted("kernelcraft.judge.worker.builder", [str(scratch / "spec.json")], scratch, env,
                                          self.cache_dir, budget.left, self._group, self.cpus,
                                          read=(header.parent.parent,) if header else ())
            budget.spend(build_s)
            library = output_left(scratch / "build", library_name(key), _LIBRARY_LIMIT) if code == 0 else None
            if library is None:
                return _failed(builds, key, code, scratch, build_s)
            publish_build(builds, key, library, build_s)
            return Built(True)
        except OSError as e:  # no room for the scratch directory or the published build, no process left: the machine's
            return Built(False, f"the judge could not build the extension: {e}", machine_fault=True)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    @property
    def _group(self) -> str:
        return hold_group(self.device, self.device_index, self.cpus)

    def _precompiled(self, arguments: dict[str, Any]) -> Path | None:
        """The precompiled torch/extension.h this build includes, where one fits its flags; where none is
        made yet, this build goes without, and the header is made meanwhile once it repays (precompiled.py)."""
        where = precompiled.root(self.cache_dir)
        if where is None or not precompiled.eligible(arguments):
            return None
        sig = precompiled.signature(arguments)
        header = precompiled.ready(where, sig)
        if header is None and precompiled.wanted(sig):
            precompiled.make_later(where, sig, lambda gch: self._make_header(arguments, gch))
        return header

    def _make_header(self, arguments: dict[str, Any], gch: Path) -> bool:
        """Precompile the header for these arguments' flags into `gch`, through the sandbox as a build."""
        scratch = make_scratch(self.cache_dir, "h-")
        try:
            made = scratch / "extension.h.gch"
            (scratch / "spec.json").write_text(json.dumps({"arguments": arguments, "output": str(made)}))
            env = scrubbed_env(self.device, self.device_index, self.cache_dir, scratch, self.build_jobs)
            code, _ = run_untrusted("kernelcraft.judge.worker.precompile", [str(scratch / "spec.json")], scratch, env,
                                    self.cache_dir, _HEADER_TIMEOUT_S, self._group, self.cpus)
            if code != 0 or made.is_symlink() or not made.is_file():
                return False
            shutil.move(made, gch)
            return True
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def _failed(builds: Path, key: str, code: int | None, scratch: Path, build_s: float) -> Built:
    """The reply for a build that failed; a compiler's diagnostic is published as the key's failure."""
    error = output_left(scratch, "error.txt", _OUTPUT_LIMIT) if code == 1 else None
    if error is not None:
        output = error.decode(errors="replace")
        message = trim_compiler_output(output)
        if kept_as_failed(output, message):
            publish_failure(builds, key, message, build_s)
        return Built(False, message, machine_failed(output))
    # Not torch's error: the builder died, or left no extension. Killed outright (and not by the judge),
    # it ran out of memory.
    killed = code == -signal.SIGKILL
    if code is not None and code < 0 and -code in signal.valid_signals():
        how = f"was killed by {signal.Signals(-code).name}" + (" (out of host memory?)" if killed else "")
    else:
        how = f"exited with code {code}" + (" and left no extension" if code == 0 else "")
    tail = trim_compiler_output((output_left(scratch, "output.log", _OUTPUT_LIMIT) or b"").decode(errors="replace"))
    return Built(False, f"the builder {how}" + (f": {tail}" if tail else ""), killed)
