"""Where and how the judge service runs; the judge's own settings are a JudgeConfig beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from pydantic import BaseModel, Field


class ServeConfig(BaseModel):
    host: str = "127.0.0.1"  # loopback unless asked: the token travels in clear over plain HTTP
    port: int = Field(8765, ge=0, le=65535)  # 0: any free port (the bound one is announced)
    device: str = "cuda"
    workers: Optional[int] = Field(None, ge=1)  # concurrent evaluations per device (default: the executor's)
    gpus: Optional[str] = None  # this machine's GPUs: "all" (the default) or "0,1"
    ray: Optional[str] = None  # a Ray cluster's address (or auto, local): judge on it instead
    # Directories whose .py files clients may name as tasks, besides the bundled tasks and task source: none unless
    # given, since a path from a client is otherwise a path on this machine.
    task_roots: tuple[Path, ...] = ()
