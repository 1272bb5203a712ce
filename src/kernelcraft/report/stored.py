"""Questions answered from a workspace's stored verdicts alone, no device: is the judge's noise band as wide
as the noise, and where a template kernel's time behind torch.matmul goes (host or device).

    from kernelcraft.report.stored import band_calibration, template_runs, time_split
    with Store(workspace) as store:
        print(band_calibration(store, template_runs(store)).table())
        print(time_split_table(time_split(store, template_runs(store))))

**The noise band.** A speedup measured twice, in two worker processes, differs by the noise of both
measurements. Two kinds of pair are in a workspace: within a run, the template search judges each finalist
in its coarse stage (a short recipe) and again in its fine stage; across runs, the same source on the same
shape is judged by two runs (fine stages both; a reused verdict is not a second measurement). Each pair's
log-speedup difference is set against each verdict's own bootstrap error over its paired rounds: if that
error were all the noise, |z| would stay under 1.96 for 95% of pairs, and `s_extra` is the noise between
processes or machines that one measurement cannot see. Next to it: how often the judge's band holds the other
measurement, the wins it declares and how many the other measurement reproduces above 1.0x; and, across runs
on short shapes, how the log speedup moves per doubling of the host probe's time.

**The time split.** Every verdict's timing stage records each side's median host time. Per kernel family and
for short and long shapes apart, the median of the candidate's time minus the reference's, and of its host
time minus the reference's: a family whose host difference is most of its total loses in its launch path.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

from ..judge import Verdict
from ..kernels.gemm import CutlassConfig, config_of_source
from ..store import Store

SHORT_MS = 0.12  # torch.matmul's time below which a GEMM call is mostly host time (docs/results, 2026-11-25)
RESAMPLES = 300


def template_runs(store: Store) -> list[str]:
    """Every template-search run in the workspace, oldest first."""
    return [r.id for r in store.runs("optimize") if r.args.get("search", {}).get("strategy") == "template"]


@dataclass
class Measured:
    """One verdict, with its bootstrap error in log speedup."""

    run_id: str
    verdict: Verdict
    log_se: float

    @property
    def log_speedup(self) -> float:
        return math.log(self.verdict.speedup)


@dataclass
class PairScore:
    """Pairs of measurements of one kernel on one shape, scored."""

    label: str
    diffs: list[float] = field(default_factory=list)  # log speedup differences
    pair_var: list[float] = field(default_factory=list)  # the two bootstrap variances, summed
    band_holds: int = 0
    wins: int = 0
    wins_reproduced: int = 0

    def add(self, a: Measured, b: Measured) -> None:
        self.diffs.append(a.log_speedup - b.log_speedup)
        self.pair_var.append(a.log_se ** 2 + b.log_se ** 2)
        for this, other in ((a, b), (b, a)):
            lo, hi = this.verdict.speedup_band or (this.verdict.speedup, this.verdict.speedup)
            self.band_holds += lo <= other.verdict.speedup <= hi
            if this.verdict.significant and this.verdict.speedup > 1.0:
                self.wins += 1
                self.wins_reproduced += other.verdict.speedup > 1.0

    @property
    def n(self) -> int:
        return len(self.diffs)

    @property
    def within_own_error(self) -> float:
        """The share of pairs whose difference is within 1.96 of their own bootstrap errors."""
        return sum(abs(d) / math.sqrt(s) < 1.96 for d, s in zip(self.diffs, self.pair_var) if s > 0) / self.n

    @property
    def spread(self) -> float:
        return statistics.pstdev(self.diffs)

    @property
    def own_error(self) -> float:
        return math.sqrt(statistics.fmean(self.pair_var))

    @property
    def s_extra(self) -> float:
        """The noise per measurement that the verdicts' own errors leave unexplained."""
        return math.sqrt(max(0.0, (self.spread ** 2 - self.own_error ** 2) / 2))

    @property
    def band_rate(self) -> float:
        return self.band_holds / (2 * self.n)


@dataclass
class BandCalibration:
    """The pair scores of a workspace's template runs, and the host-speed slope on short shapes."""

    scores: list[PairScore]
    host_slope: float
    slope_pairs: int

    def table(self) -> str:
        lines = [f"{'pairs':<40} {'n':>5} {'|z|<1.96':>8} {'sd diff':>8} {'own err':>8} {'s_extra':>8}  "
                 f"{'band':>6} {'wins':>5} {'reproduced':>10}"]
        for s in self.scores:
            lines.append(f"{s.label:<40} {s.n:>5} {s.within_own_error:>8.0%} {s.spread:>8.2%} {s.own_error:>8.2%} "
                         f"{s.s_extra:>8.2%}  {s.band_rate:>6.0%} {s.wins:>5} {s.wins_reproduced:>10}")
        lines.append(f"\nacross runs, short shapes: the log speedup moves by {self.host_slope:+.3f} per doubling of "
                     f"the host probe ({self.slope_pairs} pairs)")
        return "\n".join(lines)


def _log_se(v: Verdict, rng: np.random.Generator) -> float:
    """Bootstrap standard error of log(median reference / median candidate) over the paired rounds."""
    ref, cand = np.asarray(v.reference.samples_ms), np.asarray(v.candidate.samples_ms)
    idx = rng.integers(0, len(ref), size=(RESAMPLES, len(ref)))
    return float(np.std(np.log(np.median(ref[idx], axis=1) / np.median(cand[idx], axis=1))))


def _measured(store: Store, runs: list[str], rng: np.random.Generator) -> tuple[list[tuple[Measured, Measured]], list[Measured]]:
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
                m = Measured(run_id, v, _log_se(v, rng))
                fines.append(m)
                twin = coarse.get(fine.meta.get("name"))
                if twin is not None and twin.verdict_id != fine.verdict_id:
                    t = store.verdict(twin.verdict_id)
                    if t.reference is not None and t.candidate is not None:
                        twins.append((m, Measured(run_id, t, _log_se(t, rng))))
    return twins, fines


def _across_runs(fines: list[Measured]) -> list[tuple[Measured, Measured]]:
    """Pairs of fine verdicts of one source on one shape from two runs, each a measurement of its own."""
    by_kernel: dict[tuple[str, str], list[Measured]] = {}
    for m in fines:
        by_kernel.setdefault((m.verdict.task, m.verdict.candidate_hash), []).append(m)
    return [(a, b) for ms in by_kernel.values() for a, b in combinations(ms, 2)
            if a.run_id != b.run_id and a.verdict.reference.samples_ms != b.verdict.reference.samples_ms]


def _is_short(pair: tuple[Measured, Measured]) -> bool:
    return max(m.verdict.reference.median_ms for m in pair) < SHORT_MS


def _host_slope(pairs: list[tuple[Measured, Measured]]) -> tuple[float, int]:
    """Least-squares slope of the log speedup difference over log2 of the host probes' ratio."""
    xs, ys = [], []
    for a, b in pairs:
        pa, pb = a.verdict.reference.probe_ms, b.verdict.reference.probe_ms
        if pa and pb:
            xs.append(math.log2(pa / pb))
            ys.append(a.log_speedup - b.log_speedup)
    if len(xs) < 3 or statistics.pvariance(xs) == 0:
        return float("nan"), len(xs)
    return statistics.linear_regression(xs, ys).slope, len(xs)


def band_calibration(store: Store, runs: list[str], seed: int = 0) -> BandCalibration | None:
    """Score the noise band on the runs' pairs of measurements; None when the runs hold no fine verdict."""
    twins, fines = _measured(store, runs, np.random.default_rng(seed))
    if not fines:
        return None
    other = _across_runs(fines)
    same = [(a, b) for a, b in other if a.verdict.env.get("judge_version") == b.verdict.env.get("judge_version")]
    scores = []
    for label, pairs in (("within a run (coarse, fine)", twins), ("across runs (fine, fine)", other),
                         ("across runs, one judge version", same)):
        for size, keep in (("short", True), ("long", False)):
            chosen = [p for p in pairs if _is_short(p) == keep]
            if chosen:
                score = PairScore(f"{label}, {size}")
                for a, b in chosen:
                    score.add(a, b)
                scores.append(score)
    slope, n = _host_slope([p for p in other if _is_short(p)])
    return BandCalibration(scores, slope, n)


@dataclass(frozen=True)
class TimeSplit:
    """One run's correct verdicts of one kernel family and shape length: the median differences from the
    reference, total and host, in microseconds."""

    run_id: str
    family: str
    length: str
    verdicts: int
    total_us: float
    host_us: float


def kernel_family(source: str) -> str:
    """The kernel family of a template candidate: cutlass, triton tma, triton split-K, triton or other."""
    config = config_of_source(source)
    if config is None:
        return "other"
    if isinstance(config, CutlassConfig):
        return "cutlass"
    if config.variant.startswith("tma"):
        return "triton tma"
    return "triton split-K" if config.split_k > 1 else "triton"


def time_split(store: Store, runs: list[str], long_us: float = SHORT_MS * 1e3) -> list[TimeSplit]:
    """Per run, kernel family and shape length (the reference over `long_us` is long), where the candidate's
    time behind the reference goes."""
    out = []
    for run_id in runs:
        gaps: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
        seen = set()
        for attempt in store.attempts(run_id):
            if attempt.status != "correct" or attempt.verdict_id in seen:
                continue
            seen.add(attempt.verdict_id)
            v = store.verdict(attempt.verdict_id)
            timing = v.stage("timing")
            host = timing.details.get("host_ms") if timing else None
            if not host or v.reference is None or v.candidate is None:
                continue
            length = "long" if v.reference.median_ms * 1e3 > long_us else "short"
            total = (v.candidate.median_ms - v.reference.median_ms) * 1e3
            gaps[kernel_family(store.candidate_source(attempt.verdict_id)), length].append(
                (total, (host["candidate"] - host["reference"]) * 1e3))
        for (fam, length), rows in sorted(gaps.items()):
            out.append(TimeSplit(run_id, fam, length, len(rows), statistics.median(t for t, _ in rows),
                                 statistics.median(h for _, h in rows)))
    return out


def time_split_table(rows: list[TimeSplit]) -> str:
    """The time split as a plain-text table."""
    lines = [f"{'run':<24} {'family':<15} {'shapes':<6} {'verdicts':>8} {'total us':>9} {'host us':>8}"]
    lines += [f"{r.run_id:<24} {r.family:<15} {r.length:<6} {r.verdicts:>8} {r.total_us:>+9.1f} {r.host_us:>+8.1f}"
              for r in rows]
    return "\n".join(lines)
