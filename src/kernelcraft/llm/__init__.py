"""Language-model backends behind one client: OpenAI-compatible endpoints (the `openai` SDK),
Anthropic (optional extra), replay files and batch files; with concurrency limits, retries,
timeouts, token and cost accounting, budgets and a response cache; and the files each call is
recorded in (`recording`: the store writes them, replay and the SFT export read them). Knows
nothing of kernels."""

from .cache import DirectoryCache, ResponseCache
from .client import LLMClient, Spend
from .config import LLMConfig, Price
from .errors import BatchPending, BudgetExceeded, CallFailed, EndpointError, LLMError, TransientError
from .factory import make_backend, make_client
from .limits import DEFAULT_MAX_TOKENS, KNOWN_MAX_TOKENS, known_max_tokens
from .recording import CallFiles, RecordedCall, RecordingError, read_call, read_reply, replayable_calls, write_call
from .types import CUT_REASONS, CallRecord, ChatReply, ChatRequest, Completion, Message, Sampling, Usage

__all__ = [
    "CUT_REASONS", "DEFAULT_MAX_TOKENS", "KNOWN_MAX_TOKENS", "BatchPending", "BudgetExceeded", "CallFiles", "CallRecord",
    "CallFailed", "ChatReply", "ChatRequest", "Completion", "DirectoryCache", "EndpointError", "LLMClient", "LLMConfig", "LLMError", "Message",
    "Price", "RecordedCall", "RecordingError", "ResponseCache", "Sampling", "Spend", "TransientError", "Usage",
    "known_max_tokens", "make_backend", "make_client", "read_call", "read_reply", "replayable_calls", "write_call",
]
