"""No model: the backend of a run whose strategy asks none (the template search). It is always
reachable and never answers: a call reaching it is a mistake, reported as an unusable endpoint."""

from __future__ import annotations

from ..errors import EndpointError
from ..types import ChatRequest, Completion


class NoModel:
    def check(self) -> None:
        """Nothing to reach."""

    def complete(self, request: ChatRequest, timeout: float) -> Completion:
        raise EndpointError("this run has no language model (it was started without --model)")
