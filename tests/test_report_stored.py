"""The stored-verdict reports (kernelcraft.report.stored) on a small workspace this test builds: two template runs
that judged the same kernels, with known timings."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kernelcraft.judge import StageResult, Status, TimingStats, Verdict
from kernelcraft.report.stored import band_calibration, template_runs, time_split, time_split_table
from kernelcraft.store import Store
from kernelcraft.tasks import Shape, hgemm_task

SHORT, LONG = hgemm_task(Shape(64, 64, 64)), hgemm_task(Shape(4096, 4096, 4096))


def _verdict(task_key: str, source_hash: str, ref_ms: float, cand_ms: float, *, probe_ms: float = 0.02,
             jitter: float = 0.01, host: tuple[float, float] = (0.01, 0.02)) -> Verdict:
    """A correct verdict with 20 paired rounds around the given medians."""
    ref = [ref_ms * (1 + jitter * math.sin(i + 1000 * probe_ms)) for i in range(20)]  # each run its own rounds
    cand = [cand_ms * (1 + jitter * math.cos(i)) for i in range(20)]
    speedup = ref_ms / cand_ms
    return Verdict(status=Status.CORRECT, task=task_key, device="cuda", speedup=speedup,
                   speedup_band=(speedup * 0.98, speedup * 1.02), significant=abs(speedup - 1) > 0.02,
                   reference=TimingStats.of(ref, probe_ms=probe_ms), candidate=TimingStats.of(cand),
                   candidate_hash=source_hash, env={"judge_version": "11"},
                   stages=[StageResult("timing", True, details={"host_ms": {"reference": host[0], "candidate": host[1]}})])


def _template_run(store: Store, timings: dict[str, tuple[float, float, float]], probe_ms: float) -> str:
    """One template run: per task, a coarse and a fine verdict of one kernel source ('KERNEL = task key')."""
    run = store.start_run("optimize", {"search": {"strategy": "template"}})
    store.add_run_tasks(run, [SHORT, LONG])
    for task in (SHORT, LONG):
        source = f"KERNEL = {task.key!r}\n"
        ref_ms, coarse_ms, fine_ms = timings[task.key]
        for turn, (stage, cand_ms) in enumerate((("coarse", coarse_ms), ("fine", fine_ms))):
            v = _verdict(task.key, f"h-{task.key}", ref_ms, cand_ms, probe_ms=probe_ms)
            vid = store.record_verdict(task, source, v, run_id=run)
            store.record_attempt(run, task.key, 0, turn, status="correct", verdict_id=vid, speedup=v.speedup,
                                 meta={"stage": stage, "name": "k0"})
    store.finish_run(run)
    return run


@pytest.fixture()
def workspace(tmp_path: Path) -> Path:
    with Store(tmp_path) as store:
        store.start_run("optimize", {"search": {"strategy": "refine"}})  # not a template run: left out
        _template_run(store, {SHORT.key: (0.05, 0.048, 0.050), LONG.key: (2.0, 1.9, 1.8)}, probe_ms=0.02)
        _template_run(store, {SHORT.key: (0.05, 0.052, 0.040), LONG.key: (2.0, 2.0, 1.8)}, probe_ms=0.04)
    return tmp_path


def test_band_calibration_scores_twins_and_runs_apart(workspace: Path) -> None:
    with Store(workspace) as store:
        runs = template_runs(store)
        assert len(runs) == 2
        cal = band_calibration(store, runs)
    assert cal is not None
    by_label = {s.label: s for s in cal.scores}
    # Two runs x two tasks give four coarse/fine twins; across runs, one pair per task.
    assert by_label["within a run (coarse, fine), short"].n == 2
    assert by_label["within a run (coarse, fine), long"].n == 2
    assert by_label["across runs (fine, fine), short"].n == 1
    long_pair = by_label["across runs (fine, fine), long"]
    assert long_pair.diffs == [pytest.approx(0.0, abs=1e-12)]  # the same 1.8 ms both times
    assert long_pair.band_holds == 2 and long_pair.wins == 2 and long_pair.wins_reproduced == 2
    short_pair = by_label["across runs (fine, fine), short"]
    assert short_pair.diffs == [pytest.approx(math.log(0.05 / 0.050) - math.log(0.05 / 0.040))]
    assert short_pair.band_holds == 0  # 1.00x against 1.25x: neither band holds the other
    assert cal.slope_pairs == 1 and math.isnan(cal.host_slope)  # too few pairs for a slope
    assert "across runs (fine, fine), long" in cal.table()


def test_band_calibration_without_fine_verdicts_is_none(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        assert band_calibration(store, template_runs(store)) is None


def test_time_split_gives_each_family_and_length_its_medians(workspace: Path) -> None:
    with Store(workspace) as store:
        rows = time_split(store, template_runs(store))
    assert {(r.family, r.length) for r in rows} == {("other", "short"), ("other", "long")}
    first = [r for r in rows if r.run_id == rows[0].run_id]
    long_row = next(r for r in first if r.length == "long")
    assert long_row.verdicts == 2
    assert long_row.total_us == pytest.approx(((1.9 - 2.0) + (1.8 - 2.0)) / 2 * 1e3, rel=0.02)  # medians of jittered rounds
    assert long_row.host_us == pytest.approx(10.0)
    assert "other" in time_split_table(rows)
