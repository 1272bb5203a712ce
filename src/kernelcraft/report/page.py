"""What of a run the HTML page shows in full, so that it stays small for any run (a runaway run once made a 64 MB
page): each task's trajectory lists its first and last attempts and its best, the others counted by status in
one row; a reply longer than `REPLY_INLINE_CHARS` is linked to the file the run recorded it in, not inlined; and the
sources, replies and feedback inlined on the page share `TEXT_BUDGET_CHARS`, handed out a row at a time across the
tasks (every task's first row, then every task's second...), so a long task cannot take the page from the others.
A listed row whose texts do not fit keeps its verdict's line and the link to its reply.

So a page holds at most about `TEXT_BUDGET_CHARS` of those texts, plus per task its best kernel, its reference and
`ROWS_PER_TASK` rows of a line or two each (tests/test_report_html.py checks 2,000 attempts of 30 KB replies)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

ROWS_PER_TASK = 60  # a trajectory lists its first and last 30 attempts (and its best, wherever it is)
REPLY_INLINE_CHARS = 8_000  # a longer reply is linked to its recorded file
TEXT_BUDGET_CHARS = 2_000_000  # the sources, replies and feedback inlined on the page, in all


class Texts(Protocol):
    """An attempt as the page weighs it (run_data.AttemptReport)."""

    @property
    def status(self) -> str: ...
    @property
    def feedback(self) -> str: ...
    @property
    def source(self) -> str | None: ...
    @property
    def reply(self) -> str | None: ...
    @property
    def duplicate_of(self) -> tuple[int, int] | None: ...


@dataclass(frozen=True)
class Row:
    """A listed attempt; `texts`: its feedback, source and reply are on the page (else its reply is only linked)."""

    attempt: Texts
    texts: bool


@dataclass(frozen=True)
class Gap:
    """The attempts a long trajectory does not list, counted by status."""

    statuses: dict[str, int] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return sum(self.statuses.values())


def listed(attempts: Sequence[Texts], best: Texts | None) -> list[Texts | Gap]:
    """A trajectory's attempts as the page lists them: all of them up to ROWS_PER_TASK, else the first and the last
    half of that, the best in its place if it falls between, and a Gap for each stretch left out."""
    if len(attempts) <= ROWS_PER_TASK:
        return list(attempts)
    half = ROWS_PER_TASK // 2
    keep = set(range(half)) | set(range(len(attempts) - half, len(attempts)))
    keep |= {i for i, a in enumerate(attempts) if a is best}
    items: list[Texts | Gap] = []
    left_out: Counter[str] = Counter()
    for i, a in enumerate(attempts):
        if i in keep:
            if left_out:
                items.append(Gap(dict(left_out)))
                left_out = Counter()
            items.append(a)
        else:
            left_out[a.status] += 1
    return items


def text_chars(a: Texts) -> int:
    """What inlining an attempt's texts costs the page: its feedback, its source (a duplicate shows none) and its reply
    (one too long to inline is linked, at no cost)."""
    reply = len(a.reply) if a.reply is not None and len(a.reply) <= REPLY_INLINE_CHARS else 0
    source = len(a.source) if a.source is not None and a.duplicate_of is None else 0
    return len(a.feedback) + source + reply


def page_rows(trajectories: Sequence[list[Texts | Gap]], budget: int = TEXT_BUDGET_CHARS) -> list[list[Row | Gap]]:
    """Each trajectory's listed items, every attempt a Row that says whether its texts are inlined: the budget is
    handed out a row at a time across the trajectories, first rows first; a row that does not fit is not inlined,
    and a smaller later one still may be."""
    inline: set[int] = set()
    depth = max((len(t) for t in trajectories), default=0)
    for i in range(depth):
        for items in trajectories:
            item = items[i] if i < len(items) else None
            if item is None or isinstance(item, Gap):
                continue
            cost = text_chars(item)
            if cost <= budget:
                inline.add(id(item))
                budget -= cost
    return [[item if isinstance(item, Gap) else Row(item, id(item) in inline) for item in items] for items in trajectories]
