"""Flag codes: one enum holds every code the judge emits, an unknown one fails where it is made, and stored
verdicts (codes as plain strings in JSON) load as they were."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from pydantic import ValidationError

import kernelcraft
from kernelcraft.judge import Status, Verdict
from kernelcraft.judge.rules import LOW_COVERAGE
from kernelcraft.judge.verdict import DOUBTFUL_TIMING, HACK, Flag, FlagCode
from kernelcraft.train.rewards import RewardConfig

JUDGE = Path(kernelcraft.__file__).parent / "judge"


def _emitted_codes() -> set[str]:
    """String codes the judge's modules flag: Flag("code", ...), the static checks' ("code", message) pairs
    appended to a report's flags, and the static rules' `flag="code"` (static_rules.py)."""
    codes = set()
    for path in JUDGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            codes |= {k.value.value for k in node.keywords if k.arg == "flag" and isinstance(k.value, ast.Constant)}
            if not node.args:
                continue
            first = node.args[0]
            if isinstance(node.func, ast.Name) and node.func.id == "Flag":
                codes |= {first.value} if isinstance(first, ast.Constant) else set()
            elif (isinstance(node.func, ast.Attribute) and node.func.attr == "append"
                  and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "flags"
                  and isinstance(first, ast.Tuple) and isinstance(first.elts[0], ast.Constant)):
                codes.add(first.elts[0].value)
    return codes


def test_every_code_the_judge_emits_is_a_flag_code() -> None:
    emitted = _emitted_codes()
    assert {"side_stream", "native_threads", "noisy_timing"} <= emitted  # the scan finds the judge's flags
    assert emitted - {c.value for c in FlagCode} == set()
    assert FlagCode.LOW_COVERAGE == LOW_COVERAGE


def test_an_unknown_code_fails_where_the_flag_is_made() -> None:
    with pytest.raises(ValueError, match="unknown flag code 'side_streams'"):
        Flag("side_streams", "a typo")
    with pytest.raises(ValidationError):
        RewardConfig(hack_flags=["side_streams"])
    assert Flag("side_stream", "x").code is FlagCode.SIDE_STREAM


def test_a_stored_verdict_keeps_plain_string_codes_and_loads_them_back() -> None:
    v = Verdict(Status.CORRECT, "t", "cpu", flags=[Flag("noisy_timing", "spread"), Flag(FlagCode.SIDE_STREAM, "s")])
    stored = v.to_json()
    assert json.loads(stored)["flags"] == [{"code": "noisy_timing", "message": "spread"},
                                           {"code": "side_stream", "message": "s"}]
    back = Verdict.from_dict(json.loads(stored))
    assert [f.code for f in back.flags] == [FlagCode.NOISY_TIMING, FlagCode.SIDE_STREAM]
    assert back.has_flag("side_stream") and {f.code for f in back.flags} & {"noisy_timing"} == {"noisy_timing"}


def test_the_pack_and_the_rewards_share_the_untimed_work_flags_and_differ_where_they_say_why() -> None:
    assert HACK & DOUBTFUL_TIMING == {FlagCode.SIDE_STREAM, FlagCode.NATIVE_THREADS}
    assert HACK - DOUBTFUL_TIMING == {FlagCode.SHAPE_SPECIALISED}  # a pack calls a kernel only at its own shape
    assert DOUBTFUL_TIMING - HACK == {FlagCode.BELOW_FLOP_FLOOR}  # an algebraic shortcut is a real win to RL
    assert set(RewardConfig().hack_flags) == HACK


def test_a_spread_is_worded_as_the_quartiles_printed_beside_it() -> None:
    from kernelcraft.judge import TimingStats
    from kernelcraft.report import verdict_lines

    stats = TimingStats.of([1.0, 2.0, 3.0, 4.0, 5.0])
    assert stats.spread_words() == "quartiles 2-4 ms around a median of 3 ms (±33.3%)"  # half their gap, of the median
    v = Verdict(Status.CORRECT, "t", "cpu", reference=stats, candidate=stats)
    assert "reference 3 ms [2, 4]" in verdict_lines(v)[2]
