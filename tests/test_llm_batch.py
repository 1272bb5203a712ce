"""The batch backend: rounds of requests written as OpenAI batch input files, replies read from
OpenAI batch output files dropped in the same directory, by a thread that answers by hand."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kernelcraft.agents import Coder, Truncated
from kernelcraft.judge import DeviceDescription
from kernelcraft.llm import (BatchPending, ChatReply, EndpointError, LLMClient, LLMConfig, LLMError, Message, Price,
                             make_client)
from kernelcraft.llm.backends.batch import Batch, BatchLane

from .conftest import ROOT

CORPUS = ROOT.parent / "shared" / "real-model-corpus"  # a frontier model's batch round, read only


def ask(i: int) -> list[Message]:
    return [Message("system", "you write kernels"), Message("user", f"task {i}")]


def client_for(directory: Path, **cfg: Any) -> LLMClient:
    return make_client(LLMConfig.from_spec(f"batch:{directory}:gpt-batch", **cfg))


def reply_line(custom_id: str, text: str, prompt: int = 10, completion: int = 5) -> dict[str, Any]:
    """A line of an OpenAI batch output file."""
    return {"id": f"batch_req_{custom_id[:8]}", "custom_id": custom_id, "error": None,
            "response": {"status_code": 200, "request_id": "req_1", "body": {
                "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "gpt-batch-2025",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}}}


def write_jsonl(path: Path, lines: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def requests_in(directory: Path) -> dict[str, list[dict[str, Any]]]:
    return {p.name: [json.loads(line) for line in p.read_text().splitlines()]
            for p in sorted(directory.glob("*.requests.jsonl"))}


def hand_answerer(directory: Path, answer: Callable[[dict[str, Any]], str]) -> threading.Thread:
    """Waits for the first requests file, then writes a reply for each of its lines."""
    def run() -> None:
        for _ in range(250):
            for path in directory.glob("round-*.requests.jsonl"):
                lines = [json.loads(line) for line in path.read_text().splitlines()]
                write_jsonl(path.with_name(path.name.replace(".requests", ".replies")),
                            [reply_line(q["custom_id"], answer(q["body"])) for q in lines])
                return
            time.sleep(0.02)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def chat_concurrently(client: LLMClient, prompts: list[list[Message]]) -> list[ChatReply | BaseException]:
    results: list[ChatReply | BaseException] = [ValueError("no result")] * len(prompts)

    def one(i: int) -> None:
        try:
            results[i] = client.chat(client.request(prompts[i]))
        except Exception as e:  # noqa: BLE001 - handed to the test
            results[i] = e

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return results


def test_concurrent_calls_form_one_round_that_a_hand_answerer_replies_to(tmp_path: Path) -> None:
    client = client_for(tmp_path, batch_window_s=0.5, batch_wait_s=5, max_tokens=777,
                        prices={"gpt-batch*": Price(input=1.0, output=2.0)})
    client.check()
    answerer = hand_answerer(tmp_path, lambda body: f"kernel for {body['messages'][-1]['content']}")
    replies = chat_concurrently(client, [ask(i) for i in range(3)])
    answerer.join(5)
    assert [r.text for r in replies] == ["kernel for task 0", "kernel for task 1", "kernel for task 2"]  # type: ignore[union-attr]
    r = replies[0]
    assert isinstance(r, ChatReply) and (r.usage.prompt_tokens, r.usage.completion_tokens) == (10, 5)
    assert r.model == "gpt-batch-2025" and r.finish_reason == "stop" and r.cost_usd == pytest.approx(20 / 1e6)
    assert client.spend.tokens == 45
    ((name, lines),) = requests_in(tmp_path).items()  # one round, one file
    assert name == "round-0001.requests.jsonl" and len(lines) == 3
    keys = {client.request(ask(i)).key(): i for i in range(3)}
    for line in lines:
        i = keys[line["custom_id"]]
        assert line["method"] == "POST" and line["url"] == "/v1/chat/completions"
        assert line["body"] == {"model": "gpt-batch", "temperature": 1.0, "max_tokens": 777, "messages": [
            {"role": "system", "content": "you write kernels"}, {"role": "user", "content": f"task {i}"}]}


def test_a_full_round_is_written_without_waiting_out_the_window(tmp_path: Path) -> None:
    client = client_for(tmp_path, concurrency=2, batch_window_s=60, batch_wait_s=0.2)
    started = time.monotonic()
    results = chat_concurrently(client, [ask(0), ask(1)])
    assert time.monotonic() - started < 3
    assert all(isinstance(r, BatchPending) for r in results)
    assert [len(lines) for lines in requests_in(tmp_path).values()] == [2]
    assert client.flush() is not None and "2 in round-0001.requests.jsonl" in client.flush()  # nothing held: no new round
    assert len(requests_in(tmp_path)) == 1


def test_without_waiting_the_run_stops_with_batch_pending_and_resumes_from_the_replies(tmp_path: Path) -> None:
    records: list[Any] = []
    config = LLMConfig.from_spec(f"batch:{tmp_path / 'exchange'}", batch_window_s=0.05, batch_wait_s=0)
    first = make_client(config, on_call=records.append)
    with pytest.raises(BatchPending) as caught:  # held for the round the run writes when it stops
        first.chat(first.request(ask(0)))
    assert caught.value.requests_file is None and "gave up" not in str(caught.value)  # not retried
    assert not (tmp_path / "exchange").exists() or not requests_in(tmp_path / "exchange")
    requests_file = tmp_path / "exchange" / "round-0001.requests.jsonl"
    message = first.flush()
    assert message is not None and "1 model requests wait" in message and "1 in round-0001.requests.jsonl (written now)" in message
    assert str(tmp_path / "exchange") in message and "and resume" in message
    (line,) = requests_in(tmp_path / "exchange")["round-0001.requests.jsonl"]
    assert line["body"]["model"] == "batch"  # `batch:DIR` without a name
    assert first.survey() == (f"batch {tmp_path / 'exchange'}: 0 of 1 requests have replies, 1 still pending "
                              f"(1 in {requests_file.name})")

    # Run again before the reply is in: the same file is named, no second round is written.
    again = make_client(config)
    with pytest.raises(BatchPending, match="round-0001.requests.jsonl") as caught:
        again.chat(again.request(ask(0)))
    assert caught.value.requests_file == str(requests_file)
    assert "(1 in round-0001.requests.jsonl)" in (again.flush() or "")  # not written again
    assert list(requests_in(tmp_path / "exchange")) == ["round-0001.requests.jsonl"]

    # The provider's output file, under its own name, beside another with lines for other requests.
    write_jsonl(tmp_path / "exchange" / "batch_6a1f_output.jsonl", [reply_line(line["custom_id"], "resumed", 3, 4)])
    write_jsonl(tmp_path / "exchange" / "other.jsonl", [reply_line("someone-else", "not ours")])
    (tmp_path / "exchange" / "notes.jsonl").write_text("not json\n")
    resumed = make_client(config)
    assert resumed.survey() == (f"batch {tmp_path / 'exchange'}: 1 of 1 requests have replies, 0 still pending; 1 replies match "
                                f"no request; 1 unreadable lines skipped (notes.jsonl: 1)")
    reply = resumed.chat(resumed.request(ask(0)))
    assert reply.text == "resumed" and reply.usage.total == 7 and not reply.cached
    assert list(requests_in(tmp_path / "exchange")) == ["round-0001.requests.jsonl"]
    assert resumed.flush() is None  # nothing waits
    with pytest.raises(BatchPending):  # a new question is a new round
        resumed.chat(resumed.request(ask(1)))
    assert "1 in round-0002.requests.jsonl (written now)" in (resumed.flush() or "")
    assert records[0].reply is None and "no reply yet" in records[0].error


def test_runs_sharing_a_directory_through_lanes_write_one_round_and_each_gets_its_own_reply(tmp_path: Path) -> None:
    config = LLMConfig.from_spec(f"batch:{tmp_path}:gpt-batch")
    batch = Batch(tmp_path)
    clients = {lane: make_client(config, backend=BatchLane(batch, lane)) for lane in ("refine", "evolve")}
    for client in clients.values():  # the same prompt from two runs: two requests
        with pytest.raises(BatchPending):
            client.chat(client.request(ask(0)))
        assert client.flush() is None  # a lane writes no round: its runs' owner flushes the directory once
    assert not requests_in(tmp_path)
    message = batch.flush()
    assert message is not None and "2 model requests wait for batch replies (2 in round-0001.requests.jsonl (written now))" in message
    ((name, lines),) = requests_in(tmp_path).items()
    key = clients["refine"].request(ask(0)).key()
    assert sorted(line["custom_id"] for line in lines) == [f"evolve/{key}", f"refine/{key}"]
    write_jsonl(tmp_path / "replies.jsonl", [reply_line(line["custom_id"], line["custom_id"].split("/")[0]) for line in lines])
    again = Batch(tmp_path)  # the next invocation
    for lane in ("refine", "evolve"):
        client = make_client(config, backend=BatchLane(again, lane))
        assert client.chat(client.request(ask(0))).text == lane
    assert again.flush() is None and len(requests_in(tmp_path)) == 1
    with pytest.raises(ValueError, match="without '/'"):
        BatchLane(batch, "a/b")


def test_an_error_reply_fails_the_call_until_a_good_reply_comes(tmp_path: Path) -> None:
    client = client_for(tmp_path, batch_wait_s=0)
    bad, refused, good = (client.request(ask(i)) for i in range(3))
    write_jsonl(tmp_path / "first.jsonl", [
        {"id": "b1", "custom_id": bad.key(), "response": None,
         "error": {"code": "batch_expired", "message": "This request could not be executed before the deadline"}},
        {"id": "b2", "custom_id": refused.key(), "error": None,
         "response": {"status_code": 400, "request_id": "r", "body": {"error": {"message": "max_tokens is too large"}}}},
        {"id": "b3", "custom_id": good.key(), "error": None, "response": {"status_code": 200, "body": {"choices": []}}},
    ])
    with pytest.raises(LLMError, match=r"first.jsonl:1: the batch reply is an error: This request could not be executed"):
        client.chat(bad)
    with pytest.raises(LLMError, match=r"first.jsonl:2: .*status 400: max_tokens is too large"):
        client.chat(refused)
    with pytest.raises(LLMError, match=r"first.jsonl:3: .*not a batch reply with a chat completion"):
        client.chat(good)
    write_jsonl(tmp_path / "retried.jsonl", [reply_line(bad.key(), "second time lucky")])
    assert client.chat(bad).text == "second time lucky"
    assert not requests_in(tmp_path)  # every request had a reply: no round was written


def test_the_directory_must_be_writable(tmp_path: Path) -> None:
    client_for(tmp_path / "new" / "dir").check()
    assert (tmp_path / "new" / "dir").is_dir()
    (tmp_path / "a-file").write_text("")
    with pytest.raises(EndpointError, match="cannot write to the batch directory"):
        client_for(tmp_path / "a-file" / "dir").check()


def test_reasoning_is_kept_apart_from_the_answer_and_counted(tmp_path: Path) -> None:
    client = client_for(tmp_path, batch_wait_s=0, prices={"gpt-batch*": Price(input=1.0, output=2.0)})
    deepseek, openrouter = client.request(ask(0)), client.request(ask(1))
    lines = [reply_line(deepseek.key(), "```python\nclass ModelNew: pass\n```", 10, 500),
             reply_line(openrouter.key(), "the answer", 10, 80)]
    lines[0]["response"]["body"]["choices"][0]["message"]["reasoning_content"] = "Let me try ```python\nclass ModelNew: draft```"
    lines[0]["response"]["body"]["usage"]["completion_tokens_details"] = {"reasoning_tokens": 400}
    lines[1]["response"]["body"]["choices"][0]["message"]["reasoning"] = "thinking out loud"
    write_jsonl(tmp_path / "replies.jsonl", lines)
    first, second = client.chat(deepseek), client.chat(openrouter)
    assert first.text == "```python\nclass ModelNew: pass\n```" and first.reasoning.startswith("Let me try")
    assert first.usage.reasoning_tokens == 400 and first.cost_usd == pytest.approx((10 + 2 * 500) / 1e6)  # billed as output
    assert second.reasoning == "thinking out loud" and client.spend.completion_tokens == 580


def test_the_corpus_round_replays_with_both_cut_replies_truncated() -> None:
    if not CORPUS.is_dir():
        pytest.skip("../shared/real-model-corpus is not beside the checkout")
    batch = CORPUS / "batch"
    # The round's own settings, so that each request's key is the custom_id the corpus answers.
    coder = Coder(make_client(LLMConfig.from_spec(f"batch:{batch}:frontier", max_tokens=8192)), "cuda",
                  DeviceDescription("cuda", "NVIDIA H200"))
    outcomes = {}
    for line in (batch / "round-0001.requests.jsonl").read_text().splitlines():
        messages = [Message(**m) for m in json.loads(line)["body"]["messages"]]
        proposal = coder.propose(messages, task="corpus")
        assert proposal.request.key() == json.loads(line)["custom_id"]
        name = next((n for n in ("MBConv", "ShuffleNetUnit") if n in messages[1].content), "other")
        outcomes.setdefault(name, []).append(proposal.candidate)
    (efficientnet,), (shufflenet,) = outcomes["MBConv"], outcomes["ShuffleNetUnit"]
    assert efficientnet == shufflenet == Truncated("the reply was cut at the 8192-token limit before its code was complete", 8192)
    assert len(outcomes["other"]) == 8 and not any(isinstance(c, Truncated) for c in outcomes["other"])
    assert not list(batch.glob("round-0002*"))  # every request had its reply: nothing was written

