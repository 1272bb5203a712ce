"""How much slower the reference ran next to the candidate than alone, beyond what the host explains
(docs/judge.md, exploit class 4: a candidate that slows the reference).

The two times come from two processes at two moments, and a short call's time is mostly host time:
a busy machine or a slower core slows the reference in the candidate's process with no help from the
candidate (on an H100 VM the ratio of honest verdicts ranged 0.3-3.0). Each measurement also timed
`timing.host_probe`, pure-Python work no candidate operator reaches, next to the reference's calls.
The host share of the reference's time (its host time over its time, alone) is scaled by the
probe's ratio; the rest, device time, is not, so a host that is merely slow excuses only the part of
the reference that waits on the host, and a candidate cannot excuse a slower device this way.
"""

from __future__ import annotations

from dataclasses import dataclass

from .verdict import TimingStats, Verdict

# The most a slow host may excuse. Honest verdicts' raw ratios stayed within 0.3-3.0 on a busy H100 VM;
# the pure-Python probe can read far slower than that for a moment on a contended 2-core host, and
# on the CPU, where all of the reference's time is host time, an unbounded factor would excuse a
# reference slowed 20x by the candidate.
MAX_HOST_FACTOR = 4.0


@dataclass(frozen=True)
class Slowdown:
    raw: float  # reference next to the candidate / reference alone
    host_factor: float  # how much slower the host alone makes the reference (1.0: not accounted)
    ratio: float  # raw / host_factor: what the candidate would have to explain


def reference_slowdown(near: TimingStats, alone: TimingStats, account_host: bool = True) -> Slowdown:
    """The reference's slowdown next to the candidate. `account_host` False (a candidate that started
    native threads, which could be what slows its process) compares the raw times."""
    raw = near.median_ms / alone.median_ms if alone.median_ms > 0 else 1.0
    factor = 1.0
    if account_host and near.probe_ms and alone.probe_ms and alone.host_ms is not None and alone.median_ms > 0:
        share = min(1.0, alone.host_ms / alone.median_ms)
        factor = min(MAX_HOST_FACTOR, (1.0 - share) + share * near.probe_ms / alone.probe_ms)
    return Slowdown(raw=raw, host_factor=factor, ratio=raw / factor if factor > 0 else raw)


def verdict_slowdown(verdict: Verdict, alone: TimingStats) -> Slowdown:
    """The verdict's reference (timed next to its candidate) against `alone`: the host accounted unless
    the candidate started native threads (then its process may be slow by the candidate's doing)."""
    return reference_slowdown(verdict.reference, alone, account_host=not verdict.has_flag("native_threads"))


def overstatement(verdict: Verdict) -> float:
    """How many times a verdict's speedup overstates its speedup over the reference alone: the
    reference's slowdown where the verdict is flagged slowed_reference and that slowdown is above 1;
    else 1. The slowdown is the audit's (the smallest against the trusted time, the reference alone
    again and the control's reference in either slot of its rounds), or for a verdict of a judge before version 14, against the trusted time
    (the host accounted, unless the candidate started native threads)."""
    if not verdict.has_flag("slowed_reference") or verdict.reference is None or verdict.trusted_reference is None:
        return 1.0
    audit = verdict.stage("audit")
    ruled = audit.details.get("reference_slowdown") if audit is not None else None
    return max(1.0, ruled if ruled is not None else verdict_slowdown(verdict, verdict.trusted_reference).ratio)


def honest_speedup(verdict: Verdict) -> float:
    """The effective speedup, but no more than the speedup over the reference alone where the verdict is
    flagged slowed_reference: what a reward pays and what a kernel pack records for such a verdict."""
    speedup = verdict.effective_speedup or 0.0
    over = overstatement(verdict)
    return min(speedup, verdict.speedup / over) if over > 1.0 and verdict.speedup else speedup
