"""A tool run confined in place of a worker module (the ncu pass: judge/profiler.py): argv is the tool's
command line, which replaces this process once it is confined (confine.py), so the tool and all it starts
(ncu's target, a Python process that confine.python_command starts) hold the confinement."""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.execv(sys.argv[1], sys.argv[1:])


if __name__ == "__main__":
    main()
