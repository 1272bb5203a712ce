"""The header compiler: precompiles torch/extension.h for one set of a candidate build's flags (the judge's
precompiled.py starts it through the sandbox, as it starts a builder, and publishes what it made). Every
C++ file of an extension includes that header first (load_inline adds it); parsing it is most of a small
extension's compile time, and GCC takes a precompiled copy only made with the same flags.

argv: a JSON spec file: `arguments` (load_inline's, as the build request carried them; the judge has
checked their flags, precompiled.eligible) and `output`, the .gch to write. Exit 0: written; else the
compiler's output is in the process's log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import torch.utils.cpp_extension as cpp_extension


HEADER = Path("torch") / "extension.h"  # where it lies below an include directory


def torch_header() -> Path:
    """PyTorch's own torch/extension.h, the header precompiled."""
    return Path(cpp_extension.include_paths("cpu")[0]) / HEADER


def uses_cuda(arguments: dict[str, Any]) -> bool:
    """Whether load_inline builds these arguments with CUDA (its own rule: with_cuda, else any CUDA source)."""
    with_cuda = arguments.get("with_cuda")
    return bool(arguments.get("cuda_sources")) if with_cuda is None else bool(with_cuda)


def header_command(arguments: dict[str, Any], output: str) -> list[str]:
    """The compiler command that precompiles torch/extension.h with the flags load_inline compiles the
    extension's C++ files with (torch.utils.cpp_extension's ninja file, on Linux), but the extension's name."""
    system = cpp_extension.include_paths("cuda" if uses_cuda(arguments) else "cpu")
    system.append(sysconfig.get_path("include", scheme="posix_prefix"))
    user = [os.path.abspath(p.strip()) for p in arguments.get("extra_include_paths") or []]
    flags = ["-DTORCH_API_INCLUDE_EXTENSION_H", *(f"-I{p}" for p in user), *(a for p in system for a in ("-isystem", p)),
             "-fPIC", "-std=c++20", *(f.strip() for f in arguments.get("extra_cflags") or [])]
    return [cpp_extension.get_cxx_compiler(), "-x", "c++-header", *flags, str(torch_header()), "-o", output]


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    sys.exit(subprocess.run(header_command(spec["arguments"], spec["output"]), stdin=subprocess.DEVNULL).returncode)


if __name__ == "__main__":
    main()
