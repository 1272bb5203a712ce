"""The coder agent: prompts from templates, replies parsed into candidates, verdicts into feedback."""

from __future__ import annotations

import json

import jinja2
import pytest
from pydantic import ValidationError

from kernelcraft.agents import Coder, ParseFailure, Truncated, extract_candidate, render
from kernelcraft.judge import DeviceDescription, Flag, JudgeConfig, Status, TaskRules, TimingStats, Verdict
from kernelcraft.llm import LLMConfig, make_client
from kernelcraft.search import OptimizeConfig
from kernelcraft.tasks import resolve_task

from .fake_openai import FakeOpenAI, Step

MODEL = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


@pytest.mark.parametrize("reply", [
    f"Here is my kernel.\n\n```python\n{MODEL}```\n\nIt fuses everything.",
    f"```\n{MODEL}```",
    f"Draft:\n```python\nclass ModelNew: pass  # draft\n```\nFinal:\n```python\n{MODEL}```",
    f"```cpp\n__global__ void k() {{}}\n```\nand the module:\n```py\n{MODEL}```",
    f"Sure!\n```python\n{MODEL}",  # cut off before the closing fence
    MODEL,  # bare code
])
def test_the_final_python_block_with_modelnew_is_the_candidate(reply: str) -> None:
    assert extract_candidate(reply) == MODEL


@pytest.mark.parametrize("reply, why", [
    ("", "empty"),
    ("I cannot help with that.", "no code block"),
    ("```python\nclass Model(torch.nn.Module): pass\n```", "none of the 1 code block"),
])
def test_replies_without_modelnew_are_parse_failures(reply: str, why: str) -> None:
    out = extract_candidate(reply)
    assert isinstance(out, ParseFailure) and why in out.message


def test_the_opening_prompt_carries_task_device_rules_and_format() -> None:
    coder = Coder(make_client(LLMConfig.from_spec("replay:/nonexistent")), "triton", DeviceDescription("cuda", "NVIDIA H100", "9.0", 80))
    task = resolve_task("softmax_rows")
    system, user = coder.opening(task, TaskRules.of(JudgeConfig(), task, "cuda"))
    assert system.role == "system" and "atol=0.0001" in system.content and "@triton.jit" in system.content
    assert "no caching of results between calls" in system.content and "```python" in system.content
    assert task.source.strip() in user.content and "NVIDIA H100 (compute capability 9.0, 80 GB)" in user.content
    with pytest.raises(ValueError, match="unknown language"):
        Coder(coder.client, "fortran", coder.device)
    with pytest.raises(jinja2.UndefinedError):
        render("coder_task", language_name="CUDA")


def test_a_cpu_run_asks_for_cpu_cpp_and_describes_the_cpu() -> None:
    cpu = DeviceDescription("cpu", "x86_64", features="AMD EPYC, 2 cores, AVX2, FMA")
    task = resolve_task("softmax_rows")
    system, user = Coder(None, "cpp", cpu).opening(task, TaskRules.of(JudgeConfig(), task, "cpu"))
    assert "expert CPU performance engineer" in system.content and "custom C++ kernels" in system.content
    assert "-march=native" in system.content and "at::parallel_for" in system.content
    assert "CUDA" not in system.content and "GPU" not in system.content
    assert "Target device: x86_64 (AMD EPYC, 2 cores, AVX2, FMA)." in user.content and "Language: C++." in user.content
    assert OptimizeConfig(target="t", device="cpu", llm=LLMConfig(model="m")).search.language == "cpp"
    assert OptimizeConfig(target="t", device="cuda", llm=LLMConfig(model="m")).search.language == "cuda"
    with pytest.raises(ValidationError, match="does not run on --device cuda: use cuda or triton"):
        OptimizeConfig(target="t", device="cuda", llm=LLMConfig(model="m"), search={"language": "cpp"})
    with pytest.raises(ValidationError, match="does not run on --device cpu: use cpp or triton"):
        OptimizeConfig(target="t", device="cpu", llm=LLMConfig(model="m"), search={"language": "cuda"})


def test_feedback_carries_what_the_judge_found() -> None:
    bad = Verdict(status=Status.INCORRECT, task="t", device="cuda",
                  message="seed 1/5: 12/4096 elements outside tolerance; worst at index (3, 7): got 1.5, expected 1.25")
    text = Coder.feedback(bad).content
    assert "**incorrect**" in text and "worst at index (3, 7)" in text and "Fix it" in text
    good = Verdict(status=Status.CORRECT, task="t", device="cuda", message="correct; 1.80x", speedup=1.8,
                   speedup_band=(1.75, 1.85), coverage=0.32, reference=TimingStats.of([1.8] * 5),
                   candidate=TimingStats.of([1.0] * 5), flags=[Flag("low_coverage", "only some")])
    text = Coder.feedback(good).content
    assert "1.800 ms for the reference, 1.000 ms for yours: 1.80x (noise band 1.75-1.85x)" in text
    assert "32%" in text and "Note (low_coverage)" in text and "Make it faster" in text
    assert "could not be used: the reply was empty" in Coder.feedback(ParseFailure("the reply was empty")).content


def test_propose_asks_the_model_and_parses_its_answer() -> None:
    with FakeOpenAI() as srv:
        srv.script = [Step(text=f"```python\n{MODEL}```"), Step(text="no code, sorry")]
        coder = Coder(make_client(LLMConfig(model="fake-coder", base_url=srv.url)), "cuda", DeviceDescription("cpu", "x86_64"))
        task = resolve_task("softmax_rows")
        messages = coder.opening(task, TaskRules.of(JudgeConfig(), task, "cpu"))
        first = coder.propose(messages, task="examples/softmax_rows")
        second = coder.propose(messages, task="examples/softmax_rows", sample=1)
    assert first.candidate == MODEL and isinstance(second.candidate, ParseFailure)
    assert srv.requests[0]["messages"][0]["role"] == "system" and "load_inline" in srv.requests[0]["messages"][0]["content"]


def test_a_reply_cut_at_the_limit_is_truncated_unless_a_whole_block_came_before_the_cut() -> None:
    out = extract_candidate(f"Sure!\n```python\n{MODEL}", cut_at=4096)  # cut inside its only block
    assert isinstance(out, Truncated) and out.max_tokens == 4096 and "cut at the 4096-token limit" in out.message
    assert extract_candidate(f"```python\n{MODEL}```\nNow, line by line: the fir", cut_at=4096) == MODEL
    text = Coder.feedback(out).content
    assert "cut off at the 4096-token limit" in text and "shorter" in text and "complete" in text and "```python" in text


def test_propose_knows_a_reply_cut_at_the_limit() -> None:
    cut = {"id": "c", "object": "chat.completion", "created": 0, "model": "fake-coder", "usage": {
        "prompt_tokens": 9, "completion_tokens": 777}, "choices": [{"index": 0, "finish_reason": "length", "message": {
            "role": "assistant", "content": f"```python\n{MODEL[:40]}"}}]}
    with FakeOpenAI() as srv:
        srv.script = [Step(raw=json.dumps(cut))]
        coder = Coder(make_client(LLMConfig(model="fake-coder", base_url=srv.url, max_tokens=777)), "cuda",
                      DeviceDescription("cpu", "x86_64"))
        task = resolve_task("softmax_rows")
        proposal = coder.propose(coder.opening(task, TaskRules.of(JudgeConfig(), task, "cpu")), task=task.key)
    assert proposal.reply.truncated and proposal.candidate == Truncated(
        "the reply was cut at the 777-token limit before its code was complete", 777)
    assert srv.requests[0]["max_tokens"] == 777

