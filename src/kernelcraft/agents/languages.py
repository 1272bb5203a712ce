"""The kernel languages a run can ask for (templates/languages.toml): their words in the prompts, and the devices each
runs on."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib.resources import files


@dataclass(frozen=True)
class Language:
    key: str  # what --language takes
    name: str  # what the prompts call it
    devices: tuple[str, ...]
    engineer: str  # who the model is told it is
    rule: str  # how its kernels are written and built
    concurrency: str  # what a candidate may not start
    native: bool  # its kernels are C++/CUDA source strings: the prompts state the static rules on native source


def _load() -> dict[str, Language]:
    table = tomllib.loads(files("kernelcraft.agents").joinpath("templates", "languages.toml").read_text())
    return {key: Language(key=key, **{**spec, "devices": tuple(spec["devices"])}) for key, spec in table.items()}


LANGUAGES: dict[str, Language] = _load()


class LanguageError(ValueError):
    """A language that does not exist, or does not run on the device asked for; one line for the user."""


def language_for(device: str, language: str | None) -> str:
    """`language`, checked against `device`; None: the device's own (C++ on the CPU, CUDA C++ on a GPU)."""
    if language is None:
        return next(lang.key for lang in LANGUAGES.values() if device in lang.devices)
    if language not in LANGUAGES:
        raise LanguageError(f"unknown language {language!r}: use {', '.join(LANGUAGES)}")
    lang = LANGUAGES[language]
    if device not in lang.devices:
        others = [k for k, lg in LANGUAGES.items() if device in lg.devices]
        raise LanguageError(f"--language {language} ({lang.name}) does not run on --device {device}: use {' or '.join(others)}")
    return language
