"""A user's own defaults, from `~/.config/kernelcraft/config.toml` (or `$XDG_CONFIG_HOME/kernelcraft/config.toml`)
and then `./kernelcraft.toml`, the nearer file winning: the device, the workspace, and the model and endpoint a new
`optimize` run asks. A flag, an environment variable the CLI reads (`KERNELCRAFT_WORKSPACE`) or a run file given
on the command line wins over both."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from .settings import SettingsError, one_line, read_toml, unknown_keys

PROJECT_FILE = "kernelcraft.toml"
BUILT_IN = "built-in default"


class UserDefaults(BaseModel):
    """What a config file may set (None: not set there)."""

    model_config = ConfigDict(extra="forbid")

    device: Literal["cuda", "cpu"] | None = None
    workspace: str | None = None
    model: str | None = None  # as --model takes it: NAME, anthropic:NAME, replay:PATH, batch:DIR[:NAME]
    base_url: str | None = None
    api_key_env: str | None = None  # the environment variable that holds the key


@dataclass(frozen=True)
class Setting:
    key: str
    value: str | None
    source: str  # the file that set it, the environment variable, or BUILT_IN


BUILT_INS = {"device": "cuda", "workspace": "kernelcraft-workspace", "model": None, "base_url": None, "api_key_env": None}


def config_files(cwd: Path | None = None) -> list[Path]:
    """The files read, lowest precedence first (whether they exist or not)."""
    home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return [home / "kernelcraft" / "config.toml", (cwd or Path.cwd()) / PROJECT_FILE]


def _read(path: Path) -> UserDefaults:
    data = read_toml(path)
    unknown = unknown_keys(UserDefaults, data)
    if unknown:
        raise SettingsError(f"{path}: unknown setting {unknown[0]} (a config file sets {', '.join(UserDefaults.model_fields)})")
    try:
        return UserDefaults.model_validate(data)
    except ValidationError as e:
        raise SettingsError(f"{path}: {one_line(e)}") from None


def user_settings(cwd: Path | None = None) -> dict[str, Setting]:
    """Every key's value and where it came from: the project file over the user's file over the built-in default,
    and `$KERNELCRAFT_WORKSPACE` over all three for the workspace. A file that cannot be read raises SettingsError."""
    merged = {key: Setting(key, value, BUILT_IN) for key, value in BUILT_INS.items()}
    for path in config_files(cwd):
        if path.is_file():
            for key, value in _read(path).model_dump(exclude_none=True).items():
                merged[key] = Setting(key, value, str(path))
    return _with_environment(merged)


def built_in_settings() -> dict[str, Setting]:
    """The settings without any config file (what the CLI falls back to while it reports a file it cannot read)."""
    return _with_environment({key: Setting(key, value, BUILT_IN) for key, value in BUILT_INS.items()})


def _with_environment(merged: dict[str, Setting]) -> dict[str, Setting]:
    if os.environ.get("KERNELCRAFT_WORKSPACE"):
        merged["workspace"] = Setting("workspace", os.environ["KERNELCRAFT_WORKSPACE"], "$KERNELCRAFT_WORKSPACE")
    return merged
