"""Settings a user gives, read into pydantic models with one-line errors: TOML files, `KEY.PATH=VALUE`
overrides from the command line, and the one-line form of a validation error.

Every package may use it (it imports nothing of kernelcraft): the CLI, the train configs, the skill
files and the judge service all report a bad value the same way.
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel


class SettingsError(ValueError):
    """Settings that cannot be used; the message is one line naming the file or the key."""


class _HasErrors(Protocol):
    def errors(self) -> Sequence[Any]: ...


def first_error(e: _HasErrors, skip: Sequence[str] = ()) -> tuple[str, str]:
    """Where the first error of a validation (pydantic's, FastAPI's) is, as a dotted path (parts in
    `skip` left out), and its message without pydantic's "Value error, " prefix."""
    first = e.errors()[0]
    where = ".".join(str(x) for x in first.get("loc", ()) if x not in skip)
    return where, str(first["msg"]).removeprefix("Value error, ")


def one_line(e: _HasErrors, skip: Sequence[str] = ()) -> str:
    """A validation error in one line: "where: message", or the message where it is about no one key."""
    where, message = first_error(e, skip)
    return f"{where}: {message}" if where else message


_BOUNDS = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}


def option_error(e: _HasErrors, flags: Mapping[str, str], prefix: str = "") -> str:
    """A validation error in one line, named as the user gave the value: `flags` maps a dotted path to its
    command-line option ("llm.budget_usd" -> "--budget-usd"), and a bound reads as one ("--budget-usd must be
    > 0", not "llm.budget_usd: Input should be greater than 0"). `prefix`: where the validated model lies."""
    first = e.errors()[0]
    where = prefix + ".".join(str(x) for x in first.get("loc", ()))
    name = f"{flags[where]} ({where})" if where in flags else where
    bound, limits = _BOUNDS.get(str(first.get("type"))), list((first.get("ctx") or {}).values())
    if bound and limits:
        return f"{name} must be {bound} {limits[0]}"
    message = str(first["msg"]).removeprefix("Value error, ")
    return f"{name}: {message}" if name else message


def read_toml(path: Path) -> dict[str, Any]:
    """A TOML file's tables; a missing file, text that is not UTF-8 or bad TOML is a SettingsError."""
    if path.is_dir():
        raise SettingsError(f"{path}: a directory, not a config file")
    if not path.is_file():
        raise SettingsError(f"{path}: no such config file")
    try:
        return tomllib.loads(path.read_text())
    except UnicodeDecodeError:
        raise SettingsError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise SettingsError(f"{path}: {e}") from None


def unknown_keys(model: type[BaseModel], data: dict[str, Any], prefix: str = "") -> list[str]:
    """The dotted paths of `data` that name no field of `model` or of the models it nests (pydantic drops
    them unsaid, and a misspelt setting must not silently keep its default)."""
    found = []
    for key, value in data.items():
        field = model.model_fields.get(key)
        if field is None:
            found.append(prefix + key)
        elif isinstance(value, dict) and isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            found += unknown_keys(field.annotation, value, f"{prefix}{key}.")
    return found


def parse_assignment(item: str) -> tuple[list[str], Any]:
    """`a.b.c=VALUE` as its path and its value: a TOML value (`4`, `0.5`, `true`, `"x"`, `[1, 2]`), or
    else the text itself as a string (`search.strategy=branch`)."""
    key, sep, text = item.partition("=")
    path = key.strip().split(".")
    if not sep or not all(part.isidentifier() for part in path):
        raise SettingsError(f"--set {item!r}: expected KEY=VALUE, KEY a dotted path such as search.turns")
    try:
        value = tomllib.loads(f"v = {text.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = text.strip()
    return path, value


def with_value(data: dict[str, Any], path: Sequence[str], value: Any) -> dict[str, Any]:
    """A copy of nested tables `data` with `value` at `path`; the tables on the way are made where missing."""
    head, *rest = path
    if not rest:
        return {**data, head: value}
    inner = data.get(head)
    return {**data, head: with_value(inner if isinstance(inner, dict) else {}, rest, value)}


def to_toml(data: Mapping[str, Any]) -> str:
    """Nested tables as TOML, one `dotted.key = value` line per setting (what `read_toml` reads back as `data`);
    None, which TOML cannot say, is left out, and so is an empty table."""
    lines: list[str] = []

    def key(part: str) -> str:
        return part if part.replace("_", "").replace("-", "").isalnum() and part.isascii() else json.dumps(part)

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                walk(f"{prefix}{key(str(k))}.", v)
        elif value is not None:
            lines.append(f"{prefix[:-1]} = {_toml_value(value)}")

    walk("", data)
    return "\n".join(lines) + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value if v is not None) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in value.items() if v is not None) + "}"
    return json.dumps(str(value))  # a JSON string is a TOML basic string


__all__ = ["SettingsError", "first_error", "one_line", "parse_assignment", "read_toml", "to_toml", "unknown_keys", "with_value"]
