"""What a run's parked lines of work wait on, counted as they park (every task's threads report
here), and the line the run stops with."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field


@dataclass
class ParkedWork:
    replies: int = 0  # model calls whose batch reply is not in yet
    judge_errors: Counter[str] = field(default_factory=Counter)  # evaluations the judge failed, by its message
    failed_calls: Counter[str] = field(default_factory=Counter)  # model calls that got no reply, by cause
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def reply(self) -> None:
        with self._lock:
            self.replies += 1

    def judge_error(self, message: str) -> None:
        # The first line: enough to tell a full disk from a lost device, and equal causes count together.
        with self._lock:
            self.judge_errors[_first_line(message)] += 1

    def call_failed(self, message: str) -> None:
        with self._lock:
            self.failed_calls[_first_line(message)] += 1

    def summary(self, batch: str | None) -> str | None:
        """Why the run stops for its parked work (`batch`: what the batch backend said waits), or None."""
        parts = []
        if batch:
            parts.append(batch)
        elif self.replies:
            parts.append(f"{self.replies} model replies are not in yet")
        if self.failed_calls:
            n = sum(self.failed_calls.values())
            causes = "; ".join(f"{count}x {cause}" for cause, count in self.failed_calls.most_common())
            parts.append(f"{n} model call{'s' if n != 1 else ''} got no reply ({causes}); --resume asks "
                         f"{'them' if n != 1 else 'it'} again")
        if self.judge_errors:
            n = sum(self.judge_errors.values())
            causes = "; ".join(f"{count}x {cause}" for cause, count in self.judge_errors.most_common())
            parts.append(f"{n} evaluation{'s' if n != 1 else ''} failed on the judge's side ({causes}); --resume judges "
                         f"{'those candidates' if n != 1 else 'that candidate'} again without asking the model")
        return "; ".join(parts) or None


def _first_line(message: str) -> str:
    return (message.strip().splitlines() or ["no message"])[0][:200]
