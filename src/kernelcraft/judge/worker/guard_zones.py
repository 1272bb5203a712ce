"""Guard zones (worker side): catch a candidate that writes outside its result.

Inputs are handed over as views into larger buffers whose margins hold a canary; after the call
the margins must be intact. The output cannot be placed by the judge (the candidate allocates
it), so on CUDA the judge arranges the allocator instead: the candidate's forward runs in a
private memory pool in which the block its output will take is already followed by a judge-owned
canary region. A kernel that writes past the end of its output (a missing store mask on the last
tile, the classic GEMM bug) lands in that region. Every canary byte is 0xFF, which reads as NaN in
every floating dtype, so a candidate that returns memory it never wrote also shows.

Imports only torch: it runs in the sandboxed worker.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

CANARY = 0xFF
INPUT_GUARD_BYTES = 64 << 10
_BLOCK = 512  # the caching allocator rounds every request to this
_SMALL = 1 << 20  # requests up to this come from the allocator's small pool (2 MB segments)
_LARGE_GUARD = 2 << 20  # over 1 MB so the allocator splits the block and the guard follows the slot


def _round(n: int) -> int:
    return (n + _BLOCK - 1) // _BLOCK * _BLOCK


@dataclass
class InputGuards:
    """The candidate's inputs, each inside a canary-margined buffer."""

    inputs: list[Any]
    buffers: list[tuple[int, torch.Tensor, int, int]] = field(default_factory=list)  # (input index, buffer, start, end)

    def breached(self) -> list[int]:
        """Indices of inputs whose margins changed."""
        return [i for i, buf, lo, hi in self.buffers
                if not (bool((buf[:lo] == CANARY).all()) and bool((buf[hi:] == CANARY).all()))]


def guard_inputs(xs: list[Any], margin: int = INPUT_GUARD_BYTES) -> InputGuards:
    """Copies of `xs` placed in the middle of canary-filled buffers (contiguous, same values)."""
    guards = InputGuards([])
    for i, x in enumerate(xs):
        if not isinstance(x, torch.Tensor) or x.numel() == 0:
            guards.inputs.append(x)
            continue
        x = x.contiguous()
        nbytes = x.numel() * x.element_size()
        lo = _round(margin)  # keeps the view aligned for vector loads
        buf = torch.full((lo + nbytes + margin,), CANARY, dtype=torch.uint8, device=x.device)
        view = buf[lo:lo + nbytes].view(x.dtype).view(x.shape)
        view.copy_(x)
        guards.inputs.append(view)
        guards.buffers.append((i, buf, lo, lo + nbytes))
    return guards


@dataclass
class OutputGuard:
    """How the output's guard was set up, and what it found."""

    armed: bool = False
    slot_ptr: int = 0
    guard: torch.Tensor | None = None
    output_in_slot: bool = False
    breached_bytes: int = 0

    def check(self, outputs: list[Any]) -> None:
        if self.guard is None:
            return
        self.output_in_slot = any(isinstance(o, torch.Tensor) and o.data_ptr() == self.slot_ptr for o in outputs)
        self.breached_bytes = int((self.guard != CANARY).sum().item())

    def describe(self) -> dict[str, Any]:
        return {"armed": self.armed, "output_in_slot": self.output_in_slot, "breached_bytes": self.breached_bytes}


@contextlib.contextmanager
def guarded_output(output_bytes: int, device: torch.device) -> Iterator[OutputGuard]:
    """Run the body (the candidate's forward) in a private CUDA memory pool whose free block of
    exactly `output_bytes` (rounded as the allocator rounds) is followed by a canary region the
    judge holds. Best-fit hands that block to the first allocation of the output's size, which is
    the output unless the candidate allocates a same-sized temporary first; either way no honest
    kernel writes the guard. On CPU, or if the allocator does not place the guard right after the
    slot, the guard is reported as not armed and the body runs unguarded."""
    state = OutputGuard()
    if device.type != "cuda" or output_bytes <= 0 or not hasattr(torch.cuda, "MemPool"):
        yield state
        return
    size = _round(output_bytes)
    gap = _LARGE_GUARD if size > _SMALL else min(64 << 10, (_SMALL - size) // _BLOCK * _BLOCK)
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        if gap >= _BLOCK:
            # One block of slot + guard, freed, then split in two: the guard lands right after the slot.
            whole = torch.empty(size + gap, dtype=torch.uint8, device=device)
            whole.fill_(CANARY)
            del whole
            slot = torch.empty(size, dtype=torch.uint8, device=device)
            guard = torch.empty(gap, dtype=torch.uint8, device=device)
            guard.fill_(CANARY)
            slot.fill_(CANARY)  # unwritten output memory reads as NaN
            torch.cuda.synchronize(device)
            if guard.data_ptr() == slot.data_ptr() + size:
                state.armed, state.slot_ptr, state.guard = True, slot.data_ptr(), guard
            del slot
        yield state
    del pool  # the pool's memory goes back when the candidate's tensors from it are gone
