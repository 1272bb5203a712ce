"""Is the judge's noise band as wide as the noise? A check on stored verdicts, no device needed.

The template search judges each finalist twice, in separate worker processes: once in the coarse
stage (a short recipe) and once in the fine stage (the run's recipe). The coarse verdict is thus an
independent re-measurement of the fine one. A band that describes the noise should hold most
re-measurements; one that is too narrow calls noise a win. Two bands are compared on every fine
verdict that has a coarse twin:
  band       the judge's: the speedup +- the reference's half interquartile range (relative); a win
             is a verdict the judge calls significant
  bootstrap  a 95% interval of median(reference)/median(candidate) over the verdict's own paired
             rounds, resampled (what one process's samples alone would claim); a win lies wholly
             above 1 + the judge's minimum noise (1.01)
For each: how often it holds the re-measurement, how many wins it declares, and how many of those the
re-measurement also found faster than torch.matmul.

    python benchmarks/band_calibration.py --workspace WS [RUN ...]   # default: every template run
"""

from __future__ import annotations

import random
import statistics
import sys
from dataclasses import dataclass

from stored_runs import template_runs  # a sibling script: benchmarks run as `python benchmarks/X.py`

from kernelcraft.judge import TimingConfig, Verdict
from kernelcraft.store import Store

MIN_WIN = 1.0 + TimingConfig().min_noise  # the judge's smallest speedup that can count


@dataclass
class BandScore:
    holds: int = 0  # re-measurements inside the band
    wins: int = 0  # speedups the band calls wins
    wins_reproduced: int = 0  # of those, re-measured above 1.0

    def add(self, lo: float, hi: float, win: bool, again: float) -> None:
        self.holds += lo <= again <= hi
        if win:
            self.wins += 1
            self.wins_reproduced += again > 1.0


def bootstrap_interval(v: Verdict, rng: random.Random, resamples: int = 400) -> tuple[float, float]:
    """95% percentile interval of the speedup, resampling the verdict's paired rounds."""
    ref, cand = v.reference.samples_ms, v.candidate.samples_ms
    n = len(ref)
    ratios = []
    for _ in range(resamples):
        idx = [rng.randrange(n) for _ in range(n)]
        ratios.append(statistics.median(ref[i] for i in idx) / statistics.median(cand[i] for i in idx))
    ratios.sort()
    return ratios[int(0.025 * resamples)], ratios[int(0.975 * resamples) - 1]


def calibrate(store: Store, run_id: str, rng: random.Random) -> tuple[int, BandScore, BandScore]:
    pairs = 0
    band, boot = BandScore(), BandScore()
    for rt in store.run_tasks(run_id):
        attempts = [a for a in store.attempts(run_id, rt.task_key) if a.status == "correct"]
        coarse = {a.meta.get("name"): a for a in attempts if a.meta.get("stage") != "fine"}
        for fine in (a for a in attempts if a.meta.get("stage") == "fine"):
            twin = coarse.get(fine.meta.get("name"))
            v = store.verdict(fine.verdict_id)
            if twin is None or twin.verdict_id == fine.verdict_id or v.speedup_band is None:
                continue
            again = store.verdict(twin.verdict_id).speedup
            pairs += 1
            band.add(*v.speedup_band, v.significant and v.speedup > 1.0, again)
            lo, hi = bootstrap_interval(v, rng)
            boot.add(lo, hi, lo > MIN_WIN, again)
    return pairs, band, boot


def main() -> int:
    rng = random.Random(0)
    with template_runs(__doc__.splitlines()[0]) as (store, runs):
        print(f"{'run':<24} {'pairs':>5}  {'band holds':>10} {'wins':>5} {'reproduced':>10}  {'CI holds':>8} {'wins':>5} {'reproduced':>10}")
        for run_id in runs:
            pairs, band, boot = calibrate(store, run_id, rng)
            if not pairs:
                continue
            print(f"{run_id:<24} {pairs:>5}  {band.holds / pairs:>10.0%} {band.wins:>5} {band.wins_reproduced:>10}  "
                  f"{boot.holds / pairs:>8.0%} {boot.wins:>5} {boot.wins_reproduced:>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
