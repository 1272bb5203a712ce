"""The LLM client against a real HTTP server on loopback, through the real `openai` SDK."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from kernelcraft.llm import (DEFAULT_MAX_TOKENS, BudgetExceeded, CallFailed, CallRecord, DirectoryCache, EndpointError, LLMClient, LLMConfig,
                             LLMError, Message, Price, make_backend, make_client)
from kernelcraft.store import Store

from .fake_openai import FakeOpenAI, Step

HELLO = [Message("user", "write a kernel please")]


def client_for(srv: FakeOpenAI, waits: list[float] | None = None, **cfg: object) -> tuple[LLMClient, list[CallRecord]]:
    records: list[CallRecord] = []
    config = LLMConfig(model="fake-coder", base_url=srv.url, backoff_s=0.5, **cfg)  # type: ignore[arg-type]
    client = LLMClient(make_backend(config), config, on_call=records.append,
                       sleep=(waits.append if waits is not None else lambda s: None))
    return client, records


def test_a_reply_comes_back_with_tokens_cost_and_a_record() -> None:
    with FakeOpenAI() as srv:
        srv.script = [Step(text="here is ModelNew")]
        client, records = client_for(srv, prices={"fake-*": Price(input=2.0, output=10.0)})
        reply = client.chat(client.request(HELLO, purpose="coder", task="examples/relu"))
    assert reply.text == "here is ModelNew" and reply.attempts == 1 and not reply.cached
    assert reply.usage.prompt_tokens == 4 and reply.usage.completion_tokens == 3
    assert reply.cost_usd == pytest.approx((4 * 2.0 + 3 * 10.0) / 1e6)
    assert srv.requests[0]["messages"] == [{"role": "user", "content": "write a kernel please"}]
    assert client.spend.tokens == 7 and client.spend.calls == 1
    (rec,) = records
    assert rec.reply == reply and rec.request.purpose == "coder" and rec.request.task == "examples/relu"


def test_rate_limits_and_server_errors_are_retried_with_backoff() -> None:
    waits: list[float] = []
    with FakeOpenAI() as srv:
        srv.script = [Step(status=429, headers={"retry-after": "7"}), Step(status=500), Step(status=503), Step(text="ok")]
        client, _ = client_for(srv, waits)
        reply = client.chat(client.request(HELLO))
    assert reply.text == "ok" and reply.attempts == 4
    assert 7 <= waits[0] <= 7 * 1.25  # the server's Retry-After is honoured
    assert 1.0 <= waits[1] <= 1.25 and 2.0 <= waits[2] <= 2.5  # then exponential backoff from the attempt number


def test_malformed_json_is_retried_and_retries_run_out_with_a_clear_error() -> None:
    with FakeOpenAI() as srv:
        srv.script = [Step(raw="{not json"), Step(text="fine")]
        client, records = client_for(srv)
        assert client.chat(client.request(HELLO)).text == "fine"
        srv.script = [Step(status=500)] * 3
        client, records = client_for(srv, retries=2)
        with pytest.raises(CallFailed, match="server error 500.*gave up after 3 attempts"):
            client.chat(client.request(HELLO))
    assert records[-1].reply is None and "gave up" in records[-1].error


def test_a_slow_reply_times_out() -> None:
    with FakeOpenAI() as srv:
        srv.script = [Step(text="late", delay_s=2.0)]
        client, _ = client_for(srv, timeout_s=0.5, retries=0)
        with pytest.raises(LLMError, match="no answer .* within 0.5 s"):
            client.chat(client.request(HELLO))


def test_the_budget_stops_further_calls() -> None:
    with FakeOpenAI() as srv:
        srv.script = [Step(text="one two three four five")] * 3
        client, _ = client_for(srv, budget_tokens=8)
        client.chat(client.request(HELLO))  # 4 prompt + 5 completion tokens: over budget after it
        with pytest.raises(BudgetExceeded, match="9 of 8 tokens"):
            client.chat(client.request(HELLO, sample=1))
    assert len(srv.requests) == 1


def test_identical_requests_come_from_the_cache_but_other_samples_do_not(tmp_path: Path) -> None:
    with FakeOpenAI() as srv:
        srv.script = [Step(text="first"), Step(text="second")]
        config = LLMConfig(model="fake-coder", base_url=srv.url, prices={"fake-coder": Price(input=1, output=1)})
        client = make_client(config, cache_dir=tmp_path)
        a = client.chat(client.request(HELLO, sample=0))
        b = client.chat(client.request(HELLO, sample=0))
        c = client.chat(client.request(HELLO, sample=1))
        again = make_client(config, cache_dir=tmp_path).chat(client.request(HELLO, sample=0))  # another process later
    assert (a.text, b.text, c.text, again.text) == ("first", "first", "second", "first")
    assert b.cached and again.cached and b.cost_usd == 0.0 and not c.cached
    assert len(srv.requests) == 2 and client.spend.cached_calls == 1
    assert isinstance(client.cache, DirectoryCache)


def test_an_unusable_endpoint_is_reported_before_any_work() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    with pytest.raises(EndpointError, match="cannot reach"):
        make_client(LLMConfig(model="m", base_url=dead)).check()
    with FakeOpenAI(key="right") as srv:
        with pytest.raises(EndpointError, match=r"401 Unauthorized: it needs an API key, and \$KC_TEST_NO_SUCH_KEY is not set"):
            make_client(LLMConfig(model="fake-coder", base_url=srv.url, api_key_env="KC_TEST_NO_SUCH_KEY")).check()
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("KC_TEST_KEY", "wrong")
            with pytest.raises(EndpointError, match=r"rejected the API key in \$KC_TEST_KEY"):
                make_client(LLMConfig(model="fake-coder", base_url=srv.url, api_key_env="KC_TEST_KEY")).check()
    with FakeOpenAI(models=["qwen"]) as srv:
        with pytest.raises(EndpointError, match="does not serve model 'gpt-x'.*qwen"):
            make_client(LLMConfig(model="gpt-x", base_url=srv.url)).check()
        make_client(LLMConfig(model="qwen", base_url=srv.url)).check()


def test_a_base_url_without_v1_is_caught_and_the_fix_named() -> None:
    with FakeOpenAI(models=["fake-coder"]) as srv:
        bare = f"http://127.0.0.1:{srv.port}"
        with pytest.raises(EndpointError) as e:
            make_client(LLMConfig(model="fake-coder", base_url=bare + "/")).check()
        assert str(e.value) == f"{bare} answered 404 for /models and /chat/completions: is the base URL missing /v1? (try {bare}/v1)"
        with pytest.raises(EndpointError, match=r"answered 404 for /models and /chat/completions \(Not Found\): is the base URL right"):
            make_client(LLMConfig(model="fake-coder", base_url=bare + "/api/v1")).check()
        assert srv.requests == []  # the probe never reached a chat
    with FakeOpenAI(models=["fake-coder"], model_list=False) as srv:  # no model list, but a chat: the URL is right
        make_client(LLMConfig(model="fake-coder", base_url=srv.url)).check()
        (probe,) = srv.requests
        assert probe["max_tokens"] == 1


def test_the_cache_is_keyed_by_endpoint(tmp_path: Path) -> None:
    def ask(url: str) -> str:
        client = make_client(LLMConfig(model="fake-coder", base_url=url), cache_dir=tmp_path)
        return client.chat(client.request(HELLO)).text

    with FakeOpenAI() as a, FakeOpenAI() as b:
        a.script, b.script = [Step(text="from a")], [Step(text="from b")]
        assert ask(a.url) == "from a"
        assert ask(b.url) == "from b"  # another server is asked, not answered with a's reply
        assert ask(a.url + "/") == "from a"  # the same address spelled with a trailing slash: cached
    assert (len(a.requests), len(b.requests)) == (1, 1)
    assert LLMConfig(model="m", base_url="HTTP://LocalHost:80/v1/").endpoint() == "openai:http://localhost/v1"
    assert LLMConfig(model="m").endpoint() == "openai:https://api.openai.com/v1"


def test_replay_answers_by_request_key_then_in_order(tmp_path: Path) -> None:
    config = LLMConfig.from_spec(f"replay:{tmp_path / 'r.jsonl'}")
    client = make_client(config)
    keyed = client.request(HELLO, sample=3)
    (tmp_path / "r.jsonl").write_text("\n".join(json.dumps(x) for x in [
        {"text": "in order 1", "usage": {"prompt_tokens": 1, "completion_tokens": 2}},
        {"key": keyed.key(), "text": "for sample 3"},
        {"text": "in order 2"},
    ]))
    client = make_client(config)
    client.check()
    assert client.chat(keyed).text == "for sample 3"
    assert [client.chat(client.request(HELLO, sample=i)).text for i in range(2)] == ["in order 1", "in order 2"]
    with pytest.raises(CallFailed, match="no answer left"):
        client.chat(client.request(HELLO, sample=9))
    with pytest.raises(EndpointError, match="no replay file"):
        make_client(LLMConfig.from_spec(f"replay:{tmp_path / 'missing.jsonl'}")).check()


def test_model_specs_and_price_patterns() -> None:
    assert LLMConfig.from_spec("gpt-4o").provider == "openai"
    a = LLMConfig.from_spec("anthropic:claude-x")
    assert (a.provider, a.model) == ("anthropic", "claude-x")
    b = LLMConfig.from_spec("batch:/tmp/x:qwen")
    assert (b.provider, b.path, b.model) == ("batch", "/tmp/x", "qwen")
    cfg = LLMConfig(model="m", prices={"deepseek-*": Price(input=0.3, output=1.2), "deepseek-r1": Price(input=1, output=2)})
    assert cfg.price("deepseek-r1").input == 1 and cfg.price("deepseek-v3").input == 0.3 and cfg.price("other") is None
    with pytest.raises(ValueError, match="unknown provider"):
        LLMConfig(model="m", provider="carrier-pigeon")


def test_the_longest_reply_fits_the_model() -> None:
    assert DEFAULT_MAX_TOKENS == 32768 and LLMConfig(model="qwen3-coder").reply_limit() == 32768
    assert LLMConfig(model="gpt-4o-mini").reply_limit() == 16384  # the provider's documented maximum
    assert LLMConfig(model="openrouter/claude-opus-4-1").reply_limit() == 32000
    per_model = LLMConfig(model="qwen3-coder", max_tokens_per_model={"qwen3-*": 65536, "gpt-4o*": 4000})
    assert per_model.reply_limit() == 65536
    assert LLMConfig(model="gpt-4o", max_tokens=1000, max_tokens_per_model={"gpt-4o*": 4000}).reply_limit() == 1000
    assert make_client(LLMConfig.from_spec("replay:/nonexistent")).request(HELLO).sampling.max_tokens == 32768
    with pytest.raises(ValueError, match="at least 1 token: m=0"):
        LLMConfig(model="m", max_tokens_per_model={"m": 0})


def test_reasoning_comes_apart_from_the_answer_and_is_stored_with_the_call(tmp_path: Path) -> None:
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "fake-coder", "choices": [{
        "index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "the answer",
                                                          "reasoning_content": "first, think"}}],
            "usage": {"prompt_tokens": 4, "completion_tokens": 30, "completion_tokens_details": {"reasoning_tokens": 28}}}
    with FakeOpenAI() as srv:
        srv.script = [Step(raw=json.dumps(body))]
        client, records = client_for(srv, prices={"fake-*": Price(input=1.0, output=10.0)})
        reply = client.chat(client.request(HELLO))
    assert (reply.text, reply.reasoning, reply.usage.reasoning_tokens) == ("the answer", "first, think", 28)
    assert reply.cost_usd == pytest.approx((4 + 30 * 10.0) / 1e6) and client.spend.completion_tokens == 30
    with Store(tmp_path / "ws") as store:
        store.record_llm_call(records[0], None)
        (call,) = store.llm_calls()
        assert call.reasoning_tokens == 28 and (store.workspace / call.reasoning_path).read_text() == "first, think"
        assert (store.workspace / call.reply_path).read_text() == "the answer"

