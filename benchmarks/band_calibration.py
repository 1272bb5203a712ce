"""Is the judge's noise band as wide as the noise? A check on stored verdicts, no device needed.

A speedup measured twice, in two worker processes, differs by the noise of both measurements. Two
kinds of pair are in a workspace:
  within a run   the template search judges each finalist twice: in the coarse stage (a short
                 recipe) and in the fine stage (the run's recipe), minutes apart on one machine
  across runs    the same kernel source judged on the same shape by two runs (fine stages both; a
                 verdict a run reused from an earlier one is not a second measurement), days apart,
                 on other machines, often under another judge version (a row of its own keeps the
                 pairs judged by one version)

For each pair the two log speedups' difference is set against what each verdict's own paired rounds
say of its error (a bootstrap of the rounds). If that error were all the noise, |z| would stay
below 1.96 for 95% of the pairs; the part of the difference's variance it leaves unexplained is
sigma_extra, a noise between processes (or machines) that one measurement cannot see. Next to it:
how often the judge's band (the speedup +- the reference's half-IQR) holds the other measurement, how
many wins (significant, above 1.0x) it declares, and how many of those the other measurement also
found above 1.0x. Across runs, the slope says how a kernel's speedup moves with the host's speed
(the judge's host probe, the same pure-Python loop in every run): the change of the log speedup per
doubling of the probe's time, from short shapes, where host time is most of a call.

    python benchmarks/band_calibration.py --workspace WS [RUN ...]   # default: every template run
"""

from __future__ import annotations

import math
import statistics
import sys
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
from stored_runs import template_runs  # a sibling script: benchmarks run as `python benchmarks/X.py`

from kernelcraft.judge import Verdict
from kernelcraft.store import Store

SHORT_MS = 0.12  # torch.matmul's time below which a call is mostly host time (RESULTS.md, twelfth session)
RESAMPLES = 300


@dataclass
class Measured:
    """One verdict, with its bootstrap error in log speedup."""

    run_id: str
    v: Verdict
    log_se: float

    @property
    def log_speedup(self) -> float:
        return math.log(self.v.speedup)


@dataclass
class PairScore:
    """Pairs of measurements of one kernel on one shape, scored."""

    diffs: list[float] = field(default_factory=list)  # log speedup differences
    pair_var: list[float] = field(default_factory=list)  # the two bootstrap variances, summed
    band_holds: int = 0
    wins: int = 0
    wins_reproduced: int = 0

    def add(self, a: Measured, b: Measured) -> None:
        self.diffs.append(a.log_speedup - b.log_speedup)
        self.pair_var.append(a.log_se ** 2 + b.log_se ** 2)
        for this, other in ((a, b), (b, a)):
            lo, hi = this.v.speedup_band or (this.v.speedup, this.v.speedup)
            self.band_holds += lo <= other.v.speedup <= hi
            if this.v.significant and this.v.speedup > 1.0:
                self.wins += 1
                self.wins_reproduced += other.v.speedup > 1.0

    def row(self, label: str) -> str:
        n = len(self.diffs)
        inside = sum(abs(d) / math.sqrt(s) < 1.96 for d, s in zip(self.diffs, self.pair_var) if s > 0) / n
        spread = statistics.pstdev(self.diffs)
        own = math.sqrt(statistics.fmean(self.pair_var))
        extra = math.sqrt(max(0.0, (spread ** 2 - own ** 2) / 2))
        return (f"{label:<40} {n:>5} {inside:>8.0%} {spread:>8.2%} {own:>8.2%} {extra:>8.2%}  "
                f"{self.band_holds / (2 * n):>6.0%} {self.wins:>5} {self.wins_reproduced:>10}")


HEADER = (f"{'pairs':<40} {'n':>5} {'|z|<1.96':>8} {'sd diff':>8} {'own err':>8} {'s_extra':>8}  "
          f"{'band':>6} {'wins':>5} {'reproduced':>10}")


def log_se(v: Verdict, rng: np.random.Generator) -> float:
    """Bootstrap standard error of log(median reference / median candidate) over the paired rounds."""
    ref, cand = np.asarray(v.reference.samples_ms), np.asarray(v.candidate.samples_ms)
    idx = rng.integers(0, len(ref), size=(RESAMPLES, len(ref)))
    return float(np.std(np.log(np.median(ref[idx], axis=1) / np.median(cand[idx], axis=1))))


def measured(store: Store, runs: list[str], rng: np.random.Generator) -> tuple[list[tuple[Measured, Measured]], list[Measured]]:
    """The coarse/fine twins of every run, and every fine verdict (each verdict once)."""
    twins, fines, seen = [], [], set()
    for run_id in runs:
        for rt in store.run_tasks(run_id):
            attempts = [a for a in store.attempts(run_id, rt.task_key) if a.status == "correct" and a.verdict_id]
            coarse = {a.meta.get("name"): a for a in attempts if a.meta.get("stage") != "fine"}
            for fine in (a for a in attempts if a.meta.get("stage") == "fine"):
                if fine.verdict_id in seen:
                    continue
                seen.add(fine.verdict_id)
                v = store.verdict(fine.verdict_id)
                if v.speedup_band is None or v.reference is None or v.candidate is None:
                    continue
                m = Measured(run_id, v, log_se(v, rng))
                fines.append(m)
                twin = coarse.get(fine.meta.get("name"))
                if twin is not None and twin.verdict_id != fine.verdict_id:
                    t = store.verdict(twin.verdict_id)
                    if t.reference is not None and t.candidate is not None:
                        twins.append((m, Measured(run_id, t, log_se(t, rng))))
    return twins, fines


def across_runs(fines: list[Measured]) -> list[tuple[Measured, Measured]]:
    """Pairs of fine verdicts of one source on one shape from two runs, each a measurement of its own
    (a reused verdict repeats an earlier one's samples)."""
    by_kernel: dict[tuple[str, str], list[Measured]] = {}
    for m in fines:
        by_kernel.setdefault((m.v.task, m.v.candidate_hash), []).append(m)
    return [(a, b) for ms in by_kernel.values() for a, b in combinations(ms, 2)
            if a.run_id != b.run_id and a.v.reference.samples_ms != b.v.reference.samples_ms]


def is_short(pair: tuple[Measured, Measured]) -> bool:
    return max(m.v.reference.median_ms for m in pair) < SHORT_MS


def host_slope(pairs: list[tuple[Measured, Measured]]) -> tuple[float, int]:
    """Least-squares slope of the log speedup difference over log2 of the host probes' ratio."""
    xs, ys = [], []
    for a, b in pairs:
        pa, pb = a.v.reference.probe_ms, b.v.reference.probe_ms
        if pa and pb:
            xs.append(math.log2(pa / pb))
            ys.append(a.log_speedup - b.log_speedup)
    if len(xs) < 3 or statistics.pvariance(xs) == 0:
        return float("nan"), len(xs)
    return statistics.linear_regression(xs, ys).slope, len(xs)


def main() -> int:
    rng = np.random.default_rng(0)
    with template_runs(__doc__.splitlines()[0]) as (store, runs):
        twins, fines = measured(store, runs, rng)
        if not fines:
            print("error: no fine verdicts in these runs", file=sys.stderr)
            return 2
        print(HEADER)
        other = across_runs(fines)
        same = [(a, b) for a, b in other if a.v.env.get("judge_version") == b.v.env.get("judge_version")]
        for label, pairs in (("within a run (coarse, fine)", twins), ("across runs (fine, fine)", other),
                             ("across runs, one judge version", same)):
            for size, keep in (("short", True), ("long", False)):
                chosen = [p for p in pairs if is_short(p) == keep]
                if chosen:
                    score = PairScore()
                    for a, b in chosen:
                        score.add(a, b)
                    print(score.row(f"{label}, {size}"))
        slope, n = host_slope([p for p in other if is_short(p)])
        print(f"\nacross runs, short shapes: the log speedup moves by {slope:+.3f} per doubling of the host probe ({n} pairs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
