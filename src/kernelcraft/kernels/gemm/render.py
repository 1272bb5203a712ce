"""The kernel templates of `kernels/gemm/templates`, loaded once each, and the error a configuration
that cannot be rendered raises."""

from __future__ import annotations

import importlib.resources
from functools import lru_cache

import jinja2


class TemplateError(ValueError):
    """A configuration the template cannot render, or one the installed Triton cannot run."""


@lru_cache(maxsize=None)
def template(name: str) -> jinja2.Template:
    """A kernel template of `kernels/gemm/templates` (undefined variables are errors, text kept as written)."""
    env = jinja2.Environment(loader=jinja2.PackageLoader(__package__, "templates"),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    return env.get_template(name)


@lru_cache(maxsize=None)
def template_text(name: str) -> str:
    """A file of `kernels/gemm/templates` as it is (source pasted into a candidate as a string)."""
    return importlib.resources.files(__package__).joinpath("templates", name).read_text()
