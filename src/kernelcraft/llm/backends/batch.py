"""Answers through files in a directory, for a provider's batch API (cheaper, slower) or for
answering by hand. Requests are gathered into rounds; each round is written as JSONL in the OpenAI
Batch API's input format, and replies are read from any other JSONL file in the directory in its
output format, matched to requests by `custom_id` (the request key), so they can be put there in
any order, under any name, while the run waits or before a later run resumes.

Without waiting (`wait_s` 0, the default) a request with no reply is held and answered BatchPending
at once, and `flush` (when the run has gone as far as it can) writes every held request as one
round. With waiting, the calls arriving within `window_s` of a round's first one form the round,
written at once, and each call waits up to `wait_s` for its reply.

- `round-NNNN.requests.jsonl`, written here, a line per request:
  `{"custom_id": KEY, "method": "POST", "url": "/v1/chat/completions", "body": {"model": ..., "messages": [...], ...}}`
- any other `*.jsonl`: replies, a line each:
  `{"id": ..., "custom_id": KEY, "response": {"status_code": 200, "request_id": ..., "body": CHAT_COMPLETION}, "error": null}`

Several runs may share one directory and its rounds (`kernelcraft bench`, one run per arm): each asks
through its own `BatchLane`, whose custom_ids are `LANE/KEY`, and the owner of the `Batch` flushes it
once, after every run, so a round holds every run's requests.

One process per directory: round numbers are not reserved across processes."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BatchPending, EndpointError, LLMError
from ..types import ChatRequest, Completion
from .openai_format import completion_of

REQUESTS_SUFFIX = ".requests.jsonl"
_ROUND = re.compile(r"round-(\d+)\.requests\.jsonl")
_FIRST_POLL_S = 0.05
# Replies take minutes to hours to come; a long wait need not look at the directory more often.
_MAX_POLL_S = 2.0


@dataclass
class _Reply:
    where: str  # FILE:LINE, for messages
    completion: Completion | None = None
    error: str | None = None

    def result(self) -> Completion:
        if self.completion is None:
            raise LLMError(f"{self.where}: the batch reply is an error: {self.error}")
        return self.completion


@dataclass
class _File:
    """What one JSONL file in the directory held when it had this (mtime, size) stamp."""

    stamp: tuple[int, int]
    replies: dict[str, _Reply] = field(default_factory=dict)
    requests: set[str] = field(default_factory=set)
    unreadable: int = 0  # lines that are not batch lines (or not yet whole ones)


@dataclass
class _Round:
    closes_at: float
    requests: dict[str, ChatRequest] = field(default_factory=dict)
    full: threading.Event = field(default_factory=threading.Event)
    written: threading.Event = field(default_factory=threading.Event)
    files: dict[str, Path] = field(default_factory=dict)  # request key -> the requests file holding it
    error: EndpointError | None = None


def custom_id(request: ChatRequest, lane: str = "") -> str:
    """The id a request goes by in the directory: its key, under its lane's name when it has one."""
    return f"{lane}/{request.key()}" if lane else request.key()


def request_line(request: ChatRequest, key: str | None = None) -> dict[str, Any]:
    """A request as a line of the OpenAI Batch API's input file (`key`: its custom_id, by default its own key)."""
    s = request.sampling
    body: dict[str, Any] = {"model": request.model, "messages": [asdict(m) for m in request.messages],
                            "temperature": s.temperature, "max_tokens": s.max_tokens}
    # Unset options are left out rather than sent as null, which some providers refuse.
    body.update({k: v for k, v in (("top_p", s.top_p), ("seed", s.seed)) if v is not None})
    return {"custom_id": key or request.key(), "method": "POST", "url": "/v1/chat/completions", "body": body}


def _parse_reply(d: dict[str, Any], where: str) -> _Reply:
    """A line of the OpenAI Batch API's output file; an error line, a status other than 200 or a
    body that is no chat completion become an error reply."""
    try:
        if d.get("error"):
            e = d["error"]
            return _Reply(where, error=str(e.get("message") or e) if isinstance(e, dict) else str(e))
        response = d["response"]
        body = response.get("body") or {}
        if response.get("status_code") != 200:
            err = body.get("error") if isinstance(body, dict) else None
            message = err.get("message") if isinstance(err, dict) else None
            return _Reply(where, error=f"status {response.get('status_code')}: {message or body}")
        return _Reply(where, completion_of(body["choices"][0], body.get("usage"), body.get("model") or ""))
    except (KeyError, IndexError, TypeError, AttributeError) as e:
        return _Reply(where, error=f"not a batch reply with a chat completion ({type(e).__name__}: {e})")


@dataclass(frozen=True)
class BatchSurvey:
    """What a batch directory holds: its requests, which of them have replies, where the others are."""

    directory: Path
    requests: int
    answered: int
    errors: int  # answers that are error lines: those calls fail
    pending: dict[str, int]  # requests file -> its requests without a reply
    unmatched: int  # replies to no request of the directory
    unreadable: dict[str, int]  # file -> lines that are no batch lines

    def summary(self) -> str:
        """One line, as `optimize --resume` reports it."""
        waiting = sum(self.pending.values())
        text = f"batch {self.directory}: {self.answered} of {self.requests} requests have replies"
        text += f" ({self.errors} of them errors)" if self.errors else ""
        text += f", {waiting} still pending"
        text += f" ({', '.join(f'{n} in {name}' for name, n in sorted(self.pending.items()))})" if waiting else ""
        text += f"; {self.unmatched} replies match no request" if self.unmatched else ""
        if self.unreadable:
            files = ", ".join(f"{name}: {n}" for name, n in sorted(self.unreadable.items()))
            text += f"; {sum(self.unreadable.values())} unreadable lines skipped ({files})"
        return text


class Batch:
    """`batch:DIR[:NAME]`: see the module's note for the two ways a round is formed. The client's
    per-call timeout does not apply."""

    def __init__(self, directory: Path, *, window_s: float = 2.0, wait_s: float = 0.0, round_size: int = 8) -> None:
        self.dir = Path(directory)
        self.window_s = window_s
        self.wait_s = wait_s
        self.round_size = round_size
        self._lock = threading.Lock()  # guards the file index, the open round and round writing
        self._files: dict[Path, _File] = {}
        self._open: _Round | None = None
        self._held: dict[str, ChatRequest] = {}  # without waiting: requests for the round `flush` writes
        self._waiting: dict[str, Path | None] = {}  # requests answered BatchPending -> their requests file (None: held)

    def check(self) -> None:
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            probe = self.dir / f".check.{os.getpid()}.tmp"
            probe.write_text("")
            probe.unlink()
        except OSError as e:
            raise EndpointError(f"cannot write to the batch directory {self.dir}: {e.strerror or e}") from None

    def complete(self, request: ChatRequest, timeout: float, lane: str = "") -> Completion:
        key = custom_id(request, lane)
        with self._lock:
            self._scan()
            found = self._find(key)
            if found is None and self.wait_s == 0:
                raise self._hold(key, request)
        if found is not None:  # answered in an earlier run's files: no new round
            return found.result()
        return self._await(key, self._join_round(key, request))

    def ready(self, request: ChatRequest, lane: str = "") -> bool:
        """Whether a reply to `request` is in (so asking it costs no new round)."""
        with self._lock:
            self._scan()
            return self._find(custom_id(request, lane)) is not None

    def _hold(self, key: str, request: ChatRequest) -> BatchPending:
        """Keep a request without a reply for the round `flush` writes, unless a requests file holds it
        already; what the call raises. With the lock held."""
        held_in = self._requests_file(key)
        if held_in is None:
            self._held[key] = request
        self._waiting[key] = held_in
        where = held_in.name if held_in is not None else "the round written when the run stops"
        return BatchPending(f"no reply yet: the request is in {where}", str(held_in) if held_in is not None else None)

    def _requests_file(self, key: str) -> Path | None:
        return next((path for path, f in self._files.items() if key in f.requests), None)

    def flush(self) -> str | None:
        """Write the held requests as one round; a line naming, by requests file, the requests of this
        process that still wait for a reply (None when none does)."""
        with self._lock:
            written = None
            if self._held:
                before = set(self._files)
                try:
                    files = self._write_round(self._held)
                except OSError as e:
                    raise EndpointError(f"cannot write the batch round to {self.dir}: {e.strerror or e}") from None
                self._waiting.update(files)
                written = next((path for path in files.values() if path not in before), None)
                self._held.clear()
            self._scan()
            waiting = Counter(path for key, path in self._waiting.items() if path is not None and self._find(key) is None)
        if not waiting:
            return None
        files = ", ".join(f"{n} in {path.name}" + (" (written now)" if path == written else "")
                          for path, n in sorted(waiting.items()))
        return (f"{sum(waiting.values())} model requests wait for batch replies ({files}): have them answered (a "
                f"provider's batch API takes each file as it is, or answer by hand), put the replies JSONL (OpenAI batch "
                f"output format) in {self.dir}, and resume")

    def survey(self) -> BatchSurvey:
        """What the directory holds now."""
        with self._lock:
            self._scan()
            asked = {key: path.name for path, f in self._files.items() for key in f.requests}
            answers = {key: self._find(key) for key in asked}
            replied = {key for f in self._files.values() for key in f.replies}
        return BatchSurvey(
            self.dir, len(asked), sum(1 for r in answers.values() if r is not None),
            sum(1 for r in answers.values() if r is not None and r.completion is None),
            dict(Counter(asked[key] for key, r in answers.items() if r is None)), len(replied - asked.keys()),
            {p.name: f.unreadable for p, f in self._files.items() if f.unreadable})

    def _join_round(self, key: str, request: ChatRequest) -> Path:
        """Add the request to the open round (opening one if none) and return, once the round is
        written, the requests file that holds it."""
        with self._lock:
            r = self._open
            leader = r is None
            if r is None:
                r = self._open = _Round(closes_at=time.monotonic() + self.window_s)
            r.requests.setdefault(key, request)
            if len(r.requests) >= self.round_size:
                r.full.set()
        if leader:
            r.full.wait(max(0.0, r.closes_at - time.monotonic()))
            with self._lock:
                self._open = None  # later calls open the next round
                try:
                    r.files = self._write_round(r.requests)
                except OSError as e:
                    r.error = EndpointError(f"cannot write the batch round to {self.dir}: {e.strerror or e}")
                finally:  # never leave the round's other calls waiting
                    r.written.set()
        else:
            r.written.wait()
        if r.error is not None:
            raise r.error
        return r.files[key]

    def _write_round(self, requests: dict[str, ChatRequest]) -> dict[str, Path]:
        """Write the requests no requests file holds yet as the next round (to a temporary name,
        then renamed, so a reader never sees half a file); with the lock held."""
        self._scan()
        files = {key: path for key in requests if (path := self._requests_file(key)) is not None}
        new = {key: q for key, q in requests.items() if key not in files}
        if not new:  # all asked in an earlier run, whose replies are still out
            return files
        number = 1 + max((int(m.group(1)) for p in self._files if (m := _ROUND.fullmatch(p.name))), default=0)
        path = self.dir / f"round-{number:04d}{REQUESTS_SUFFIX}"
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text("".join(json.dumps(request_line(q, key)) + "\n" for key, q in new.items()))
        tmp.replace(path)
        return files | dict.fromkeys(new, path)

    def _await(self, key: str, held_in: Path) -> Completion:
        deadline = time.monotonic() + self.wait_s
        pause = _FIRST_POLL_S
        while True:
            with self._lock:
                self._scan()
                found = self._find(key)
                if found is None and time.monotonic() >= deadline:
                    self._waiting[key] = held_in
                    raise BatchPending(self._pending_message(held_in), str(held_in))
            if found is not None:
                return found.result()
            time.sleep(max(0.0, min(pause, deadline - time.monotonic())))
            pause = min(2 * pause, _MAX_POLL_S)

    def _scan(self) -> None:
        """Bring the index of the directory's JSONL files up to date, reading only changed files."""
        files = {}
        for path in sorted(self.dir.glob("*.jsonl")):
            try:
                st = path.stat()
            except OSError:  # removed since listed
                continue
            stamp = (st.st_mtime_ns, st.st_size)
            known = self._files.get(path)
            files[path] = known if known is not None and known.stamp == stamp else self._read(path, stamp)
        self._files = files

    @staticmethod
    def _read(path: Path, stamp: tuple[int, int]) -> _File:
        f = _File(stamp)
        try:
            lines = path.read_text().splitlines()
        except (OSError, UnicodeDecodeError):
            f.unreadable = 1
            return f
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
            except ValueError:
                d = None
            key = d.get("custom_id") if isinstance(d, dict) else None
            if not isinstance(key, str):
                f.unreadable += 1
            elif path.name.endswith(REQUESTS_SUFFIX):
                f.requests.add(key)
            elif key not in f.replies or f.replies[key].completion is None:
                f.replies[key] = _parse_reply(d, f"{path.name}:{n}")
        return f

    def _find(self, key: str) -> _Reply | None:
        """The reply to `key` in any file; a completion wins over an error, so re-asking the
        failed requests and dropping in the new replies is enough."""
        best = None
        for f in self._files.values():
            r = f.replies.get(key)
            if r is not None and (best is None or best.completion is None):
                best = r
        return best

    def _pending_message(self, held_in: Path) -> str:
        asked = self._files[held_in].requests if held_in in self._files else set()
        waiting = sum(1 for key in asked if self._find(key) is None)
        message = (f"{waiting} of the {len(asked)} requests in {held_in} have no reply yet: have them answered "
                   f"(a provider's batch API takes the file as it is, or answer by hand), put the replies JSONL "
                   f"(OpenAI batch output format) in {self.dir}, and run again to resume")
        skipped = [f"{p.name} ({f.unreadable})" for p, f in self._files.items() if f.unreadable]
        return message + (f"; lines that are no batch lines were skipped in {', '.join(skipped)}" if skipped else "")


class BatchLane:
    """One run's way into a `Batch` that several runs share: its requests go by `LANE/KEY`, so equal requests of two
    runs are two requests, each answered for its own run. It writes no round itself (it has no `flush`): the
    `Batch`'s owner flushes once, after every run, and the round holds every run's requests."""

    def __init__(self, batch: Batch, lane: str) -> None:
        if not lane or "/" in lane:
            raise ValueError(f"a batch lane needs a name without '/': {lane!r}")
        self.batch = batch
        self.lane = lane

    def check(self) -> None:
        self.batch.check()

    def complete(self, request: ChatRequest, timeout: float) -> Completion:
        return self.batch.complete(request, timeout, lane=self.lane)

    def ready(self, request: ChatRequest) -> bool:
        return self.batch.ready(request, lane=self.lane)
