"""The Anthropic backend against a real Messages API server on loopback, through the real `anthropic` SDK."""

from __future__ import annotations

import json
import socket
import sys

import pytest

from kernelcraft.llm import (CallRecord, EndpointError, LLMClient, LLMConfig, LLMError, Message, Price, make_backend,
                             make_client)

from .fake_anthropic import FakeAnthropic
from .fake_openai import Step

pytest.importorskip("anthropic")

KEY_ENV = "KC_TEST_ANTHROPIC_KEY"
HELLO = [Message("system", "you write CUDA kernels"), Message("user", "write a kernel please")]


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "right")


def config(srv: FakeAnthropic, **cfg: object) -> LLMConfig:
    return LLMConfig.from_spec("anthropic:claude-fake", base_url=srv.url, api_key_env=KEY_ENV, backoff_s=0.5, **cfg)


def client_for(srv: FakeAnthropic, waits: list[float] | None = None, **cfg: object) -> tuple[LLMClient, list[CallRecord]]:
    records: list[CallRecord] = []
    c = config(srv, **cfg)
    client = LLMClient(make_backend(c), c, on_call=records.append,
                       sleep=(waits.append if waits is not None else lambda s: None))
    return client, records


def test_a_reply_comes_back_with_tokens_cost_and_the_system_prompt_apart() -> None:
    with FakeAnthropic(key="right") as srv:
        srv.script = [Step(text="here is ModelNew")]
        client, records = client_for(srv, prices={"claude-*": Price(input=3.0, output=15.0)}, max_tokens=1234)
        client.check()
        reply = client.chat(client.request(HELLO, purpose="coder", seed=7))
    assert reply.text == "here is ModelNew" and reply.model == "claude-fake" and reply.finish_reason == "end_turn"
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (8, 3)  # 4 system + 4 user words; 3 words
    assert reply.cost_usd == pytest.approx((8 * 3.0 + 3 * 15.0) / 1e6)
    (sent,) = srv.requests
    assert sent["system"] == "you write CUDA kernels"
    assert sent["messages"] == [{"role": "user", "content": "write a kernel please"}]
    assert sent["max_tokens"] == 1234 and not {"temperature", "top_p", "seed"} & set(sent)  # defaults are not sent
    assert records[0].reply == reply and client.spend.tokens == 11


def test_rate_limits_overloads_and_server_errors_are_retried() -> None:
    waits: list[float] = []
    with FakeAnthropic() as srv:
        srv.script = [Step(status=429, headers={"retry-after": "7"}), Step(status=529), Step(status=500),
                      Step(status=529, headers={"retry-after-ms": "1500"}), Step(text="ok")]
        client, _ = client_for(srv, waits)
        reply = client.chat(client.request(HELLO))
    assert reply.text == "ok" and reply.attempts == 5 and len(srv.requests) == 5
    assert 7 <= waits[0] <= 7 * 1.25  # the server's retry-after is honoured
    assert 1.0 <= waits[1] <= 1.25 and 2.0 <= waits[2] <= 2.5  # then exponential backoff from the attempt number
    assert 1.5 <= waits[3] <= 1.5 * 1.25  # retry-after-ms too


def test_what_is_not_worth_retrying_fails_at_once() -> None:
    with FakeAnthropic() as srv:
        srv.script = [Step(status=400), Step(raw="{not json"), Step(text="fine")]
        client, records = client_for(srv)
        with pytest.raises(LLMError, match=r"refused the request \(400\): scripted 400"):
            client.chat(client.request(HELLO))
        assert client.chat(client.request(HELLO)).text == "fine"  # malformed JSON was retried
        srv.script = [Step(status=529)] * 3
        with pytest.raises(LLMError, match=r"overloaded \(529\).*gave up after 3 attempts"):
            client_for(srv, retries=2)[0].chat(client.request(HELLO))
        # A sampling setting the API does not take is sent, and its refusal shown, not dropped unseen.
        cold, _ = client_for(srv, temperature=0.2)
        with pytest.raises(LLMError, match=r"\(400\): temperature: Extra inputs are not permitted"):
            cold.chat(cold.request(HELLO))
    assert len(srv.requests) == 6 and records[0].reply is None


def test_a_slow_reply_times_out() -> None:
    with FakeAnthropic() as srv:
        srv.script = [Step(text="late", delay_s=2.0)]
        client, _ = client_for(srv, timeout_s=0.5, retries=0)
        with pytest.raises(LLMError, match="no answer .* within 0.5 s"):
            client.chat(client.request(HELLO))


def test_an_unusable_endpoint_is_reported_before_any_work(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    with pytest.raises(EndpointError, match="cannot reach"):
        make_client(LLMConfig.from_spec("anthropic:claude-fake", base_url=dead, api_key_env=KEY_ENV)).check()
    with FakeAnthropic(key="right", models=["claude-a", "claude-b"]) as srv:
        monkeypatch.setenv(KEY_ENV, "wrong")
        with pytest.raises(EndpointError, match="rejected the API key"):
            make_client(config(srv)).check()
        monkeypatch.setenv(KEY_ENV, "right")
        with pytest.raises(EndpointError, match="does not serve model 'claude-fake'.*claude-a, claude-b"):
            make_client(config(srv)).check()
        client = make_client(config(srv))
        with pytest.raises(EndpointError, match="does not serve model 'claude-fake'"):  # and at call time, unretried
            client.chat(client.request(HELLO))
        make_client(LLMConfig.from_spec("anthropic:claude-b", base_url=srv.url, api_key_env=KEY_ENV)).check()
    assert len(srv.requests) == 0


def test_the_key_and_the_sdk_must_be_there(monkeypatch: pytest.MonkeyPatch) -> None:
    assert LLMConfig.from_spec("anthropic:claude-x").api_key_env == "ANTHROPIC_API_KEY"
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(EndpointError, match=f"no Anthropic API key: set the {KEY_ENV} environment variable"):
        make_backend(LLMConfig.from_spec("anthropic:claude-x", api_key_env=KEY_ENV))
    monkeypatch.setitem(sys.modules, "anthropic", None)  # what `import anthropic` meets without the extra
    with pytest.raises(EndpointError, match=r"pip install 'kernelcraft\[anthropic\]'"):
        make_backend(LLMConfig.from_spec("anthropic:claude-x"))


def test_thinking_blocks_are_kept_apart_from_the_answer_and_a_cut_reply_says_so() -> None:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-fake", "stop_reason": "max_tokens",
               "stop_sequence": None, "usage": {"input_tokens": 8, "output_tokens": 64},
               "content": [{"type": "thinking", "thinking": "plan the tiles", "signature": "sig"},
                           {"type": "text", "text": "```python\nclass ModelNew"}]}
    with FakeAnthropic() as srv:
        srv.script = [Step(raw=json.dumps(message))]
        client, _ = client_for(srv, prices={"claude-*": Price(input=3.0, output=15.0)})
        reply = client.chat(client.request(HELLO))
    assert reply.text == "```python\nclass ModelNew" and reply.reasoning == "plan the tiles" and reply.truncated
    assert reply.cost_usd == pytest.approx((8 * 3.0 + 64 * 15.0) / 1e6)  # thinking is billed as output

