from __future__ import annotations

import math

import pytest
from rich.console import Console

from kernelcraft.judge import Status, Verdict
from kernelcraft.report import (EAGER, TaskOutcome, baseline_label, baseline_ratios, judge_error_cause, not_judged_text, status_text,
                                summarize, summarize_by_level, summary_table)
from kernelcraft.store import Baseline

DEFAULT, COMPILE = "eager_default", "compile_default"


def test_fast_p_counts_all_tasks_and_missing_ones_fail() -> None:
    outcomes = [
        TaskOutcome("a", 1, True, 2.0), TaskOutcome("b", 1, True, 0.5), TaskOutcome("c", 1, True, 1.0),
        TaskOutcome("d", 1, False), TaskOutcome("e", 1, False),
    ]
    s = summarize("level 1", outcomes)
    assert s.correct == 3 and s.total == 5
    assert s.fast_p[0.0] == pytest.approx(3 / 5)
    assert s.fast_p[1.0] == pytest.approx(1 / 5)  # strictly faster than the reference
    assert s.fast_p[2.0] == 0.0
    assert s.geomean == pytest.approx(math.exp((math.log(2) + math.log(0.5) + 0) / 3))
    assert s.median == 1.0
    assert s.win_rate == pytest.approx(1 / 3)


def test_against_another_baseline_a_correct_speedup_is_scaled_by_the_recorded_ratio() -> None:
    outcomes = [TaskOutcome("a", 1, True, 2.0, {COMPILE: 0.5, DEFAULT: 0.9}), TaskOutcome("b", 1, True, 3.0, {DEFAULT: 1.0}),
                TaskOutcome("c", 1, False), TaskOutcome("d", 1, True, 1.2, {COMPILE: 1.5})]
    s = summarize("x", outcomes)
    assert outcomes[0].speedup_vs(COMPILE) == 1.0 and outcomes[0].speedup_vs(EAGER) == 2.0
    assert outcomes[1].speedup_vs(COMPILE) is None and outcomes[2].speedup_vs(EAGER) is None
    assert [b.kind for b in s.baselines] == [EAGER, DEFAULT, COMPILE]  # the report's order; TunableOp not recorded
    compile_ = s.vs(COMPILE)
    # b has no compile baseline: left out of the denominator; c failed: not fast against any baseline
    assert (compile_.tasks, compile_.correct, compile_.missing) == (3, 2, 1)
    assert compile_.fast_p[0.5] == pytest.approx(2 / 3) and compile_.fast_p[1.0] == pytest.approx(1 / 3)
    assert compile_.geomean == pytest.approx(math.sqrt(1.0 * 1.8)) and compile_.win_rate == 0.5
    assert compile_.label == "torch.compile (PyTorch defaults)"
    assert s.vs(EAGER).tasks == 4 and s.fast_p[1.0] == pytest.approx(3 / 4)
    assert s.vs(DEFAULT).fast_p[1.0] == pytest.approx(2 / 3)  # 1.8x and 3.0x of a, b and c


def test_a_baseline_no_correct_task_has_recorded_is_not_summarized() -> None:
    s = summarize("x", [TaskOutcome("a", 1, True, 2.0), TaskOutcome("b", 1, False, None, {COMPILE: 0.5})])
    assert [b.kind for b in s.baselines] == [EAGER] and s.vs(COMPILE) is None


def test_baseline_ratios_keep_the_legacy_compile_apart_and_need_eager() -> None:
    def b(kind: str, ms: float) -> Baseline:
        return Baseline("t", "gpu", kind, ms, ms, ms)

    recorded = {k: b(k, ms) for k, ms in ((EAGER, 2.0), (DEFAULT, 1.0), (COMPILE, 0.5), ("compile", 0.8), ("eager@server", 3.0))}
    assert baseline_ratios(recorded) == {DEFAULT: 0.5, COMPILE: 0.25, "compile": 0.4}
    assert baseline_ratios({COMPILE: b(COMPILE, 1.0)}) == {}
    s = summarize("x", [TaskOutcome("a", 1, True, 2.0, baseline_ratios(recorded))])
    assert [x.label for x in s.baselines] == ["eager (strict)", "eager (PyTorch defaults)", "torch.compile (PyTorch defaults)",
                                              "torch.compile (strict, legacy)"]
    assert baseline_label("eager_default@server") == "eager (PyTorch defaults) @server"


def test_judge_errors_leave_every_denominator_and_are_counted_by_cause() -> None:
    outcomes = [TaskOutcome("a", 1, True, 2.0, {COMPILE: 1.0}), TaskOutcome("b", 1, False),
                TaskOutcome("c", 1, False, judge_error="disk full"), TaskOutcome("d", 1, False, judge_error="disk full"),
                TaskOutcome("e", 1, False, judge_error="worker could not start")]
    s = summarize("x", outcomes)
    assert (s.total, s.judged, s.correct) == (5, 2, 1)
    assert s.fast_p[1.0] == 0.5 and s.vs(COMPILE).fast_p[1.0] == 0.5  # a of a and b: c, d and e are not failures
    assert s.not_judged == {"disk full": 2, "worker could not start": 1}
    assert not_judged_text(s.not_judged) == "not judged: 3 (disk full: 2; worker could not start: 1)"
    assert not_judged_text({"disk full": 2}) == "not judged: 2 (disk full)" and not_judged_text({}) == ""
    everything_lost = summarize("y", outcomes[2:])
    assert everything_lost.judged == 0 and set(everything_lost.fast_p.values()) == {0.0} and everything_lost.geomean is None


def test_an_outcome_of_one_verdict() -> None:
    recorded = {EAGER: Baseline("t", "gpu", EAGER, 2.0, 2.0, 2.0), COMPILE: Baseline("t", "gpu", COMPILE, 1.0, 1.0, 1.0)}
    lost = Verdict(status=Status.JUDGE_ERROR, task="t", device="cuda", message="no space left on device\n(details)")
    assert TaskOutcome.of_verdict("t", 1, lost, recorded) == TaskOutcome("t", 1, False, judge_error="no space left on device")
    wrong = Verdict(status=Status.INCORRECT, task="t", device="cuda", speedup=None)
    assert TaskOutcome.of_verdict("t", 1, wrong, recorded) == TaskOutcome("t", 1, False)
    fast = Verdict(status=Status.CORRECT, task="t", device="cuda", speedup=3.0, significant=True)
    assert TaskOutcome.of_verdict("t", 1, fast, recorded).speedup_vs(COMPILE) == 1.5
    assert judge_error_cause("  ") == "unknown cause"


def test_the_console_summary_names_each_baseline_and_what_was_not_judged() -> None:
    outcomes = [TaskOutcome("a", 1, True, 2.0, {COMPILE: 0.5}), TaskOutcome("b", 1, True, 1.5),
                TaskOutcome("c", 1, False, judge_error="disk full")]
    console = Console(record=True, width=250)
    console.print(summary_table(summarize_by_level(outcomes)))
    text = console.export_text()
    assert "eager (strict)" in text and "torch.compile (PyTorch defaults)" in text
    assert "torch.compile (PyTorch defaults) not recorded for 1 correct task" in text
    assert "not judged: 1 (disk full)" in text
    assert status_text("judge_error").style != status_text("incorrect").style != ""


def test_summaries_per_level_and_overall() -> None:
    out = summarize_by_level([TaskOutcome("a", 1, True, 2.0), TaskOutcome("b", 2, False)])
    assert [s.label for s in out] == ["level 1", "level 2", "all"]
