"""The builder: compiles one candidate extension for the judge (builds.py starts it, through the
sandbox, as it starts a worker). A short-lived process that runs none of the candidate's Python and
loads nothing it built: importing would run the extension's static initialisers here, and the worker
that asked imports the judge's published copy instead.

argv: a JSON spec file: `arguments` (load_inline's, as the build request carried them), the
extension's `name`, the `build_directory`, the `error` file, and the `precompiled` header to include
first (or null). Exit 0: built, the shared object in
the build directory; 1: the error (torch's message with the compiler's output) is in the error file.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch.utils.cpp_extension as cpp_extension


def _built_only(module_name: str, path: str, is_python_module: bool) -> str:
    """Stands in for torch's `_import_module_from_library`, the step after the build in every torch
    that load_inline builds with (2.x): the path of what was built, nothing loaded."""
    return os.path.join(path, f"{module_name}.so")


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    cpp_extension._import_module_from_library = _built_only
    arguments = {**spec["arguments"], "name": spec["name"], "build_directory": spec["build_directory"], "verbose": False}
    if arguments.get("use_pch"):
        arguments["use_pch"] = False  # the precompiled header is written into torch's own directory, which no build may change
    if spec.get("precompiled"):  # the judge's own, for these flags (precompiled.py): GCC takes the .gch beside it
        arguments["extra_cflags"] = ["-include", spec["precompiled"], *(arguments.get("extra_cflags") or [])]
    try:
        cpp_extension.load_inline(**arguments)
    except Exception as e:  # noqa: BLE001 - any failure of the build is the build's message
        Path(spec["error"]).write_text(str(e) or type(e).__name__)
        sys.exit(1)


if __name__ == "__main__":
    main()
