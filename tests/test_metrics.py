from __future__ import annotations

import dataclasses
import math

import pytest
from rich.console import Console

from kernelcraft.judge import Status, Verdict
from kernelcraft.report import (EAGER, TaskOutcome, baseline_label, baseline_ratios, judge_error_cause, not_judged_text, status_text,
                                summarize, summarize_by_level, summarize_per_device, summary_table)
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


H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"


def test_two_devices_in_one_level_are_summarized_apart() -> None:
    outcomes = [TaskOutcome("a", 1, True, 2.0, device_name=H100), TaskOutcome("b", 1, True, 8.0, device_name=H100),
                TaskOutcome("c", 1, False, device_name=H100), TaskOutcome("d", 1, True, 3.0, device_name=H200),
                TaskOutcome("e", 1, False),  # missing: no device; counts once, on the level's most common device
                TaskOutcome("f", 2, True, 1.5, device_name=H200)]
    out = summarize_by_level(outcomes)
    assert [(s.label, s.device_name) for s in out] == [("level 1", H100), ("level 1", H200), ("level 2", H200),
                                                       ("all", H100), ("all", H200)]
    h100, h200 = out[0], out[1]
    assert (h100.total, h100.judged, h100.correct) == (4, 4, 2) and (h200.total, h200.correct) == (1, 1)
    assert h100.geomean == pytest.approx(4.0) and h200.geomean == pytest.approx(3.0)  # never sqrt(2*8*3) together
    assert h100.fast_p[1.0] == pytest.approx(2 / 4) and h200.fast_p[1.0] == 1.0
    all_h100, all_h200 = out[3], out[4]
    assert (all_h100.total, all_h200.total) == (4, 2) and all_h200.geomean == pytest.approx(math.sqrt(3.0 * 1.5))
    assert out[0].to_dict()["device_name"] == H100


def test_a_level_without_any_device_goes_to_the_most_common_of_all() -> None:
    outcomes = [TaskOutcome("a", 1, True, 2.0, device_name=H100), TaskOutcome("b", 1, True, 2.0, device_name=H200),
                TaskOutcome("c", 1, True, 2.0, device_name=H200), TaskOutcome("d", 2, False)]
    out = summarize_by_level(outcomes)
    assert [(s.label, s.device_name, s.total) for s in out] == [("level 1", H100, 1), ("level 1", H200, 2),
                                                                ("level 2", H200, 1), ("all", H100, 1), ("all", H200, 3)]


def test_one_device_summarizes_as_without_device_names() -> None:
    plain = [TaskOutcome("a", 1, True, 2.0, {COMPILE: 0.5}), TaskOutcome("b", 1, True, 0.7), TaskOutcome("c", 1, False),
             TaskOutcome("d", 2, True, 1.3), TaskOutcome("e", 2, False, judge_error="disk full")]
    named = [dataclasses.replace(o, device_name=H100) if o.task_key != "c" else o for o in plain]  # c: missing, no device
    before, after = summarize_by_level(plain), summarize_by_level(named)
    assert [s.label for s in after] == ["level 1", "level 2", "all"] and {s.device_name for s in after} == {H100}
    assert [{**s.to_dict(), "device_name": ""} for s in after] == [s.to_dict() for s in before]
    assert after[2] == dataclasses.replace(summarize("all", plain), device_name=H100)


def test_the_console_summary_has_a_device_column_only_for_several_devices() -> None:
    def text(outcomes: list[TaskOutcome]) -> tuple[str, str]:
        """The table as text, and its header line."""
        console = Console(record=True, width=250)
        console.print(summary_table(summarize_by_level(outcomes)))
        out = console.export_text()
        return out, next(line for line in out.splitlines() if "against" in line and "fast_1" in line)

    one, header = text([TaskOutcome("a", 1, True, 2.0, device_name=H100), TaskOutcome("b", 1, False)])
    assert "device" not in header and H100 not in one
    several, header = text([TaskOutcome("a", 1, True, 2.0, device_name=H100), TaskOutcome("b", 1, True, 3.0, device_name=H200),
                            TaskOutcome("c", 1, False, judge_error="disk full", device_name=H200)])
    assert "device" in header and H100 in several and H200 in several
    assert f"level 1 on {H200}: not judged: 1 (disk full)" in several


def test_a_runs_headline_is_its_most_used_device_and_the_others_come_apart() -> None:
    outcomes = [TaskOutcome("a", 1, True, 2.0, device_name=H200), TaskOutcome("b", 1, True, 4.0, device_name=H100),
                TaskOutcome("c", 2, True, 8.0, device_name=H100), TaskOutcome("d", 2, False)]
    head, *rest = summarize_per_device("run", outcomes)
    assert (head.device_name, head.total, head.correct, head.geomean) == (H100, 3, 2, pytest.approx(32 ** 0.5))
    assert [(s.device_name, s.total, s.geomean) for s in rest] == [(H200, 1, 2.0)]
    assert [s.device_name for s in summarize_per_device("run", [TaskOutcome("e", 1, False)])] == [""]


def test_an_outcome_keeps_its_verdicts_device_name() -> None:
    env = {"device_name": H200}
    fast = Verdict(status=Status.CORRECT, task="t", device="cuda", speedup=3.0, significant=True, env=env)
    wrong = Verdict(status=Status.INCORRECT, task="t", device="cuda", env=env)
    lost = Verdict(status=Status.JUDGE_ERROR, task="t", device="cuda", message="lost", env=env)
    assert {TaskOutcome.of_verdict("t", 1, v, {}).device_name for v in (fast, wrong, lost)} == {H200}
