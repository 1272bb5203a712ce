"""A skill: an optimization technique in words, where it applies, and the judge's evidence that it
pays."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

Origin = Literal["seed", "user", "summarized", "imported"]


class Evidence(BaseModel):
    """One verification: the same task regenerated with and without the skill, on one device."""

    task: str
    device: str
    speedup_with: float | None  # best correct speedup with the skill in the prompt (None: none correct)
    speedup_without: float | None
    run_id: str | None = None
    verdict_with: int | None = None  # the verdicts that measured them
    verdict_without: int | None = None


class Skill(BaseModel):
    name: str = Field(min_length=1, max_length=64)
    description: str = ""
    scope: str = ""
    tags: list[str] = Field(default_factory=list)
    content: str = Field(min_length=1)
    origin: Origin = "user"
    evidence: list[Evidence] = Field(default_factory=list)
    version: int = 1

    @field_validator("name")
    @classmethod
    def _slug(cls, v: str) -> str:
        if not all(c.isalnum() or c == "-" for c in v) or v != v.lower():
            raise ValueError(f"skill name {v!r}: use lowercase letters, digits and hyphens")
        return v

    def search_text(self) -> str:
        """What retrieval indexes: every field a task's text could match."""
        return " ".join([self.name.replace("-", " "), self.description, self.scope, " ".join(self.tags), self.content])

    def same_technique(self, other: "Skill") -> bool:
        """True when only the version or the evidence differ."""
        keys = ("name", "description", "scope", "tags", "content")
        return all(getattr(self, k) == getattr(other, k) for k in keys)
