"""A bench's arms: each a name, a strategy with its options, skills on or off. `parse_arm` reads one as a user
writes it, `[NAME=]STRATEGY[+skills][:KEY=VALUE,...]`, and `Arm.search` checks it whole (an unknown strategy, an
option the strategy does not read, a bad value: one line each) before anything runs."""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from ..search import LENGTH_OPTIONS, STRATEGIES, SearchConfig, SkillOptions, strategy_options, unsuited
from ..settings import option_error, with_value
from ..tasks import Task

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")  # a directory's name and a batch request's lane
SKILLS = "skills"
_ON, _OFF = ("on", "true", "yes"), ("off", "false", "no")
# Skill options an arm may set as `skills.KEY`: the run fills in the others (whether they are on, the snapshot).
SKILL_OPTIONS = tuple(name for name in SkillOptions.model_fields if name not in ("enabled", "snapshot", "policy"))
# How far past its budget an arm's length reaches when the user leaves it unset: twice the steps that spend the budget
# when every reply is judged, so replies that hold no candidate (or repeat one) still leave the budget to spend.
LENGTH_SLACK = 2


class ArmError(ValueError):
    """An arm that cannot be run as written; the message is one line naming it."""


class Arm(BaseModel):
    """One arm: `options` by their dotted paths in SearchConfig (`branch.width`), as the user gave them."""

    name: str
    strategy: str
    options: dict[str, Any] = {}
    skills: bool = False
    text: str = ""  # as the user wrote it, for messages

    def search(self, base: SearchConfig, judge_calls: int, tokens: int | None) -> SearchConfig:
        """The arm's search settings: `base`'s (a run file's), then the arm's strategy, options and skills, each task's
        budget (`judge_calls` evaluations, `tokens` model tokens), and, unless the arm sets it, the strategy's length
        (`LENGTH_OPTIONS`) long enough to spend the budget (`LENGTH_SLACK`). Raises ArmError for a bad value."""
        data = base.model_dump(mode="json")
        data.update(strategy=self.strategy, task_judge_calls=judge_calls, task_tokens=tokens)
        data[SKILLS] = {**data[SKILLS], "enabled": self.skills}
        for path, value in self.options.items():
            data = with_value(data, path.split("."), value)
        length = LENGTH_OPTIONS.get(self.strategy)
        if length is not None and length not in self.options:
            steps = LENGTH_SLACK * math.ceil(judge_calls / self._validated(data).judge_calls_per_step())
            data = with_value(data, length.split("."), steps)
        return self._validated(data)

    def _validated(self, data: dict[str, Any]) -> SearchConfig:
        try:
            return SearchConfig.model_validate(data)
        except ValidationError as e:
            named = {path: key for key, path in self.option_names().items() if key != path}
            raise ArmError(f"--arm {self.text or self.name!r}: {option_error(e, named)}") from None

    def option_names(self) -> dict[str, str]:
        """What the arm's strategy reads, by the name an arm gives each, to its dotted path in SearchConfig."""
        return {**strategy_options(self.strategy), SKILLS: "skills.enabled",
                **{f"{SKILLS}.{name}": f"{SKILLS}.{name}" for name in SKILL_OPTIONS}}


def parse_arm(text: str) -> Arm:
    """An arm as a user writes it: `[NAME=]STRATEGY[+skills][:KEY=VALUE,...]`, e.g. `refine`, `branch:width=2,impls=2`,
    `refine+skills`, `long=refine:turns=8`, `evolve:generations=10,skills=on,skills.learn=false`. The name defaults to
    the strategy's, with `+skills` when skills are on. Raises ArmError, one line, for anything it cannot run."""
    head, _, rest = text.strip().partition(":")
    name, sep, strategy = head.rpartition("=")
    strategy, plus, suffix = strategy.partition("+")
    if plus and suffix != SKILLS:
        raise ArmError(f"--arm {text!r}: after '+' only 'skills' (STRATEGY+skills)")
    if strategy not in STRATEGIES:
        raise ArmError(f"--arm {text!r}: unknown strategy {strategy!r}: use one of {', '.join(sorted(STRATEGIES))}")
    arm = Arm(name="", strategy=strategy, skills=bool(plus), text=text)
    names = arm.option_names()
    options: dict[str, Any] = {}
    for item in (part.strip() for part in rest.split(",")) if rest.strip() else ():
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ArmError(f"--arm {text!r}: {item!r} is no KEY=VALUE")
        if key not in names:
            raise ArmError(f"--arm {text!r}: {strategy} takes no option {key!r} (it takes {', '.join(names)})")
        if key == SKILLS:
            arm.skills = _switch(text, value)
        else:
            options[names[key]] = _value(value)
    arm.options = options
    arm.name = name.strip() if sep else strategy + ("+skills" if arm.skills else "")
    if not NAME.fullmatch(arm.name):
        raise ArmError(f"--arm {text!r}: an arm's name is letters, digits and . _ + - (it names a directory), not {arm.name!r}")
    return arm


def check_arms(arms: Sequence[Arm], tasks: Sequence[Task]) -> None:
    """At least one arm, each named once, each able to work on every task (`template`: GEMM tasks only); ArmError
    otherwise, saying what to change."""
    if not arms:
        raise ArmError("give the bench at least one --arm, e.g. --arm refine --arm branch")
    seen: set[str] = set()
    for arm in arms:
        if arm.name in seen:
            raise ArmError(f"two arms are named {arm.name!r}: name each, e.g. --arm {arm.name}-2={arm.text}")
        seen.add(arm.name)
        reason = unsuited(arm.strategy, tasks)
        if reason is not None:
            raise ArmError(f"--arm {arm.text or arm.name!r}: {reason}")


def _switch(text: str, value: str) -> bool:
    word = value.strip().lower()
    if word not in _ON + _OFF:
        raise ArmError(f"--arm {text!r}: skills={value.strip()!r}: use on or off")
    return word in _ON


def _value(text: str) -> Any:
    """A TOML value (`4`, `0.5`, `true`, `"x"`), or else the text itself as a string (`start=best`)."""
    try:
        return tomllib.loads(f"v = {text.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        return text.strip()


__all__ = ["Arm", "ArmError", "LENGTH_SLACK", "check_arms", "parse_arm"]
