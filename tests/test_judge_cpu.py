"""The judge end to end on CPU: honest candidates pass with a speedup, broken ones get the status
that says what broke. (Exploits are in tests/redteam.)"""

from __future__ import annotations

import os
import re
import uuid
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kernelcraft.judge import STAGES, Job, Judge, LocalPool, Status, TaskRunError
from kernelcraft.judge import builds
from kernelcraft.judge.worker.buildcache import BuildError, BuildRecorder
from kernelcraft.judge.builds import BuildBudget, BuildService
from kernelcraft.judge.sandbox import live_worker_pids
from kernelcraft.judge.slowdown import overstatement, verdict_slowdown
from kernelcraft.judge.verdict import TimingStats
from kernelcraft.tasks import load_task_file, resolve_task, task_from_source

from .conftest import CANDIDATES, FAST
from .redteam.cases import CANDIDATES_DIR, TASKS_DIR

TRITON = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def leaky_clamp_kernel(x_ptr, o_ptr, n, slope, low, high, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.where(x > 0, x, x * SLOPE_EXPR)
    y = tl.minimum(tl.maximum(y, low), high)
    tl.store(o_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, slope, low, high):
        super().__init__()
        INIT_EXTRA
        self.slope, self.low, self.high = slope, low, high

    def forward(self, x):
        FORWARD_EXTRA
        out = torch.empty_like(x)
        n = x.numel()
        leaky_clamp_kernel[(triton.cdiv(n, 4096),)](x, out, n, self.slope, self.low, self.high, BLOCK=4096)
        return out
'''


def triton_candidate(slope: str = "slope", init: str = "pass", forward: str = "pass") -> str:
    return TRITON.replace("SLOPE_EXPR", slope).replace("INIT_EXTRA", init).replace("FORWARD_EXTRA", forward)


@pytest.fixture(scope="module")
def small_task():
    return resolve_task("leaky_relu_clamp").with_sizes("cpu", {"N": 65536})


def test_honest_cpp_candidate_is_correct_and_timed(cpu_judge: Judge) -> None:
    task = resolve_task("leaky_relu_clamp")
    told: list[str] = []
    v = cpu_judge.evaluate(task, (CANDIDATES / "cpu" / "leaky_relu_clamp.py").read_text(), on_stage=told.append)
    assert v.status is Status.CORRECT, v.message
    assert [s.name for s in v.stages] == list(STAGES)
    # the progress display's stages, in the order they begin (a build, when the worker asks for one, inside the load)
    assert [s for s in dict.fromkeys(told) if s != "build"] == ["setup", "load", "correctness", "timing", "profile", "audit"]
    assert v.speedup is not None and v.speedup > 0
    assert v.speedup_band[0] <= v.speedup <= v.speedup_band[1]
    assert v.coverage is not None and v.coverage > 0.5
    assert v.errors["max_abs"] <= 1e-4
    timing = v.stage("timing").details
    assert timing["spot_checks"] >= 1
    # On the CPU a call's time is all host time: the host part's median is the sample median.
    assert timing["host_ms"]["candidate"] == pytest.approx(v.candidate.median_ms)
    assert timing["host_ms"]["reference"] == pytest.approx(v.reference.median_ms)
    assert v.trusted_reference is not None and v.env["torch"]
    audit = v.stage("audit").details
    assert audit["bytes"] == 2 * 4 * 4194304 and audit["bytes_floor_ms"] > 0


def test_a_floor_reject_measures_the_ceilings_again_first(cache_dir: Path) -> None:
    """A ceiling measured low once (a noisy neighbour) must not turn an honest kernel into a hack."""
    judge = Judge("cpu", cache_dir=cache_dir, config=FAST)
    judge.device_ceilings.known = {**judge.ceilings(), "bandwidth_bytes_per_s": 1e6}  # 1 MB/s: nothing is that slow
    v = judge.evaluate(resolve_task("leaky_relu_clamp"), (CANDIDATES / "cpu" / "leaky_relu_clamp.py").read_text())
    assert v.status is Status.CORRECT, v.message
    assert v.stage("audit").details["ceilings"]["bandwidth_bytes_per_s"] > 1e6


class _ScaledTrustedTime(Judge):
    """A judge whose trusted reference time is `trusted_scale` times what it measures."""

    trusted_scale = 1.0

    def reference_future(self, task, budgeted=True):
        measured, scaled = super().reference_future(task, budgeted), Future()

        def swap(_: Future) -> None:
            ref, trusted = measured.result(), Future()
            ref.trusted_future.add_done_callback(
                lambda t: trusted.set_result(TimingStats.of([s * self.trusted_scale for s in t.result().samples_ms])))
            scaled.set_result(replace(ref, trusted_future=trusted))

        measured.add_done_callback(swap)
        return scaled


class _QuietTrustedTime(_ScaledTrustedTime):
    """A judge whose trusted reference time is a thousandth of what it measures: far below any time the
    reference takes next to a candidate, however busy the host is when each is measured."""

    trusted_scale = 1e-3


def test_a_slowed_reference_reject_times_the_reference_alone_again_first(cache_dir: Path) -> None:
    """A trusted time from a quieter moment (a busy CI host) must not turn an honest win into a hack:
    the reference is timed alone again, the candidate's processes gone, before a reject."""
    v = _QuietTrustedTime("cpu", cache_dir=cache_dir, config=FAST).evaluate(
        resolve_task("leaky_relu_clamp"), (CANDIDATES / "cpu" / "leaky_relu_clamp.py").read_text())
    assert v.status is Status.CORRECT, v.message
    audit = v.stage("audit").details
    assert audit["reference_vs_trusted"] > 2.0
    # (on a loaded host the reference alone can read quiet again: then the control decides)
    ruled = min(audit["reference_vs_trusted_now"], audit.get("reference_vs_control", 1e9),
                audit.get("reference_vs_control_first", 1e9))
    assert ruled < 2.0
    assert audit["reference_slowdown"] == ruled


class _CountedControls(_QuietTrustedTime):
    """_QuietTrustedTime that counts its controls (self-checks)."""

    controls = 0

    def self_check(self, task, config=None):
        self.controls += 1
        return super().self_check(task, config)


def test_the_slowed_reference_flag_holds_against_a_recent_control(cache_dir: Path) -> None:
    """A bare loop's time against the candidate's paced rounds must not cap an honest verdict's credit: the
    flag, like a reject, holds against the control, and a control of the last control_reuse_s seconds does."""
    # (no reject in reach: the flag alone is under test)
    judge = _CountedControls("cpu", cache_dir=cache_dir, config=FAST.with_overrides({"slowed_reference_reject": 1e9,
                                                                                      "control_reuse_s": 600.0}))
    task, source = resolve_task("leaky_relu_clamp"), (CANDIDATES / "cpu" / "leaky_relu_clamp.py").read_text()
    first, second = judge.evaluate(task, source), judge.evaluate(task, source)
    assert judge.controls == 1  # measured for the first, kept for the second
    for v in (first, second):
        assert v.status is Status.CORRECT, v.message
        audit = v.stage("audit").details
        assert audit["reference_vs_trusted"] > 100  # against the faked trusted time, a thousandfold
        assert audit["reference_slowdown"] == min(audit["reference_vs_control"], audit["reference_vs_control_first"]) < 100
        flagged = audit["reference_slowdown"] > FAST.slowed_reference_flag
        assert v.has_flag("slowed_reference") == flagged
        assert overstatement(v) == (max(1.0, audit["reference_slowdown"]) if flagged else 1.0)


class _FastSecondSlotControl(_QuietTrustedTime):
    """_QuietTrustedTime whose control's reference runs four times faster in the reference's slot of its rounds
    than in the candidate's, as a short call right after itself runs faster than after a call of another kind."""

    def self_check(self, task, config=None):
        v = super().self_check(task, config)
        # (without the host's part: both ratios are then the raw times', four times apart)
        v.candidate = TimingStats.of(v.candidate.samples_ms)
        v.reference = TimingStats.of([s / 4 for s in v.candidate.samples_ms])
        return v


def test_the_slowed_reference_is_ruled_against_the_control_in_the_candidates_own_slot(cache_dir: Path) -> None:
    """Next to a candidate, the reference follows the candidate's call; in the control it follows itself, which a
    short call gains from. The control's reference in the candidate's slot (after the judge's input copies, as the
    candidate) is timed where the candidate was: a slowdown that it explains is no flag, and caps no credit."""
    judge = _FastSecondSlotControl("cpu", cache_dir=cache_dir, config=FAST.with_overrides({"slowed_reference_reject": 1e9}))
    v = judge.evaluate(resolve_task("leaky_relu_clamp"), (CANDIDATES / "cpu" / "leaky_relu_clamp.py").read_text())
    assert v.status is Status.CORRECT, v.message
    audit = v.stage("audit").details
    assert audit["reference_vs_control"] == pytest.approx(4 * audit["reference_vs_control_first"])
    assert audit["reference_slowdown"] == audit["reference_vs_control_first"]
    flagged = audit["reference_slowdown"] > FAST.slowed_reference_flag
    assert v.has_flag("slowed_reference") == flagged
    assert overstatement(v) == (audit["reference_slowdown"] if flagged else 1.0)


class _SpikedControls(Judge):
    """A judge whose every other control (the first of each evaluation's two) reads 50 times slower, as one
    measured while a busy host slowed the reference's worker."""

    controls = 0

    def self_check(self, task, config=None):
        v = super().self_check(task, config)
        self.controls += 1
        if self.controls % 2:
            v.candidate = TimingStats.of([s * 50 for s in v.candidate.samples_ms])
            v.reference = TimingStats.of([s * 50 for s in v.reference.samples_ms])
        return v


def test_a_reject_overturned_by_a_slow_control_is_ruled_against_a_second(cache_dir: Path) -> None:
    """A control measured in a moment the host was busy must not excuse a candidate that slows the reference
    (the red team's torch.library re-registration of aten::relu, about 10x): where the control would overturn
    the reject, a second one is measured and the faster kept."""
    judge = _SpikedControls("cpu", cache_dir=cache_dir, config=FAST)
    v = judge.evaluate(load_task_file(TASKS_DIR / "relu.py"), (CANDIDATES_DIR / "04_slow_reference_dispatch.py").read_text(),
                       config=FAST.with_overrides({"static_checks": False}))
    assert v.status is Status.HACK_DETECTED, v.message
    audit = v.stage("audit").details
    assert audit["reject"] == "slowed_reference" and audit["controls"] == 2
    assert min(audit["reference_vs_control"], audit["reference_vs_control_first"]) > FAST.slowed_reference_reject


class _QuietAloneTimes(_QuietTrustedTime):
    """_QuietTrustedTime whose reference timed alone again is as quiet: a thousandth of what it measures.
    Against both, an honest win's reference looks slowed a thousandfold; only the control (the reference
    timed next to itself by the candidate's protocol) shows it is not."""

    def baseline(self, task, *args, **kwargs):
        return {name: TimingStats.of([s * self.trusted_scale for s in t.samples_ms])
                for name, t in super().baseline(task, *args, **kwargs).items()}


def test_a_slowed_reference_reject_must_hold_against_the_reference_next_to_itself(cache_dir: Path) -> None:
    """A bare loop's quiet times (the trusted time, the reference alone again) against the candidate's rounds
    must not turn an honest win into a hack: the reference judged as the candidate, now, is the control."""
    v = _QuietAloneTimes("cpu", cache_dir=cache_dir, config=FAST).evaluate(
        resolve_task("leaky_relu_clamp"), (CANDIDATES / "cpu" / "leaky_relu_clamp.py").read_text())
    assert v.status is Status.CORRECT, v.message
    audit = v.stage("audit").details
    assert audit["reference_vs_trusted"] > 2.0 and audit["reference_vs_trusted_now"] > 2.0
    assert audit["reference_vs_control"] < 2.0


class _BusyFirstEvaluation(Judge):
    """A judge whose first evaluation of a candidate saw the reference a thousand times slower in both of its
    measurements (a host busy for a second or two), and neither the reference alone nor the control
    after them: a reject that only a second evaluation refutes."""

    evaluations = 0

    def _evaluate(self, task, source, cfg, self_check, *args, **kwargs):
        self.evaluations += not self_check
        return super()._evaluate(task, source, cfg, self_check, *args, **kwargs)

    def _time(self, run, *args):
        stage = super()._time(run, *args)
        v = run.v
        if self.evaluations == 1 and not run.self_check:
            v.reference = TimingStats.of([s * 1000 for s in v.reference.samples_ms])
            v.speedup, v.significant = v.reference.median_ms / v.candidate.median_ms, True
        return stage


def test_a_slowed_reference_reject_is_judged_again(cache_dir: Path) -> None:
    # (a reject threshold of 20: the faked thousandfold rejects, and the second evaluation, the only real one,
    # cannot be rejected by CI's load, which has read up to 8.6x)
    judge = _BusyFirstEvaluation("cpu", cache_dir=cache_dir, config=FAST.with_overrides({"slowed_reference_reject": 20.0}))
    v = judge.evaluate(resolve_task("leaky_relu_clamp"), (CANDIDATES / "cpu" / "leaky_relu_clamp.py").read_text())
    assert v.status is Status.CORRECT, v.message
    assert judge.evaluations == 2
    first = next(f.message for f in v.flags if f.code == "noisy_timing" and "judged twice" in f.message)
    assert "slows the reference" in first


class _BusyOnce(Judge):
    """A judge whose first measurement of a candidate (not of a self-check, the audit's control) saw the
    reference a hundred times slower than it ran (a moment of load on the reference's side): a large,
    significant win over a slowed reference.
    A hundred, not ten: the real times under it vary 2-3x between measurements on a busy 2-core host."""

    measurements = 0
    slowed = 100.0

    def _time(self, run, *args):
        stage = super()._time(run, *args)
        if run.self_check:  # the audit's control (a busy CI host can bring a reject that far)
            return stage
        v = run.v
        self.measurements += 1
        if self.measurements == 1:
            v.reference = TimingStats.of([s * self.slowed for s in v.reference.samples_ms])
            v.speedup, v.significant = v.speedup * self.slowed, True
        return stage


class _BusyOnceAfterABusyTrustedTime(_BusyOnce, _ScaledTrustedTime):
    """_BusyOnce whose trusted reference time was taken while the host was busy: sixty times what the
    reference takes. Against it, the first measurement's slowed reference looks like less than the
    reject threshold; only the audit's fresh alone time shows it (a busy CI host did this)."""

    trusted_scale = 60.0


@pytest.mark.parametrize("judge_class", [_BusyOnce, _BusyOnceAfterABusyTrustedTime], ids=["trusted", "busy_trusted"])
def test_a_reference_slowed_for_one_measurement_is_timed_again_before_a_reject(cache_dir: Path, judge_class: type) -> None:
    # The timing stage's retake is under test, not the audit's reject: with no reject threshold in reach, a busy
    # CI host cannot bring a control and a second evaluation into the count (the large win alone is retaken).
    cfg = FAST.with_overrides({"slowed_reference_reject": 1000.0})
    judge = judge_class("cpu", cache_dir=cache_dir, config=cfg)
    v = judge.evaluate(resolve_task("leaky_relu_clamp"), (CANDIDATES / "cpu" / "leaky_relu_clamp.py").read_text())
    assert v.status is Status.CORRECT, v.message
    assert judge.measurements == 2 and [s.name for s in v.stages] == list(STAGES)
    retimed = v.stage("timing").details["retimed"]
    assert retimed["speedup"] > FAST.timing.remeasure_above
    # the audit rules on the second measurement, not the first
    assert v.stage("audit").details["reference_vs_trusted"] == pytest.approx(verdict_slowdown(v, v.trusted_reference).ratio)
    assert v.speedup < retimed["speedup"] / 10
    # (a busy machine can add a flag of its own first: a large win measured twice that did not reproduce)
    assert any("timed again" in f.message for f in v.flags if f.code == "noisy_timing"), v.flags


class _StableLargeWin(Judge):
    """A judge whose every measurement sees the candidate four times faster than it ran: a large win
    that reproduces, as an honest fused kernel's does. Counts the measurements."""

    measured = 0

    def _measure(self, *args):
        a, ref_t, cand_t = super()._measure(*args)
        self.measured += 1
        return a, ref_t, TimingStats.of([s / 4 for s in cand_t.samples_ms])


def test_a_large_win_is_measured_twice(cache_dir: Path) -> None:
    # (no floor audit: the faked times may pass the bandwidth floor; no re-timing for a scattered
    # reference, which a busy host would add; no flag or reject threshold in reach, which would add a control's
    # and a second evaluation's measurements)
    cfg = FAST.with_overrides({"floor_margin": 0.0, "slowed_reference_flag": 1000.0, "slowed_reference_reject": 1000.0,
                               "timing": {"retime_spread_above": 1e9}})
    judge = _StableLargeWin("cpu", cache_dir=cache_dir, config=cfg)
    v = judge.evaluate(resolve_task("leaky_relu_clamp"), (CANDIDATES / "cpu" / "leaky_relu_clamp.py").read_text())
    assert v.status is Status.CORRECT, v.message
    assert v.speedup > FAST.timing.remeasure_above and "retimed" in v.stage("timing").details
    assert judge.measured == 2  # once, and once again before the audit (it was four times: twice in each)


class _ScatteredOnce(Judge):
    """A judge whose first measurement saw every other reference sample ten times slower (a host
    busy in bursts): a band of about +-80% that would call any speedup none."""

    measurements = 0
    first_spread = 0.0

    def _measure(self, *args):
        a, ref_t, cand_t = super()._measure(*args)
        self.measurements += 1
        if self.measurements == 1:
            ref_t = TimingStats.of([s * (10 if i % 2 else 1) for i, s in enumerate(ref_t.samples_ms)])
            self.first_spread = ref_t.rel_spread
        return a, ref_t, cand_t


def test_a_measurement_on_a_busy_host_is_taken_again_and_the_quietest_kept(cache_dir: Path) -> None:
    # (no reject threshold in reach: a second evaluation, which a busy CI host could bring, would not be the one faked)
    judge = _ScatteredOnce("cpu", cache_dir=cache_dir, config=FAST.with_overrides({"slowed_reference_reject": 1000.0}))
    v = judge.evaluate(resolve_task("leaky_relu_clamp"), (CANDIDATES / "cpu" / "leaky_relu_clamp.py").read_text())
    assert v.status is Status.CORRECT, v.message
    assert judge.measurements >= 2 and [s.name for s in v.stages] == list(STAGES)
    assert judge.first_spread > FAST.timing.retime_spread_above and v.reference.rel_spread < judge.first_spread
    assert v.stage("timing").details["noise"] == max(v.reference.rel_spread, FAST.timing.min_noise)
    flag = next(f.message for f in v.flags if f.code == "noisy_timing" and "timed again" in f.message)
    # its numbers are those of the quartiles printed beside it: the first measurement's spread, then the kept one's
    assert f"(±{judge.first_spread:.1%} of its median)" in flag and flag.endswith(f"the quietest is kept: {v.reference.spread_words()}")


def test_honest_triton_candidate_is_correct_but_slower(cpu_judge: Judge, small_task) -> None:
    v = cpu_judge.evaluate(small_task, triton_candidate())
    assert v.status is Status.CORRECT, v.message
    assert v.speedup < 1.0  # Triton's interpreter is no match for eager PyTorch
    assert v.stage("load").details["kernel_names"] == ["leaky_clamp_kernel"]


def test_wrong_kernel_is_incorrect_with_the_worst_mismatch(cpu_judge: Judge, small_task) -> None:
    v = cpu_judge.evaluate(small_task, triton_candidate(slope="0.2"))
    assert v.status is Status.INCORRECT
    assert "seed 1/5" in v.message and "worst at index" in v.message
    assert v.stage("correctness").details["bad"] > 0
    # run once more on the same inputs: the same error, a kernel wrong every time, not a race
    assert v.message.endswith("; the same inputs again gave the same error")
    assert v.stage("correctness").details["same_inputs_again"]["bad"] == v.stage("correctness").details["bad"]
    assert "nondeterministic" not in {f.code for f in v.flags}


def test_an_output_that_changes_on_the_same_inputs_is_incorrect_and_flagged_nondeterministic(cpu_judge: Judge,
                                                                                           small_task) -> None:
    """Wrong on every other call, as a race is some of the time: the failing seed's inputs run again come out
    right, and the verdict says so (still incorrect: a kernel that is sometimes wrong is wrong)."""
    v = cpu_judge.evaluate(small_task, triton_candidate(init="self.calls = 0",
                                                        forward="self.calls += 1; x = x if self.calls % 2 else x * 1.5"))
    assert v.status is Status.INCORRECT
    assert "the same inputs again: within tolerance: the output changes from call to call" in v.message, v.message
    assert v.stage("correctness").details["same_inputs_again"] == {"ok": True}
    assert v.stage("correctness").details["bad"] > 0
    assert [f.code for f in v.flags if f.code == "nondeterministic"] == ["nondeterministic"]


def test_exception_in_constructor_is_load_failed_with_line(cpu_judge: Judge, small_task) -> None:
    v = cpu_judge.evaluate(small_task, triton_candidate(init="raise ValueError('bad init')"))
    assert v.status is Status.LOAD_FAILED
    assert "candidate.py:" in v.message and "bad init" in v.message


def test_exception_in_forward_is_runtime_error(cpu_judge: Judge, small_task) -> None:
    v = cpu_judge.evaluate(small_task, triton_candidate(forward="x = x.view(-1, 7, 3)"))
    assert v.status is Status.RUNTIME_ERROR
    assert "candidate.py:" in v.message


def test_compiler_errors_are_build_failed_and_trimmed(cpu_judge: Judge, small_task) -> None:
    src = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ext = load_inline(name="broken", cpp_sources=["torch::Tensor f(torch::Tensor x) { return x +; }"], functions=["f"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.f(x)
'''
    v = cpu_judge.evaluate(small_task, src)
    assert v.status is Status.BUILD_FAILED
    assert "error" in v.message and len(v.message.splitlines()) <= 25


def test_a_build_that_failed_fails_again_at_once_with_the_same_errors(cpu_judge: Judge, small_task) -> None:
    # a source of this run's own, so the build cache (kept between local test runs) has not seen it
    src = f'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ext = load_inline(name="broken", cpp_sources=["// {uuid.uuid4()}\\ntorch::Tensor f(torch::Tensor x) {{ return x +; }}"],
                  functions=["f"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.f(x)
'''
    first, again = cpu_judge.evaluate(small_task, src), cpu_judge.evaluate(small_task, src.replace("class", "# again\nclass"))
    assert first.status is again.status is Status.BUILD_FAILED
    assert "failed the same way before" not in first.message and "failed the same way before" in again.message
    assert again.message.startswith(first.message)


@pytest.mark.parametrize("log, kept", [
    ("main.cpp:2:47: error: expected primary-expression before '}' token", True),
    ("main.o: undefined reference to `kc_run'", True),
    ("nvcc error   : 'cicc' died due to signal 9 (Kill signal)", False),  # the compiler killed for memory
    ("main.cpp: fatal error: error writing to /tmp/cc.s: No space left on device", False),
])
def test_only_a_compilers_diagnostics_are_kept_as_a_failed_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 log: str, kept: bool) -> None:
    service = BuildService(tmp_path, "cpu", 0, 1, "")
    tries = []

    def builder(module, args, scratch, env, cache_dir, timeout, group, cpus, read=()):  # torch's error, as the builder leaves it
        tries.append(args)
        (scratch / "error.txt").write_text(f"Error building extension 'kc_x':\n{log}")
        return 1, 0.1

    monkeypatch.setattr(builds, "run_untrusted", builder)
    monkeypatch.setenv("KERNELCRAFT_PCH_DIR", "off")  # no header compile beside the stand-in builder
    recorder = BuildRecorder(tmp_path, os.geteuid(), "", lambda module, functions: None,
                             lambda arguments, arch: service.answer({"request": "build", "arguments": arguments,
                                                                     "arch_list": arch}, BuildBudget(60.0)))
    for _ in range(2):
        with pytest.raises(BuildError, match=re.escape(log.split(":")[-1].strip())):
            recorder.load_inline(name="x", cpp_sources=["int f();"])
    assert len(tries) == (1 if kept else 2)


def test_syntax_error_is_static_rejected_with_line(cpu_judge: Judge, small_task) -> None:
    v = cpu_judge.evaluate(small_task, "import torch\nclass ModelNew(torch.nn.Module):\n    def f(self:\n")
    assert v.status is Status.STATIC_REJECTED and "line 3" in v.message
    assert [s.name for s in v.stages] == ["static"]


def test_a_task_that_fails_to_import_names_its_line(cpu_judge: Judge) -> None:
    bad = task_from_source("import torch\nclass Model(torch.nn.Module):\n    pass\nx = 1 / 0\n"
                           "def get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n", "bad_task")
    with pytest.raises(TaskRunError, match=r"task.py:4: ZeroDivisionError"):
        cpu_judge.evaluate(bad, triton_candidate())


def test_timeouts_kill_the_worker(cpu_judge: Judge, small_task) -> None:
    cfg = FAST.with_overrides({"timeouts": {"correctness": 3}})
    v = cpu_judge.evaluate(small_task, triton_candidate(forward="while True:\n            pass"), config=cfg)
    assert v.status is Status.TIMEOUT and "correctness" in v.message


def test_speedup_inside_noise_is_reported_as_none(cpu_judge: Judge, small_task) -> None:
    v = cpu_judge.evaluate(small_task, triton_candidate())
    assert v.effective_speedup == (v.speedup if v.significant else 1.0)


def test_a_pool_evaluates_on_spare_workers_and_stops_them_all(cache_dir: Path, small_task) -> None:
    before = live_worker_pids()
    with LocalPool("cpu", cache_dir=cache_dir, config=FAST, workers=1) as pool:
        results = list(pool.map([Job(small_task, triton_candidate(), tag=i) for i in range(2)]))
        spares = live_worker_pids() - before
        assert spares  # a spare is waiting for the next candidate
    assert [r.verdict.status for r in results] == [Status.CORRECT, Status.CORRECT]
    assert all(r.finished >= r.started > 0 for r in results)
    assert live_worker_pids() <= before  # closing the pool stopped its spares (a header compile of before may end)
    for pid in spares:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@pytest.mark.parametrize(("name", "identifier"), [
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, float)",
     ("at", "vectorized_elementwise_kernel")),
    ("my_kernel", ("", "my_kernel")),
    # as the H200's profiler named CUTLASS's kernels (demangled they run to kilobytes of types)
    ("_Z15kc_cutlass_gemmN7cutlass4gemm6kernel13GemmUniversalIN4cute5tupleIJiiiiEEENS0", ("", "kc_cutlass_gemm")),
    ("_ZN2at6native18elementwise_kernelILi128ELi4EZNS0_22gpu_kernel_impl_nocastEEvv", ("at", "elementwise_kernel")),
    ("_ZN7cutlass13device_kernelIN4cute5tupleEEEvNT_6ParamsE", ("cutlass", "device_kernel")),
    ("_ZL12local_kernelPf", ("", "local_kernel")),
    ("_ZN2kcL9ns_kernelEPf", ("kc", "ns_kernel")),  # a static kernel in a namespace
    ("_ZNSt6thread5_ImplEv", ("std", "_Impl")),
])
def test_coverage_knows_a_kernel_by_its_function_name_mangled_or_not(name: str, identifier: tuple[str, str]) -> None:
    from kernelcraft.judge.worker.coverage import is_custom_kernel
    from kernelcraft.judge.worker.kernel_names import CompiledKernels, kernel_identifier

    assert kernel_identifier(name) == identifier
    assert is_custom_kernel(name, {identifier[1]}, CompiledKernels()) == (identifier[0] not in {"at", "cutlass"})


def test_device_time_counts_as_the_candidates_only_where_its_own_code_launched_it() -> None:
    """A decoy kernel named after the library kernel that does the work (docs/judge.md, exploit class 10). The
    events are shaped as torch 2.11's profiler gave them on an H100: a device kernel carries the id of
    the host call that launched it (cuLaunchKernelEx), whose parent range is aten::mm for cuBLAS's
    kernel and the judge's kernelcraft_custom range for the candidate's. Operator ids and call ids
    are counted apart, so an operator may share a kernel's id."""
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    from kernelcraft.judge.worker.coverage import device_share
    from kernelcraft.judge.worker.kernel_names import CompiledKernels

    def event(id_: int, name: str, device: DeviceType, us: float = 0.0, parent=None, note: bool = False):
        return SimpleNamespace(id=id_, name=name, device_type=device, time_range=SimpleNamespace(start=0.0, end=us),
                               cpu_parent=parent, is_user_annotation=note)

    library = "nvjet_sm90_hsh_256x128_64x4_1x2_h_bz_coopA_NNT"
    forward = event(1, "kernelcraft_forward", DeviceType.CPU, note=True)
    matmul = event(2, "aten::matmul", DeviceType.CPU, parent=forward)
    mm = event(16, "aten::mm", DeviceType.CPU, parent=matmul)
    judge_range = event(4, "kernelcraft_custom::triton:" + library, DeviceType.CPU, parent=forward, note=True)
    mislabelled = event(22, "cuLaunchKernelEx", DeviceType.CPU, parent=forward, note=True)  # a candidate's own range
    events = [
        forward, matmul, mm, judge_range, mislabelled,
        event(15, "cudaMemsetAsync", DeviceType.CPU, parent=mm),
        event(15, "Memset (Device)", DeviceType.CUDA, us=1.0),
        event(16, "cuLaunchKernelEx", DeviceType.CPU, parent=mm),
        event(16, library, DeviceType.CUDA, us=989.0),  # cuBLAS's, launched by aten::mm
        event(22, "cuLaunchKernelEx", DeviceType.CPU, parent=judge_range),
        event(22, library, DeviceType.CUDA, us=10.0),  # the decoy, launched by the candidate
        event(1, "kernelcraft_forward", DeviceType.CUDA, us=1000.0, note=True),
    ]
    share = device_share(events, {library}, CompiledKernels())
    assert share.device_us == 1000.0 and share.coverage == pytest.approx(0.01)
    assert share.custom_kernels == [library] and [(k.name, k.us, k.own) for k in share.kernels] == [
        (library, 989.0, False), (library, 10.0, True), ("Memset (Device)", 1.0, False)]
    assert share.kernels[0].why_not == "launched inside aten::mm"
    # the candidate's own code launched both kernels (an extension function, no operator in between): all its own
    events[7].cpu_parent = judge_range
    assert device_share(events, {library}, CompiledKernels()).coverage == pytest.approx(0.999)
    # an extension function that calls at::mm itself: the operator is the innermost range, so the kernel is PyTorch's
    mm.cpu_parent = judge_range
    events[7].cpu_parent = mm
    assert device_share(events, {library}, CompiledKernels()).coverage == pytest.approx(0.01)


def test_kernels_a_cuda_graph_replays_count_as_the_candidates_where_they_are_its_own() -> None:
    """Issue 27: a candidate that captured its kernel in a CUDA graph copies the fresh input in, replays the
    graph and clones the output. No wrapped function of its own runs; the device's records do: every kernel
    of the graph carries the correlation id of the one cudaGraphLaunch, which no operator's range surrounds.
    Its own kernel counts (a launch of its own, for the rule on library calls), PyTorch's captured operators
    and copies do not, and a kernel named like one the reference runs (cuBLAS's) is never its own there."""
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    from kernelcraft.judge.worker.coverage import NOT_COMPILED, REPLAYED_LIBRARY, device_share
    from kernelcraft.judge.worker.kernel_names import CompiledKernels
    from kernelcraft.judge.rules import rule_on_coverage

    def event(id_: int, name: str, device: DeviceType, us: float = 0.0, parent=None, note: bool = False):
        return SimpleNamespace(id=id_, name=name, device_type=device, time_range=SimpleNamespace(start=0.0, end=us),
                               cpu_parent=parent, is_user_annotation=note)

    own = "scale_relu_kernel(float const*, float*, long)"
    add = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctorOnSelf_add<float>, "
           "std::array<char*, 2> >(int, at::native::CUDAFunctorOnSelf_add<float>, std::array<char*, 2>)")
    gemm = "nvjet_sm90_tst_128x64_64x8_1x1_v_bz_TNT"  # cuBLAS's, captured from a torch.mm
    memcpy = "Memcpy DtoD (Device -> Device)"
    forward = event(1, "kernelcraft_forward", DeviceType.CPU, note=True)
    copy_in = event(2, "aten::copy_", DeviceType.CPU, parent=forward)
    clone = event(3, "aten::clone", DeviceType.CPU, parent=forward)
    copy_out = event(4, "aten::copy_", DeviceType.CPU, parent=clone)
    replay = event(40, "cudaGraphLaunch", DeviceType.CPU, parent=forward)
    events = [
        forward, copy_in, clone, copy_out, replay,
        event(30, "cudaMemcpyAsync", DeviceType.CPU, parent=copy_in),
        event(30, memcpy, DeviceType.CUDA, us=5.0),  # the fresh input into the static buffer
        event(40, own, DeviceType.CUDA, us=70.0),  # the graph's kernels: the candidate's...
        event(40, add, DeviceType.CUDA, us=10.0),  # ...and PyTorch's, captured with it
        event(40, gemm, DeviceType.CUDA, us=10.0),
        event(50, "cudaMemcpyAsync", DeviceType.CPU, parent=copy_out),
        event(50, memcpy, DeviceType.CUDA, us=5.0),  # the clone of the static output
        event(1, "kernelcraft_forward", DeviceType.CUDA, us=100.0, note=True),
    ]
    library = frozenset({gemm, memcpy, "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >()"})
    share = device_share(events, {"scale_relu_kernel"}, CompiledKernels(), library)
    assert share.coverage == pytest.approx(0.7) and share.custom_kernels == ["scale_relu_kernel"]
    assert share.graph_runs == 1 and share.graph_launches == 1 and share.device_us == 100.0
    assert (share.kernels[1].name, share.kernels[1].us, share.kernels[1].why_not) == (memcpy, 10.0, NOT_COMPILED)
    # the rule on library calls: no wrapped call ran, the graph's run of its kernel did (launches 0 + 1)
    assert rule_on_coverage(share.coverage, 0 + share.graph_runs, share.kernels, FAST) == rule_on_coverage(0.7, 1, [], FAST)
    assert rule_on_coverage(share.coverage, 0 + share.graph_runs, share.kernels, FAST).reject is None

    # a decoy: a kernel of its own named after cuBLAS's, the captured torch.mm doing the work
    decoy = device_share(events, {"scale_relu_kernel", gemm}, CompiledKernels(), library)
    assert decoy.coverage == pytest.approx(0.7) and decoy.custom_kernels == ["scale_relu_kernel"]
    assert {k.name: k.why_not for k in decoy.kernels}[gemm] == REPLAYED_LIBRARY
    assert device_share(events, {gemm}, CompiledKernels(), library).graph_runs == 0
    # (without the reference's kernel names, the name alone would decide)
    assert device_share(events, {"scale_relu_kernel", gemm}, CompiledKernels()).coverage == pytest.approx(0.8)
    # ...but launched directly by its own code it is its own, as before (the launch call, not the name, decides)
    direct = event(60, "cuLaunchKernelEx", DeviceType.CPU,
                   parent=event(5, "kernelcraft_custom::triton:" + gemm, DeviceType.CPU, parent=forward, note=True))
    direct_events = events[:-1] + [direct, event(60, gemm, DeviceType.CUDA, us=20.0)]
    assert device_share(direct_events, {gemm}, CompiledKernels(), library).coverage == pytest.approx(20.0 / 120.0)

    # a graph of PyTorch's operators only: nothing of its own ran, and the rule says so
    torch_only = device_share(events, {"other_kernel"}, CompiledKernels(), library)
    assert torch_only.coverage == 0.0 and torch_only.custom_kernels == [] and torch_only.graph_runs == 0
    assert "none of the candidate's own kernels ran" in rule_on_coverage(0.0, 0 + torch_only.graph_runs, [], FAST).reject
    # a namespaced library kernel is never its own, whatever it named its kernels
    assert device_share(events, {"vectorized_elementwise_kernel"}, CompiledKernels(), library).coverage == 0.0

    # a replay whose kernels the profiler tied to no call (no cudaGraphLaunch of that id): the same
    unlinked = [e for e in events if e is not replay]
    share = device_share(unlinked, {"scale_relu_kernel", gemm}, CompiledKernels(), library)
    assert share.coverage == pytest.approx(0.7) and share.graph_runs == 1 and share.graph_launches == 0
    # a replay inside a PyTorch operator's range runs that operator's kernels
    replay.cpu_parent = event(6, "aten::_graph_op", DeviceType.CPU, parent=forward)
    assert device_share(events, {"scale_relu_kernel"}, CompiledKernels(), library).coverage == 0.0


def test_a_profiled_call_counts_a_graph_replay_of_its_kernel_as_its_own_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """profile_call on a device whose profiler (faked here) saw only a graph replay: no wrapped call ran,
    yet the candidate's kernel did, so the rule on library calls sees one launch of its own, not none."""
    from types import SimpleNamespace

    import torch
    from torch.autograd import DeviceType

    from kernelcraft.judge.worker.coverage import profile_call
    from kernelcraft.judge.worker.launches import LaunchCounter

    def event(id_: int, name: str, device: DeviceType, us: float = 0.0, parent=None):
        return SimpleNamespace(id=id_, name=name, device_type=device, time_range=SimpleNamespace(start=0.0, end=us),
                               cpu_parent=parent, is_user_annotation=False)

    replay = event(40, "cudaGraphLaunch", DeviceType.CPU)
    seen = [replay, event(40, "scale_relu_kernel", DeviceType.CUDA, us=90.0),
            event(40, "nvjet_sm90_tst_128x64_64x8_1x1_v_bz_TNT", DeviceType.CUDA, us=10.0)]

    class Profile:
        def __init__(self, activities: list[Any]) -> None:
            pass

        def __enter__(self) -> "Profile":
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def events(self) -> list[Any]:
            return seen

    monkeypatch.setattr(torch.profiler, "profile", Profile)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    counter = LaunchCounter()
    counter.kernel_names.update({"scale_relu_kernel", "nvjet_sm90_tst_128x64_64x8_1x1_v_bz_TNT"})
    result = profile_call(lambda x: x, [torch.ones(2)], counter, torch.device("cuda"),
                          frozenset({"nvjet_sm90_tst_128x64_64x8_1x1_v_bz_TNT"}))
    assert result["calls"] == {} and result["custom_launches"] == 1 and result["graph_runs"] == 1
    assert result["coverage"] == pytest.approx(0.9) and result["custom_kernels"] == ["scale_relu_kernel"]
    assert result["graph_launches"] == 1
    seen[1].name = "other_kernel"  # a graph of PyTorch's work only: no launch of its own at all
    result = profile_call(lambda x: x, [torch.ones(2)], counter, torch.device("cuda"),
                          frozenset({"nvjet_sm90_tst_128x64_64x8_1x1_v_bz_TNT"}))
    assert result["custom_launches"] == 0 and result["coverage"] == 0.0
