"""How the `openai` and `anthropic` SDKs' failures become ours. Both SDKs are generated from one
template and raise the same exception classes, so one mapping serves both; each backend says
only what a refused request (an HTTP status) means for its API."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from ..errors import EndpointError, LLMError, TransientError


def api_message(e: Any) -> str:
    """The API's own explanation from an error body (OpenAI's `error.message`, or the `detail` of a FastAPI server
    such as vLLM), else the SDK's."""
    body = e.body
    if isinstance(body, dict) and isinstance(body.get("error"), dict) and body["error"].get("message"):
        return str(body["error"]["message"])
    if isinstance(body, dict) and isinstance(body.get("detail"), str):
        return body["detail"]
    return str(e.message)


def unauthorized(where: str, key_env: str, key_sent: bool) -> str:
    """What a 401 means, naming the variable the key is read from: a key that was refused, or none sent."""
    if key_sent:
        return f"{where} rejected the API key in ${key_env}"
    return f"{where} answered 401 Unauthorized: it needs an API key, and ${key_env} is not set"


@contextmanager
def checking(sdk: ModuleType, where: str, what: str, on_not_found: Callable[[], None], on_unauthorized: str) -> Iterator[None]:
    """Failures of an endpoint check (`what`: the lookup it makes) as EndpointError (`on_unauthorized`: the
    message for a 401); a 404 is the backend's to judge."""
    try:
        yield
    except sdk.AuthenticationError:
        raise EndpointError(on_unauthorized) from None
    except sdk.PermissionDeniedError:
        raise EndpointError(f"{where} refused access (permission denied)") from None
    except sdk.NotFoundError:
        on_not_found()
    except sdk.APIConnectionError:  # timeouts included
        raise EndpointError(f"cannot reach {where}: is the server running and the URL right?") from None
    except sdk.APIError as e:
        raise EndpointError(f"{where} answered {what} with an error: {api_message(e)}") from None


@contextmanager
def calling(sdk: ModuleType, where: str, timeout: float, status_error: Callable[[Any], LLMError]) -> Iterator[None]:
    """Failures of a model call: lost connections, timeouts and malformed answers are transient;
    an HTTP status is what `status_error` makes of it."""
    try:
        yield
    except sdk.APITimeoutError:
        raise TransientError(f"no answer from {where} within {timeout:g} s") from None
    except sdk.APIConnectionError:
        raise TransientError(f"lost the connection to {where}") from None
    except (sdk.APIResponseValidationError, json.JSONDecodeError):
        raise TransientError(f"{where} sent a malformed answer") from None
    except sdk.APIStatusError as e:
        raise status_error(e) from None
