"""The ways a model call fails, each with a one-line message fit for a user."""

from __future__ import annotations


class LLMError(Exception):
    """A call failed for good (bad request, refused, retries spent)."""


class EndpointError(LLMError):
    """The endpoint cannot be used at all: unreachable, or it rejects the key or the model."""


class TransientError(LLMError):
    """Worth retrying: rate limited, server error, timeout, a malformed answer."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class CallFailed(LLMError):
    """A call that got no reply: the endpoint failed it on every try (a lost connection, a server error, a
    rate limit, a timeout), or a replay had no answer left. Not the model's doing, so it is no turn: the
    run stops with the call pending, and `--resume` asks it again."""


class BudgetExceeded(LLMError):
    """The run's token or dollar budget is spent; no further calls are made."""


class BatchPending(LLMError):
    """The reply to a batch request is not in yet: the request is in a round's requests file, or held
    for the round the backend writes when the run stops (`requests_file` None). The caller stops
    this line of work; once the replies are in the batch directory, the run is resumed."""

    def __init__(self, message: str, requests_file: str | None) -> None:
        super().__init__(message)
        self.requests_file = requests_file
