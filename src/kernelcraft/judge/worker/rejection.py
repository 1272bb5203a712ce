"""How a worker command ends short of its answer: a `Rejection` with a verdict status, and the
helpers that word a failure of the task's or the candidate's code. Standard library and torch only."""

from __future__ import annotations

import errno
import traceback
from pathlib import Path
from typing import Any

import torch

TASK_FILE = "task.py"
CANDIDATE_FILE = "candidate.py"
# Errors of the machine, not of the code that met them: the judge's fault wherever the judge's own work hits them.
MACHINE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.ENOMEM, errno.EIO, errno.EROFS}


class Rejection(Exception):
    """Ends a command with a verdict status (hack_detected, incorrect, load_failed, judge_error...)."""

    def __init__(self, status: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.status = status
        self.details = details


def user_traceback(exc: BaseException, filenames: tuple[str, ...]) -> str:
    """The exception with the innermost frame that lies in the task's or candidate's own file."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename in filenames]
    where = f"{frames[-1].filename}:{frames[-1].lineno}: " if frames else ""
    text = f"{type(exc).__name__}: {exc}".strip()
    if len(text) > 1500:
        text = text[:1500] + " ..."
    return where + text



_DEVICE_OOM = ("CUDA out of memory", "CUDA error: out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "CUDNN_STATUS_ALLOC_FAILED",
               "CUDNN_STATUS_NOT_ENOUGH_WORKSPACE")



def device_oom(e: BaseException) -> bool:
    """The device ran out of memory (the allocator's error, or a library's or a launch's that says so)."""
    return isinstance(e, torch.OutOfMemoryError) or isinstance(e, RuntimeError) and any(m in str(e) for m in _DEVICE_OOM)



def judge_write(path: str, text: str) -> None:
    """A file the judge itself writes: a machine that cannot take it (a full disk) is the judge's fault."""
    try:
        Path(path).write_text(text)
    except OSError as e:
        raise Rejection("judge_error", f"the judge could not write {path}: {e.strerror or e}") from None

