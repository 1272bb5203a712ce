"""The messages between the judge and its workers (judge/protocol.py): one encoding, read back as it
was written, and anything else refused as a ProtocolError (what a candidate's worker sends is untrusted)."""

from __future__ import annotations

import json

import pytest

from kernelcraft.judge.config import JudgeConfig
from kernelcraft.judge.protocol import (ANSWERS, BuildRequest, Compared, CompareSeed, Facts, Failure, Mismatch, ProfiledKernel,
                                        ProfileOutput, ProfileSpec, ProtocolError, RoundOutputs, RoundStart, Setup, Survey, Surveyed,
                                        Time, decode_answer, decode_command, decode_profile_output, decode_profile_spec, decode_reply,
                                        decode_request, encode)

SETUP = Setup("candidate", "cpu", JudgeConfig(), "float32", 1e-4, 1e-4, 7, "/cache", 1000, "", "task source", {"N": 4})


def _wire(message: object) -> dict:
    return json.loads(json.dumps(encode(message)))


def test_every_command_has_an_answer_and_a_distinct_op() -> None:
    assert len({c.OP for c in ANSWERS}) == len(ANSWERS)


def test_messages_read_back_as_they_were_written() -> None:
    assert decode_command(_wire(SETUP)) == SETUP
    compare = CompareSeed([None], [1.0], 0.1, 0.2, False, kind="seed", index=2, k=3.0)
    assert decode_command(_wire(compare)) == compare
    surveyed = Surveyed(Facts(truth="float64", input_bytes=8), 1, 2, 3, {"torch": "2"})
    assert decode_answer(Survey([1], [], 0), _wire(surveyed)) == surveyed
    compared = Compared([Mismatch(False, bad=3, reason="x")])
    assert decode_answer(compare, _wire(compared)) == compared
    assert decode_answer(Time([1]), _wire(Failure("runtime_error", "boom", oom=True))) == Failure("runtime_error", "boom", True)
    request = RoundOutputs(3, [None], [1.0])
    assert decode_request(_wire(request)) == request
    assert decode_reply(BuildRequest({}), {"ok": True, "message": "", "machine_fault": False}).ok
    build = BuildRequest({"cpp_sources": ["int f();"]}, "9.0a")
    assert decode_request(_wire(build)) == build and decode_request({"request": "build", "arguments": {}}).arch_list == ""


@pytest.mark.parametrize("line", [
    {"op": "no_such_op"},
    {"op": "time"},  # a field missing
    {"op": "time", "seeds": [1], "extra": 1},  # a field unknown
    {"op": "setup", **{k: v for k, v in _wire(SETUP).items() if k != "op"}, "config": {"seeds": "many"}},  # a config that is none
])
def test_a_command_that_is_not_one_is_refused(line: dict) -> None:
    with pytest.raises(ProtocolError):
        decode_command(line)


@pytest.mark.parametrize("line", [
    {"ok": True, "samples": {}},  # fields missing
    {"status": "correct", "message": ""},  # neither ok nor not
    {"ok": False, "status": "x", "message": "", "nonce": "n"},  # a field unknown
    "not an object",
])
def test_an_answer_that_is_not_one_is_refused(line: object) -> None:
    with pytest.raises(ProtocolError):
        decode_answer(Time([1]), line)  # type: ignore[arg-type]


def test_requests_are_read_by_their_kind_and_an_unknown_one_is_refused() -> None:
    assert decode_request({"request": "round", "i": 0, "iters": 10}) == RoundStart(0, 10)
    for line in ({"request": "shell", "i": 0}, {"request": "round", "i": 0, "secret": 1}, {"i": 0}):
        with pytest.raises(ProtocolError):
            decode_request(line)


def test_a_profile_pass_s_spec_and_output_read_back_and_an_output_that_is_none_is_refused() -> None:
    """A profile pass's driver writes its output in its scratch: the candidate's process could write anything there."""
    spec = ProfileSpec("torch", "cpu", "float32", "task source", {"N": 4}, "candidate source", 1234, JudgeConfig(), "/cache", 0)
    assert decode_profile_spec(_wire(spec)) == spec
    output = ProfileOutput(["/cache/builds/x.so"], [ProfiledKernel("aten::relu", 2, 3.5), ProfiledKernel("k", 1, 2)])
    assert decode_profile_output(_wire(output)) == output
    for line in ({"binaries": "/etc/passwd"}, {"binaries": [1]}, {"binaries": [], "kernels": {"name": "k"}},
                 {"binaries": [], "kernels": [{"name": 1, "calls": 1, "time_us": 1.0}]},
                 {"binaries": [], "kernels": [{"name": "k", "calls": 1.5, "time_us": 1.0}]},
                 {"binaries": [], "kernels": [{"name": "k", "calls": 1, "time_us": float("nan")}]},
                 {"binaries": [], "kernels": [{"name": "k", "calls": -1, "time_us": 1.0}]},
                 {"binaries": [], "secret": "x"}, ["binaries"]):
        with pytest.raises(ProtocolError):
            decode_profile_output(line)  # type: ignore[arg-type]
