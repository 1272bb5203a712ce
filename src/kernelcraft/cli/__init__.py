"""The `kernelcraft` command (typer): parse, call, print. Logic lives in the packages."""

from . import pack as _pack  # noqa: F401  (adds the `pack` commands)
from . import skills as _skills  # noqa: F401  (adds the `skills` commands)
from .app import app, main

__all__ = ["app", "main"]
