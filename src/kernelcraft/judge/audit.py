"""The audit (parent side): the last word on a correct candidate. Its time against the physical floor
(the device's ceilings: a time below the memory floor is impossible, so not measured honestly), the
reference timed next to it against the reference timed alone (a candidate that slows the reference
wins only by it) and, before a reject for that, against the reference timed next to itself by the
candidate's protocol, the SM clock, and the final message."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from ..tasks import Task
from .ceilings import CeilingsCache
from .config import JudgeConfig
from .reference import ReferenceData
from .roofline import Roofline
from .rules import LOW_COVERAGE
from .slowdown import verdict_slowdown
from .verdict import Flag, StageResult, Status, TimingStats, Verdict


SLOWED_REFERENCE_REJECT = "slowed_reference"  # the audit stage's details["reject"] for a slowed-reference reject


@dataclass(frozen=True)
class Control:
    """The reference judged as its own candidate, by the candidate's protocol: its time in the candidate's slot of
    each round (`first`: after the round's inputs are made, by copies) and in the reference's (`second`: right
    after the first slot's call)."""

    first: TimingStats
    second: TimingStats


def slowed_reference_reject(v: Verdict) -> bool:
    """Whether `v` was rejected for a reference slowed next to its candidate."""
    audit = v.stage("audit")
    return audit is not None and audit.details.get("reject") == SLOWED_REFERENCE_REJECT


class Audit:
    """The audit of one judge: its device's ceilings; `reference_alone`, which times a task's reference
    alone in a trusted worker now (the candidate's processes gone); and `reference_control`, which times
    it next to itself as the candidate, by the candidate's protocol in a fresh worker (a self-check):
    now (`fresh`), or a measurement of the last `control_reuse_s` seconds; None where that failed."""

    def __init__(self, ceilings: CeilingsCache, reference_alone: Callable[[Task], TimingStats],
                 reference_control: Callable[[Task, JudgeConfig, bool], Control | None]) -> None:
        self.ceilings = ceilings
        self.reference_alone = reference_alone
        self.reference_control = reference_control

    def run(self, task: Task, v: Verdict, stage: StageResult, ref: ReferenceData, cfg: JudgeConfig,
            control: bool = True) -> None:
        """Rule on `v` (correct so far), completing its audit `stage`: a reject, flags, or the final message.
        `control` False (a self-check, which is the control): neither the flag nor a reject measures one."""
        t0 = time.perf_counter()
        cand_ms = v.candidate.median_ms
        ceilings = self.ceilings.get()
        roof = Roofline.of(ref.flops, ref.bytes, cand_ms, ceilings)
        if cand_ms < cfg.floor_margin * roof.bytes_floor_ms:
            ceilings = self.ceilings.get(refresh=True)  # a reject must not rest on one low measurement
            roof = Roofline.of(ref.flops, ref.bytes, cand_ms, ceilings)
        bytes_floor_ms, flop_floor_ms = roof.bytes_floor_ms, roof.flop_floor_ms
        # The reference timed alone now, once the candidate's processes are gone: taken only when a
        # verdict rests on it, and then shared by both checks below.
        alone_now = None
        if v.speedup > cfg.timing.remeasure_above:
            # A large win is checked against a fresh trusted time too: a trusted time inflated by
            # a busy machine would otherwise hide a slowed reference.
            alone_now = self.reference_alone(task)
            if alone_now.median_ms < v.trusted_reference.median_ms:
                v.trusted_reference = alone_now
        slowdown = verdict_slowdown(v, v.trusted_reference)
        slowed = slowdown.ratio
        stage.details.update(bytes=ref.bytes, flops=ref.flops, bytes_floor_ms=bytes_floor_ms, flop_floor_ms=flop_floor_ms,
                             reference_vs_trusted=slowed, reference_vs_trusted_raw=slowdown.raw,
                             host_factor=slowdown.host_factor, ceilings=ceilings)
        win = v.speedup > 1.0 and v.significant
        if slowed > cfg.slowed_reference_reject and win:
            # A reject must not rest on a trusted time from another moment: a reference still slow
            # alone now means a busy host, not the candidate.
            if alone_now is None:
                alone_now = self.reference_alone(task)
            stage.details["reference_vs_trusted_now"] = verdict_slowdown(v, alone_now).ratio
            slowed = min(slowed, stage.details["reference_vs_trusted_now"])
            if slowed > cfg.slowed_reference_reject and control:
                # Nor on unlike measurements (the control, below), measured now. A control measured while the
                # host was busy reads slow too (on a loaded 2-core host, 6x for a moment) and would excuse a
                # candidate that slows the reference 10x: a reject the control overturns is ruled against the
                # faster of two.
                slowed = self._against_control(task, v, stage, cfg, slowed, fresh=True, tries=2)
        if slowed > cfg.slowed_reference_flag and control and "reference_vs_control" not in stage.details:
            # Neither a reject nor the flag may rest on unlike measurements: alone, the reference runs in a
            # bare loop, back to back; next to a candidate, in rounds paced by the judge's requests and spot
            # checks, which a busy host slows more (honest CPU verdicts read 1.2-2.7x, and 4.9x under CI's
            # load), and a short call after a wait runs slower (on an H200, torch.matmul 128x1024x128 took
            # 34 us back to back and 77 us after a 200 us sleep; 37 of 43 honest verdicts under 0.1 ms were
            # flagged). The reference timed next to itself by that same protocol is the control: for the
            # flag, a recent one will do.
            slowed = self._against_control(task, v, stage, cfg, slowed, fresh=False)
        stage.details["reference_slowdown"] = slowed
        if slowed > cfg.slowed_reference_flag:
            host = f" ({slowdown.raw:.2f}x, {slowdown.host_factor:.2f}x of it the host's speed)" if slowdown.host_factor != 1.0 else ""
            v.flags.append(Flag("slowed_reference", f"the reference ran {slowed:.2f}x slower next to the candidate than alone{host}"))
        if cand_ms < cfg.floor_margin * bytes_floor_ms:
            self._reject(v, stage, "memory_floor", f"{cand_ms:.4g} ms is below the memory floor of this task ({bytes_floor_ms:.4g} ms: "
                                   f"{ref.bytes / 1e6:.3g} MB at {ceilings['bandwidth_bytes_per_s'] / 1e9:.0f} GB/s): impossible, so not measured honestly")
        elif slowed > cfg.slowed_reference_reject and win:
            # A win that exists only because the reference ran slower next to the candidate. A speedup
            # inside the noise band claims no win: there, a slow reference is noise (a few samples, a busy
            # host), and the flag above says so.
            self._reject(v, stage, SLOWED_REFERENCE_REJECT, f"the reference ran {slowed:.2f}x slower next to the candidate than alone "
                                   f"({v.speedup:.2f}x measured, {v.speedup / slowed:.2f}x against the trusted time): the candidate slows the reference")
        else:
            if cand_ms < flop_floor_ms:
                v.flags.append(Flag("below_flop_floor", f"{cand_ms:.4g} ms is below the reference's FLOP floor ({flop_floor_ms:.4g} ms): an algebraic shortcut, or a hack"))
            clocks = v.env.get("clocks", {})
            b, e = clocks.get("before", {}).get("sm_clock_mhz"), clocks.get("after", {}).get("sm_clock_mhz")
            if b and e and abs(b - e) > 0.15 * max(b, e):
                v.flags.append(Flag("clock_drift", f"SM clock moved from {b} to {e} MHz during timing"))
            if ref.trusted.rel_spread > 0.05:
                v.flags.append(Flag("noisy_timing", "the reference timed alone in its trusted worker (the audit's check, not the "
                                                    f"times above) scattered: {ref.trusted.spread_words()}"))
        stage.seconds += time.perf_counter() - t0
        if v.status is Status.CORRECT:
            v.roofline = roof
            band = f" (noise band {v.speedup_band[0]:.2f}-{v.speedup_band[1]:.2f})" if v.speedup_band else ""
            v.message = f"correct; {v.speedup:.2f}x{band}" + ("" if v.significant else ", within noise: no speedup")
            if v.significant and v.effective_speedup != v.speedup:
                v.message += f", counted as {v.effective_speedup:.2f}x under the rule on library calls ({LOW_COVERAGE})"

    def _against_control(self, task: Task, v: Verdict, stage: StageResult, cfg: JudgeConfig, slowed: float,
                         fresh: bool, tries: int = 1) -> float:
        """The slowdown `slowed`, or the reference next to the candidate against the control where that is
        smaller: against the control's reference in the same slot (`reference_vs_control`), and in the
        candidate's own slot (`reference_vs_control_first`); a failed control leaves it as it was. With
        `tries` 2, a second control is measured where the first brings the slowdown to the reject threshold
        or below, and the faster control (the larger ratios) is kept (`controls`: how many were measured)."""
        kept: tuple[float, float] | None = None
        for n in range(1, tries + 1):
            controlled = self.reference_control(task, cfg, fresh)
            if controlled is None:
                break
            stage.details["controls"] = n
            # A call of another kind right before a short one slows it (on an H100, torch.matmul at 60 us ran
            # 1.1-1.3x slower after a Triton kernel or a copy than after itself). In the control the reference's
            # slot follows the reference; next to a candidate it follows the candidate. The first slot follows the
            # judge's own input copies in both: the reference there is timed where the candidate was, and no
            # candidate comes near it.
            ratios = (verdict_slowdown(v, controlled.second).ratio, verdict_slowdown(v, controlled.first).ratio)
            if kept is None or min(ratios) > min(kept):
                kept = ratios
            if min(slowed, *kept) > cfg.slowed_reference_reject:
                break
        if kept is None:
            return slowed
        stage.details["reference_vs_control"], stage.details["reference_vs_control_first"] = kept
        return min(slowed, *kept)

    @staticmethod
    def _reject(v: Verdict, stage: StageResult, kind: str, message: str) -> None:
        stage.ok = False
        stage.message = message
        stage.details["reject"] = kind
        v.status, v.message = Status.HACK_DETECTED, message
