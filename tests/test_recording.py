"""Recorded model calls: what `llm.write_call` writes (through a real store) is what the replay backend
answers with and what the SFT export exports, and files in the layout runs have always written still read."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from kernelcraft.judge import Status, TimingStats, Verdict
from kernelcraft.llm import (CallFiles, CallRecord, ChatReply, ChatRequest, LLMConfig, LLMError, Message, RecordedCall, Sampling,
                             Usage, make_client, read_call, replayable_calls, write_call)
from kernelcraft.store import Store
from kernelcraft.tasks import resolve_task

SOURCE = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.softmax(-1)\n"
MESSAGES = (Message("system", "you are the coder"), Message("user", "write softmax_rows"))


def _request(sample: int = 0) -> ChatRequest:
    return ChatRequest(model="fake-coder", messages=MESSAGES, sampling=Sampling(temperature=0.7, max_tokens=900, seed=3),
                       sample=sample, purpose="coder", task="examples/softmax_rows")


def _reply(text: str) -> ChatReply:
    return ChatReply(text=text, usage=Usage(11, 22, 5), model="fake-coder", finish_reason="stop", latency_s=0.1,
                     cost_usd=None, reasoning="first, think")


def test_a_call_reads_back_as_it_was_written_and_a_failed_one_without_reply(tmp_path: Path) -> None:
    answered = RecordedCall.of(CallRecord(_request(), _reply("the answer")))
    failed = RecordedCall.of(CallRecord(_request(1), None, error="HTTP 500"))
    files = write_call(tmp_path / "llm", answered)
    assert files.reply is not None and files.reasoning is not None and files.answered
    assert read_call(files) == read_call(CallFiles.beside(files.prompt)) == answered
    assert answered.request() == _request()
    failed_files = write_call(tmp_path / "llm", failed)
    assert (failed_files.reply, failed_files.answered) == (None, False)
    assert read_call(failed_files) == failed and failed.reply is None and failed.usage is None
    assert [r for r, _ in replayable_calls(tmp_path / "llm")] == [_request()]  # a failed call has nothing to replay


def test_files_in_the_layout_runs_have_always_written_still_read_and_replay(tmp_path: Path) -> None:
    folder = tmp_path / "runs" / "r1" / "llm"
    folder.mkdir(parents=True)
    (folder / "101500-0a1b2c3d.prompt.json").write_text(json.dumps({
        "model": "old-model", "sample": 2, "purpose": "coder", "task": "examples/softmax_rows",
        "sampling": {"temperature": 0.7, "top_p": None, "max_tokens": 900, "seed": 3},
        "messages": [{"role": "system", "content": "you are the coder"}, {"role": "user", "content": "write softmax_rows"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 22}}, indent=1))
    (folder / "101500-0a1b2c3d.reply.md").write_text("the old answer")
    (folder / "101501-deadbeef.prompt.json").write_text("{not json")  # a failed call's prompt is never read
    call = read_call(CallFiles.beside(folder / "101500-0a1b2c3d.prompt.json"))
    assert (call.model, call.messages, call.sample, call.reply, call.usage) == \
        ("old-model", MESSAGES, 2, "the old answer", Usage(11, 22))
    replay = make_client(LLMConfig.from_spec(f"replay:{tmp_path / 'runs' / 'r1'}"))
    replay.check()
    asked = ChatRequest(model="a-new-model", messages=MESSAGES, sampling=Sampling(0.7, None, 900, 3), sample=2)
    answer = replay.backend.complete(asked, 10.0)
    assert (answer.text, answer.usage, answer.model) == ("the old answer", Usage(11, 22), "old-model")


def _correct(task_key: str, source: str) -> Verdict:
    return Verdict(status=Status.CORRECT, task=task_key, device="cpu", message="correct", speedup=1.5, significant=True,
                   reference=TimingStats.of([2.0, 2.1, 2.2]), candidate=TimingStats.of([2.0 / 1.5] * 3), coverage=0.9,
                   candidate_hash=hashlib.sha256(source.encode()).hexdigest())


def test_replay_and_the_sft_export_read_what_the_store_wrote(tmp_path: Path) -> None:
    pytest.importorskip("datasets")  # the train extra
    pytest.importorskip("datasketch")
    from kernelcraft.train.sft import SFTExportConfig, export_sft

    text = f"Here is my kernel.\n```python\n{SOURCE}```"
    task = resolve_task("softmax_rows")
    with Store(tmp_path / "ws") as store:
        run = store.start_run("optimize", {})
        store.add_run_tasks(run, [task])
        call_id = store.record_llm_call(CallRecord(_request(), _reply(text)), run)
        store.record_llm_call(CallRecord(_request(1), None, error="HTTP 500"), run)
        verdict_id = store.record_verdict(task, SOURCE, _correct(task.key, SOURCE), run_id=run)
        store.record_attempt(run, task.key, 0, 0, status="correct", llm_call_id=call_id, verdict_id=verdict_id, speedup=1.5)
        (row, failed) = store.llm_calls(run_id=run)
        assert read_call(store.call_files(row)) == RecordedCall.of(CallRecord(_request(), _reply(text)))
        assert store.llm_reply(call_id) == text and store.llm_reply(failed.id) is None
        summary = export_sft(store, tmp_path / "out", SFTExportConfig(roles=["coder"]))

    replay = make_client(LLMConfig.from_spec(f"replay:{tmp_path / 'ws' / 'runs' / run}"))
    replay.check()
    again = replay.backend.complete(_request(), 10.0)
    assert (again.text, again.usage) == (text, Usage(11, 22, 5))
    with pytest.raises(LLMError, match="no answer left"):
        replay.backend.complete(_request(1), 10.0)  # the failed call left nothing to replay

    assert summary.kept == 1
    (record,) = [json.loads(line) for line in (tmp_path / "out" / "sft.jsonl").read_text().splitlines()]
    assert record["messages"] == [{"role": m.role, "content": m.content} for m in MESSAGES] + \
        [{"role": "assistant", "content": text}]
    assert (record["task"], record["sample"], record["model"]) == (task.key, 0, "fake-coder")
