"""Trusted reference data for a task on a device: outputs for the secret seeds (held in the
parent's memory only), FLOPs and bytes, and the reference timed alone."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from .verdict import TimingStats


class TaskRunError(Exception):
    """The task itself (not a candidate) failed to run; one line for the user."""


@dataclass
class ReferenceData:
    outputs: list[list[Any]]  # per correctness seed, the flattened forward result (CPU tensors)
    meta: list[list[dict[str, Any]]]
    mutates_inputs: bool
    aliases_input: bool
    flops: int
    bytes: int
    trusted_future: Future[TimingStats]  # the reference timed alone; measured after the outputs
    env: dict[str, Any] = field(default_factory=dict)
    # The binary_exact check: per 0/1 input set, its seed and share of ones, and the exact outputs
    # (NaN where the task's dtype cannot hold the exact value).
    binary: list[dict[str, Any]] = field(default_factory=list)
    binary_outputs: list[list[Any]] = field(default_factory=list)

    @property
    def trusted(self) -> TimingStats:
        """The trusted time; waits for it (raises TaskRunError if the timing failed)."""
        return self.trusted_future.result()

    @property
    def output_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for outs in self.outputs[:1] for t in outs if hasattr(t, "numel"))

    @property
    def held_bytes(self) -> int:
        """What the outputs of every seed occupy in the parent's memory."""
        return self.output_bytes * (len(self.outputs) + len(self.binary_outputs))
