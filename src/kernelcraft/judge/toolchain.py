"""The compilers the judge builds candidates' extensions with (the builder runs the host's `c++` and, for CUDA,
`nvcc`), named in every verdict's environment so a result can be told apart from one built by another toolchain."""

from __future__ import annotations

import functools
import shutil
import subprocess


@functools.cache
def compilers() -> dict[str, str]:
    """The first line of each compiler's version ("c++": "c++ (Debian 12.2.0-14) 12.2.0", "nvcc": "Cuda compilation
    tools, release 13.0, V13.0.88"); a compiler this host lacks is left out."""
    found = {}
    for name, line in (("c++", 0), ("nvcc", -2)):  # nvcc's release is its second line from the end
        path = shutil.which(name)
        if path is None:
            continue
        try:
            out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
        except (OSError, subprocess.TimeoutExpired):
            continue
        if len(out) >= abs(line) + (line >= 0):
            found[name] = out[line].strip()
    return found
