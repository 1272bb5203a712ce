"""The kernel templates of `kernels/gemm/templates`, loaded once each, and the error a configuration
that cannot be rendered raises."""

from __future__ import annotations

import importlib.resources
from functools import lru_cache

import jinja2

from ..templates import package_template


class TemplateError(ValueError):
    """A configuration the template cannot render, or one the installed Triton cannot run."""


def template(name: str) -> jinja2.Template:
    """A kernel template of `kernels/gemm/templates` (kernels.templates)."""
    return package_template(__package__, name)


@lru_cache(maxsize=None)
def template_text(name: str) -> str:
    """A file of `kernels/gemm/templates` as it is (source pasted into a candidate as a string)."""
    return importlib.resources.files(__package__).joinpath("templates", name).read_text()
