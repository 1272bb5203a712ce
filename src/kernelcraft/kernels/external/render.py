"""The wrapper templates of `kernels/external/templates`."""

from __future__ import annotations

from functools import lru_cache

import jinja2


@lru_cache(maxsize=None)
def template(name: str) -> jinja2.Template:
    """A wrapper template (undefined variables are errors, text kept as written)."""
    env = jinja2.Environment(loader=jinja2.PackageLoader(__package__, "templates"),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    return env.get_template(name)
