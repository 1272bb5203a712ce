"""Prompt templates (jinja2 files in `templates/`), rendered strictly: a missing value is an error."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import jinja2


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.PackageLoader("kernelcraft.agents", "templates"), undefined=jinja2.StrictUndefined,
                              keep_trailing_newline=False, autoescape=False)


def render(template: str, **context: Any) -> str:
    """Render `templates/<template>.j2`."""
    return _env().get_template(f"{template}.j2").render(**context).strip()
