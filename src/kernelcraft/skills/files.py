"""Skills as files: Markdown with a TOML header between `+++` lines (the seed library and what a
user writes by hand), or JSON (what `skills export` writes)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from pydantic import ValidationError

from ..settings import first_error
from .model import Skill

SEED_DIR = Path(__file__).parent / "seed"


class SkillFileError(ValueError):
    """A skill file that cannot be read; the message names the file and the problem."""


def parse_markdown(text: str, origin: str = "user", where: str = "skill") -> Skill:
    lines = text.splitlines()
    if not lines or lines[0].strip() != "+++" or "+++" not in [ln.strip() for ln in lines[1:]]:
        raise SkillFileError(f"{where}: expected a TOML header between two '+++' lines, then the technique in Markdown")
    end = 1 + [ln.strip() for ln in lines[1:]].index("+++")
    try:
        header = tomllib.loads("\n".join(lines[1:end]))
        return Skill(**header, content="\n".join(lines[end + 1:]).strip(), origin=origin)
    except tomllib.TOMLDecodeError as e:
        raise SkillFileError(f"{where}: bad TOML header: {e}") from None
    except (ValidationError, TypeError) as e:
        raise SkillFileError(f"{where}: {_first_error(e)}") from None


def _first_error(e: Exception) -> str:
    if isinstance(e, ValidationError):
        where, message = first_error(e)
        return f"{where or 'skill'}: {message}"
    return str(e)


def read_skill_file(path: Path, origin: str = "user") -> list[Skill]:
    """The skills in a file: one Markdown skill, or a JSON export (a list of skills, or one)."""
    if not path.is_file():
        raise SkillFileError(f"{path}: no such file")
    text = path.read_text()
    if path.suffix == ".json":
        try:
            data = json.loads(text)
            items = data if isinstance(data, list) else data.get("skills", [data]) if isinstance(data, dict) else []
            return [Skill.model_validate(item) for item in items]
        except json.JSONDecodeError as e:
            raise SkillFileError(f"{path}: not JSON: {e}") from None
        except (ValidationError, AttributeError) as e:
            raise SkillFileError(f"{path}: {_first_error(e)}") from None
    return [parse_markdown(text, origin, str(path))]


def seed_skills() -> list[Skill]:
    """The library kernelcraft ships, written by us."""
    return [parse_markdown(p.read_text(), "seed", p.name) for p in sorted(SEED_DIR.glob("*.md"))]
