"""Recorded model calls: the one writer and the one reader of the files a run keeps for each call
(`<workspace>/runs/<run>/llm/`). The store writes them, the replay backend answers from them, the
SFT export reads its examples from them.

A call is `<stem>.prompt.json` (model, sample, purpose, task, sampling, messages, and the usage
where the call was answered), `<stem>.reply.md` (the reply; none when the call failed) and
`<stem>.reasoning.md` (a reasoning model's thinking, where it had any)."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from .types import CallRecord, ChatRequest, Completion, Message, Sampling, Usage

PROMPT, REPLY, REASONING = ".prompt.json", ".reply.md", ".reasoning.md"


class RecordingError(ValueError):
    """A recorded prompt that cannot be read: its file is gone or is not a recorded prompt."""


@dataclass(frozen=True)
class CallFiles:
    """Where one recorded call's files are: the prompt always, the reply and the reasoning where written."""

    prompt: Path
    reply: Path | None = None
    reasoning: Path | None = None

    @classmethod
    def beside(cls, prompt: Path) -> CallFiles:
        """The files recorded with `prompt`, those that are there."""
        stem = prompt.name.removesuffix(PROMPT)
        reply, reasoning = prompt.with_name(stem + REPLY), prompt.with_name(stem + REASONING)
        return cls(prompt, reply if reply.is_file() else None, reasoning if reasoning.is_file() else None)

    @property
    def answered(self) -> bool:
        """Whether the call's reply is there to read."""
        return self.reply is not None and self.reply.is_file()


@dataclass(frozen=True)
class RecordedCall:
    """One model call as a run keeps it: the request, and the reply with its usage when it was answered."""

    model: str
    messages: tuple[Message, ...]
    sample: int = 0
    purpose: str = ""
    task: str = ""
    sampling: Sampling | None = None  # None only in a record older than the sampling's recording
    usage: Usage | None = None  # None: the call failed
    reply: str | None = None  # None: the call failed, or its reply file is gone
    reasoning: str = ""

    @classmethod
    def of(cls, record: CallRecord) -> RecordedCall:
        """The client's record of a call, as it is kept."""
        req, reply = record.request, record.reply
        return cls(model=req.model, messages=req.messages, sample=req.sample, purpose=req.purpose, task=req.task,
                   sampling=req.sampling, usage=reply.usage if reply else None, reply=reply.text if reply else None,
                   reasoning=reply.reasoning if reply else "")

    def request(self) -> ChatRequest:
        """The request as it was sent (what a replay answers again); RecordingError without its sampling."""
        if self.sampling is None:
            raise RecordingError("no sampling recorded")
        return ChatRequest(model=self.model, messages=self.messages, sampling=self.sampling, sample=self.sample,
                           purpose=self.purpose, task=self.task)


def write_call(folder: Path, call: RecordedCall) -> CallFiles:
    """Write `call` under `folder` (made if missing), a new stem each time; the files written."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{time.strftime('%H%M%S')}-{uuid.uuid4().hex[:8]}"
    prompt = folder / (stem + PROMPT)
    recorded: dict[str, Any] = {"model": call.model, "sample": call.sample, "purpose": call.purpose, "task": call.task}
    if call.sampling is not None:
        recorded["sampling"] = asdict(call.sampling)
    recorded["messages"] = [asdict(m) for m in call.messages]
    if call.usage is not None:  # with the sampling, what `replay:` needs to answer this request again
        recorded["usage"] = asdict(call.usage)
    prompt.write_text(json.dumps(recorded, indent=1))
    if call.reply is None:
        return CallFiles(prompt)
    reply = folder / (stem + REPLY)
    reply.write_text(call.reply)
    reasoning = None
    if call.reasoning:
        reasoning = folder / (stem + REASONING)
        reasoning.write_text(call.reasoning)
    return CallFiles(prompt, reply, reasoning)


def read_reply(files: CallFiles) -> str | None:
    """The reply's text, or None when the call recorded none (a reply file named but gone raises OSError)."""
    return files.reply.read_text() if files.reply is not None else None


def read_call(files: CallFiles) -> RecordedCall:
    """The call recorded in `files`; RecordingError when its prompt is gone or is not a recorded prompt."""
    try:
        d = json.loads(files.prompt.read_text())
        call = RecordedCall(model=d["model"], messages=tuple(Message(**m) for m in d["messages"]),
                            sample=int(d.get("sample", 0)), purpose=d.get("purpose", ""), task=d.get("task", ""),
                            sampling=Sampling(**d["sampling"]) if "sampling" in d else None,
                            usage=Usage(**d["usage"]) if "usage" in d else None)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise RecordingError(f"{files.prompt}: not a recorded prompt ({e})") from None
    reasoning = files.reasoning.read_text() if files.reasoning is not None and files.reasoning.is_file() else ""
    return replace(call, reply=read_reply(files), reasoning=reasoning)


def replayable_calls(folder: Path) -> list[tuple[ChatRequest, Completion]]:
    """The request and the answer of every call recorded in `folder` that was answered, in the order of
    their files' names (a failed call has nothing to replay: its prompt is not read). RecordingError for
    a prompt that cannot be read or replayed."""
    found = []
    for prompt in sorted(folder.glob("*" + PROMPT)):
        files = CallFiles.beside(prompt)
        if not files.answered:
            continue
        call = read_call(files)
        if call.reply is None:  # gone since it was listed
            continue
        try:
            request = call.request()
        except RecordingError as e:
            raise RecordingError(f"{prompt}: not a recorded prompt ({e})") from None
        found.append((request, Completion(text=call.reply, usage=call.usage or Usage(), model=call.model)))
    return found
