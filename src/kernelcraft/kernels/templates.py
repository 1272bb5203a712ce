"""Kernel source templates: each kernel library's `templates/` folder, rendered with jinja2 as source is written
(undefined variables are errors, text kept as written, nothing escaped)."""

from __future__ import annotations

from functools import lru_cache

import jinja2


@lru_cache(maxsize=None)
def package_template(package: str, name: str) -> jinja2.Template:
    """The template `name` of `package`'s `templates/` folder (kernels.gemm, kernels.external)."""
    env = jinja2.Environment(loader=jinja2.PackageLoader(package, "templates"),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    return env.get_template(name)
