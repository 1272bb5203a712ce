"""The worker's end of the line to the judge (protocol.py: the messages). Standard library only."""

from __future__ import annotations

import json
from typing import Any

from ..protocol import Reply, Request, decode_reply, encode
from .rejection import Rejection


class Channel:
    """The worker's side of the line protocol: commands come on stdin, answers go on the private pipe,
    each with the judge's nonce. `ask` puts a request to the judge in the middle of a command (a
    build, a spot check: what the candidate's process must not do or decide itself) and waits for
    the judge's reply on stdin."""

    def __init__(self, reply: Any, commands: Any) -> None:
        self.reply = reply
        self.commands = commands
        self.nonce = ""

    def read(self) -> dict[str, Any] | None:
        line = self.commands.readline()
        return json.loads(line) if line else None

    def write(self, message: dict[str, Any]) -> None:
        self.reply.write(json.dumps({**message, "nonce": self.nonce}, default=str) + "\n")
        self.reply.flush()

    def ask(self, request: Request) -> Reply:
        self.write(encode(request))
        answer = self.read()
        if answer is None:
            raise Rejection("judge_error", f"the judge went away while the worker waited for {type(request).KIND!r}")
        return decode_reply(request, answer)
