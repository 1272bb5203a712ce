"""The timing stage (parent side): ABAB measurements of candidate and reference in the candidate's
worker under the exclusive device lock, their rounds drawn and checked by the judge (rounds.py), taken
again where the reference scattered widely or a win is large or rests on a slowed reference."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from typing import Callable

from .protocol import Mismatch, PrepareTiming, ProtocolError, RoundOutputs, Time, Timed
from .reference import ReferenceData, SpotCheck, side
from .rounds import TimedRounds
from .slowdown import verdict_slowdown
from .stages import CandidateRun, StageFailed, recorded_on_failure
from .timeouts import CommandTimeouts
from .verdict import Flag, StageResult, Status, TimingStats

Rounds = Callable[[str | None], TimedRounds]  # the judge's side of one timing command's rounds, per scenario


@dataclass
class Measured:
    """One timing command: the worker's answer, the timed calls the judge checked, and its stage."""

    timed: Timed
    checked: int
    stage: StageResult


class TimingStage:
    """The judge's timing stage. A mixin of Judge's: one measurement (`_time`) and one timing command
    (`_measure`) are the judge's methods, so that a test can stand in for a host busy for a moment."""

    def _time_candidate(self, run: CandidateRun, ref: ReferenceData, times: CommandTimeouts) -> StageResult:
        """The timing stage: inputs prepared (outside the lock), one measurement, and another where the
        first cannot be the last word. A reject for a slowed reference must not rest on one measurement:
        a host busy for a moment slows both sides of every sample alike, while a candidate that slows the
        reference does so again; the verdict keeps the second measurement either way. A large win is
        timed again too, whatever the trusted time says: the audit checks it against the reference timed
        alone once more, and where the trusted time was inflated by a busy host, only that check sees
        the slowed reference (a reject that rested on one measurement, until CI caught it)."""
        cfg, v = run.cfg, run.v
        with run.workers.device_lock(shared=True):
            _, prepared = run.step("timing", PrepareTiming(run.seeds.timing), cfg.timeouts.timing)
        rounds = _rounds_of(run, ref, times)
        stage = self._time(run, prepared.seconds, times.timing, rounds)
        win = v.speedup > 1.0 and v.significant
        slowed = verdict_slowdown(v, ref.trusted).ratio if win else 1.0
        suspect = slowed > cfg.slowed_reference_reject
        if suspect or (win and v.speedup > cfg.timing.remeasure_above):
            first = v.speedup
            stage = self._time(run, stage.seconds, times.timing, rounds)
            again = verdict_slowdown(v, ref.trusted).ratio
            stage.details["retimed"] = {"speedup": first, "reference_vs_trusted": slowed}
            if suspect or abs(v.speedup - first) > 0.1 * first:
                v.flags.append(Flag("noisy_timing", f"the reference ran {slowed:.2f}x slower next to the candidate than alone "
                                                    f"({first:.2f}x); timed again: {again:.2f}x slower ({v.speedup:.2f}x)"))
        return stage

    def _time(self, run: CandidateRun, earlier_s: float, timeout: float, rounds: Rounds) -> StageResult:
        """One ABAB measurement of candidate and reference (offline, then the server and sustained scenarios if asked)
        under the exclusive device lock, each command given `timeout` seconds and its `rounds`; sets the
        verdict's times, speedup and noise band and returns the timing stage, which also counts
        `earlier_s` (input preparation, an earlier try)."""
        cfg, v = run.cfg, run.v
        cmd = Time(run.seeds.timing)
        waited = time.perf_counter()
        with run.workers.measuring(run.w, cfg):
            waited = time.perf_counter() - waited
            a, ref_t, cand_t = self._measure(run, cmd, timeout, rounds)
            stage = a.stage
            stage.seconds += earlier_s
            with recorded_on_failure(v, stage):
                # A measurement whose reference scattered widely (a busy host) is taken again, a few
                # times at most, and the quietest kept: its band would hide any speedup.
                spreads = [ref_t.rel_spread]
                while spreads[-1] > cfg.timing.retime_spread_above and len(spreads) <= cfg.timing.noisy_retimes:
                    b, b_ref, b_cand = self._measure(run, cmd, timeout, rounds)
                    spreads.append(b_ref.rel_spread)
                    if b_ref.rel_spread < ref_t.rel_spread:
                        a, ref_t, cand_t = b, b_ref, b_cand
                if len(spreads) > 1:
                    v.flags.append(Flag("noisy_timing", f"the reference scattered widely (±{spreads[0]:.1%} of its median), so "
                                                        "it was timed again: " + ", ".join(f"±{s:.1%}" for s in spreads)
                                                        + f"; the quietest is kept: {ref_t.spread_words()}"))
                if cfg.timing.server:
                    _, sref, scand = self._measure(run, replace(cmd, scenario="server"), timeout, rounds)
                    v.scenarios["server"] = {"qps": cfg.timing.server_qps, "speedup": sref.median_ms / scand.median_ms,
                                             "reference": asdict(sref), "candidate": asdict(scand)}
                if cfg.timing.sustained:
                    hot, href, hcand = self._measure(run, replace(cmd, scenario="sustained"), timeout, rounds)
                    v.scenarios["sustained"] = {"speedup": href.median_ms / hcand.median_ms, "clocks": hot.timed.clocks,
                                                "reference": asdict(href), "candidate": asdict(hcand)}
        v.reference, v.candidate = ref_t, cand_t
        v.speedup = ref_t.median_ms / cand_t.median_ms
        noise = max(ref_t.rel_spread, cfg.timing.min_noise)
        v.speedup_band = (v.speedup * (1 - noise), v.speedup * (1 + noise))
        v.significant = abs(v.speedup - 1.0) > noise
        timed = a.timed
        stage.details = {"iterations": len(timed.samples["candidate"]), "spot_checks": a.checked, "lock_wait_s": waited,
                         "noise": noise, "clocks": timed.clocks, "phases_s": timed.phases_s, "host_ms": timed.host_ms,
                         "cpus": timed.cpus}
        v.env["clocks"] = timed.clocks
        return stage

    def _measure(self, run: CandidateRun, cmd: Time, timeout: float, rounds: Rounds) -> tuple[Measured, TimingStats, TimingStats]:
        """One timing command in the worker, its rounds drawn and checked by the judge: what it measured,
        and the reference's and the candidate's statistics. A timed call found wrong ends the evaluation
        (incorrect)."""
        judged = rounds(cmd.scenario)
        a, stage = run.step("timing", cmd, timeout, Status.RUNTIME_ERROR, judged)
        with recorded_on_failure(run.v, stage):
            try:
                judged.finish(a.samples)
            except ProtocolError as e:
                stage.ok, stage.message = False, f"the worker's answer broke the judge's protocol (forged?): {e}"
                raise StageFailed(Status.HACK_DETECTED, stage.message) from None
            if judged.failure is not None:
                i, bad = judged.failure
                stage.ok, stage.details = False, bad.to_dict()
                stage.message = bad.reason if bad.forged else \
                    f"output of timed call {i} is wrong (caching or deferred work?): {bad.describe()}"
                raise StageFailed(Status.HACK_DETECTED if bad.forged else Status.INCORRECT, stage.message)
        return Measured(a, judged.checked, stage), side(a, "reference"), side(a, "candidate")


def _rounds_of(run: CandidateRun, ref: ReferenceData, times: CommandTimeouts) -> Rounds:
    """The judge's side of one timing command's rounds, per scenario (rounds.py): the task's trusted
    worker checks the calls it draws, by the correctness stage's rule (the float64 truth decides
    where the plain comparison fails, where the truth applies)."""
    cfg, task = run.cfg, run.task
    tolerance = cfg.tolerance(task.meta.dtype, task.meta.atol, task.meta.rtol)
    truth = ref.facts.truth == "float64"

    def compare(k: int, roll: int, shared: RoundOutputs) -> list[Mismatch]:
        check = SpotCheck(run.seeds.timing[k], roll, cfg.timing.fresh_inputs, tolerance, truth, cfg.truth_factor)
        return ref.server.spot_check(check, shared, run.w, times.spot_check)

    def rounds(scenario: str | None) -> TimedRounds:
        t = cfg.timing.for_scenario(scenario)
        return TimedRounds(len(run.seeds.timing), t.spot_checks, (t.min_iters, t.max_iters), compare)
    return rounds
