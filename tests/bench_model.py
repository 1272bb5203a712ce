"""The scripted model a bench's tests run on the CPU: every role answers, and the coder answers each prompt with the
example kernel of the task it names, made a distinct candidate by the prompt (so every reply costs a judge call, the
extension itself built once) and wrong (scaled by 1.5) for about a third of prompts; the same prompt, the same reply."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from kernelcraft.tasks import resolve_task

from .conftest import CANDIDATES
from .scripted import fenced, role

TASKS = ("leaky_relu_clamp", "row_mean_square")  # examples with a C++ kernel in examples/candidates/cpu
_RESULTS = {"leaky_relu_clamp": "return _ext.leaky_relu_clamp(", "row_mean_square": "return out.view("}
_KERNELS = {name: (CANDIDATES / "cpu" / f"{name}.py").read_text() for name in TASKS}
_SOURCES = {name: resolve_task(name).source.strip() for name in TASKS}
IDEAS = '```json\n{"ideas": ["Fuse every operation into one loop", "Vectorize the inner loop"]}\n```'
NO_SKILLS = '```json\n{"skills": []}\n```'


def suite(directory: Path) -> Path:
    """The two tasks as a suite directory."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in TASKS:
        (directory / f"{name}.py").write_text(resolve_task(name).source)
    return directory


def answer(messages: list[dict[str, Any]]) -> str:
    who = role(messages)
    if who == "planner":
        return IDEAS
    if who in ("selector", "summarizer"):
        return NO_SKILLS
    text = "\n".join(m["content"] for m in messages)
    name = next(n for n, source in _SOURCES.items() if source in text)
    digest = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
    source = _KERNELS[name].replace("class ModelNew(", f"VARIANT = {digest}\n\n\nclass ModelNew(", 1)
    if digest % 3 == 0:  # wrong: the right kernel, its result scaled
        source = source.replace(_RESULTS[name], _RESULTS[name].replace("return ", "return 1.5 * "))
    return fenced(source)


def answer_round(path: Path) -> Path:
    """Answer a round's requests file as a provider's batch API would (OpenAI batch output format), beside it."""
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    replies = path.with_name(path.name.replace(".requests.jsonl", ".replies.jsonl"))
    replies.write_text("".join(json.dumps({"custom_id": q["custom_id"], "error": None, "response": {
        "status_code": 200, "body": {"object": "chat.completion", "model": q["body"]["model"], "choices": [{
            "index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": answer(q["body"]["messages"])}}],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 200}}}}) + "\n" for q in lines))
    return replies
