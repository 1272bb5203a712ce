"""The judge as a reward service: `kernelcraft serve-judge` puts the judge behind an HTTP API with a
persisted job queue, so rollout workers on other machines submit candidates and read verdicts.

Clients import `JudgeClient` from here (httpx only); the server side (FastAPI, uvicorn) lives in
`server`, `app` and `queue`, imported only where a service runs.
"""

from .client import JudgeClient, ServiceError
from .models import Health, JobStatus, JobView, SubmitRequest, SubmitResponse

__all__ = ["Health", "JobStatus", "JobView", "JudgeClient", "ServiceError", "SubmitRequest", "SubmitResponse"]
