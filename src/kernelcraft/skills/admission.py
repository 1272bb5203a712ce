"""Admission of a candidate skill: it enters the library only when regenerating the kernel with it
beats regenerating without it, as the judge measured. The same thresholds decide when a trajectory
improved enough to be summarized."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, Field

from .model import Evidence


class AdmissionPolicy(BaseModel):
    """Defaults as in daVinci-kernel: 1.2x relative and 1.2x absolute."""

    min_relative: float = Field(1.2, gt=0)  # with-skill speedup over without-skill speedup
    min_absolute: float = Field(1.2, gt=0)  # with-skill speedup over the reference

    def improved(self, first: float, best: float) -> bool:
        """Whether a trajectory improved enough to be worth summarizing."""
        return best >= self.min_absolute and best >= self.min_relative * first


@dataclass(frozen=True)
class Decision:
    admitted: bool
    reason: str


def decide(policy: AdmissionPolicy, evidence: Evidence) -> Decision:
    """Admit when the best correct kernel with the skill is fast enough in absolute terms and against
    the best without it (no correct kernel without it counts as no speedup, 1.0x)."""
    with_, without = evidence.speedup_with, evidence.speedup_without
    if with_ is None:
        return Decision(False, "no correct kernel was generated with the skill")
    base = without if without is not None else 1.0
    if with_ < policy.min_absolute:
        return Decision(False, f"{with_:.2f}x with the skill is below the {policy.min_absolute:.2f}x floor")
    if with_ < policy.min_relative * base:
        return Decision(False, f"{with_:.2f}x with the skill vs {base:.2f}x without: less than {policy.min_relative:.2f}x better")
    return Decision(True, f"{with_:.2f}x with the skill vs {base:.2f}x without")
