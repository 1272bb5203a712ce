"""Outputs handed from a candidate's worker to the trusted process that compares them, one seed at a
time and without files (worker side: imports only the standard library and torch).

- CUDA: the trusted process maps the candidate's device memory through CUDA IPC. Nothing is copied
  and nothing reaches the host.
- CPU: the candidate's worker copies its outputs into a memory file (memfd) that the parent made for it.
  The parent passes that file to the trusted process over a Unix socket.

Either way, what one evaluation holds outside its processes is bounded by one seed's outputs, and
nothing touches the disk. Before, every seed's outputs went through `torch.save` to the scratch
directory: 64 GB for one evaluation of a 6.4 GB task, and a full disk blamed on the candidate.
A description is plain data (`SharedTensor.to_dict`), never a pickle: it passes through the parent from
a process the judge does not trust to one it does.
"""

from __future__ import annotations

import base64
import os
import socket
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

_ALIGN = 64  # bytes: every tensor in the memory file starts on a cache line

_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16, torch.int8,
    torch.uint8, torch.bool, torch.complex64, torch.complex128)}


class ExchangeError(Exception):
    """The judge could not hand an output over (a memory file that cannot grow, an IPC handle refused)."""


def dtype_named(name: str) -> torch.dtype:
    """The dtype of a description; an unknown name is refused rather than guessed."""
    try:
        return _DTYPES[name]
    except KeyError:
        raise ExchangeError(f"an output of dtype {name} cannot be compared") from None


def _b64(data: bytes | None) -> str | None:
    return base64.b64encode(data).decode() if data is not None else None


def _unb64(text: str | None) -> bytes | None:
    return base64.b64decode(text) if text is not None else None


@dataclass
class SharedTensor:
    """Where one output tensor can be read: its layout, and a CUDA IPC handle or a memory-file offset."""

    dtype: str
    shape: list[int]
    stride: list[int]
    storage_offset: int = 0  # elements from the start of the storage
    # CUDA IPC (torch.UntypedStorage._share_cuda_): handles are base64 text
    device: int | None = None
    handle: str | None = None
    storage_bytes: int = 0
    storage_offset_bytes: int = 0
    ref_counter_handle: str | None = None
    ref_counter_offset: int = 0
    event_handle: str | None = None
    event_sync_required: bool = False
    # CPU: a contiguous copy at this byte offset of the memory file
    file_offset: int | None = None

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * dtype_named(self.dtype).itemsize

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SharedTensor":
        return cls(**d)


@dataclass
class Exported:
    """One seed's outputs as shared: the descriptions, and what the worker keeps alive until the
    trusted side has read them (clones made where a storage could not be shared as it is)."""

    tensors: list[SharedTensor | None]  # None for an output that is not a tensor
    keep: list[torch.Tensor] = field(default_factory=list)


def _align(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def _share_cuda(t: torch.Tensor) -> tuple[SharedTensor, torch.Tensor]:
    """A description of `t`'s device memory for another process. A storage the caching allocator did
    not make (an extension's own allocation) cannot be shared: its clone is, and is kept alive."""
    desc = SharedTensor(str(t.dtype).removeprefix("torch."), list(t.shape), list(t.stride()), t.storage_offset(),
                        device=t.device.index or 0)
    if t.untyped_storage().nbytes() == 0:
        return desc, t
    try:
        parts = t.untyped_storage()._share_cuda_()
    except RuntimeError:
        t = t.clone()
        desc.shape, desc.stride, desc.storage_offset = list(t.shape), list(t.stride()), t.storage_offset()
        parts = t.untyped_storage()._share_cuda_()
    device, handle, size, offset, rc_handle, rc_offset, ev_handle, ev_sync = parts
    desc.device, desc.handle, desc.storage_bytes, desc.storage_offset_bytes = device, _b64(handle), size, offset
    desc.ref_counter_handle, desc.ref_counter_offset = _b64(rc_handle), rc_offset
    desc.event_handle, desc.event_sync_required = _b64(ev_handle), bool(ev_sync)
    return desc, t


def export_outputs(outputs: list[Any], memfd: int | None) -> Exported:
    """Share one seed's outputs: CUDA tensors through IPC, CPU tensors copied into the memory file
    `memfd` (resized to fit them). Raises ExchangeError when the memory file cannot hold them."""
    shared = Exported([])
    cpu = [(i, o) for i, o in enumerate(outputs) if isinstance(o, torch.Tensor) and o.device.type == "cpu"]
    sizes = [_align(o.numel() * o.element_size()) for _, o in cpu]
    buf = None
    if cpu:
        if memfd is None:
            raise ExchangeError("no memory file to hand CPU outputs over")
        try:
            os.ftruncate(memfd, 0)  # drop the last seed's pages first: one seed's outputs at a time
            os.ftruncate(memfd, max(sum(sizes), 1))
            buf = torch.from_file(f"/proc/self/fd/{memfd}", shared=True, size=max(sum(sizes), 1), dtype=torch.uint8)
        except (OSError, RuntimeError) as e:
            raise ExchangeError(f"the memory file for the outputs could not take {sum(sizes)} bytes: {e}") from None
    offsets = dict(zip((i for i, _ in cpu), [sum(sizes[:k]) for k in range(len(sizes))]))
    for i, o in enumerate(outputs):
        if not isinstance(o, torch.Tensor):
            shared.tensors.append(None)
        elif o.device.type == "cuda":
            desc, keep = _share_cuda(o.detach())
            shared.tensors.append(desc)
            shared.keep.append(keep)
        else:
            c = o.detach().contiguous()
            n = c.numel() * c.element_size()
            if n:
                buf[offsets[i]:offsets[i] + n].copy_(c.reshape(-1).view(torch.uint8))
            shared.tensors.append(SharedTensor(str(c.dtype).removeprefix("torch."), list(c.shape), list(c.stride()),
                                               file_offset=offsets[i]))
    return shared


def _check_layout(d: SharedTensor, storage_bytes: int) -> None:
    """A description must lie inside its storage: the trusted side never reads past what was shared."""
    size = dtype_named(d.dtype).itemsize
    if any(s < 0 for s in d.shape) or any(s < 0 for s in d.stride) or len(d.shape) != len(d.stride) or d.storage_offset < 0:
        raise ExchangeError("an output's layout is not valid")
    if d.numel:
        last = d.storage_offset + sum((n - 1) * s for n, s in zip(d.shape, d.stride))
        if (last + 1) * size > storage_bytes:
            raise ExchangeError("an output's layout reaches past its shared memory")


def import_outputs(descs: list[SharedTensor | None], memfd: int | None) -> list[torch.Tensor | None]:
    """The tensors another process shared (trusted side). CPU ones are read from a private mapping
    of the memory file `memfd` (the candidate's later writes do not reach it once it is read)."""
    out: list[torch.Tensor | None] = []
    mapped = None
    for d in descs:
        if d is None:
            out.append(None)
            continue
        dtype = dtype_named(d.dtype)
        if d.file_offset is None:
            if d.handle is None:
                out.append(torch.empty_strided(d.shape, d.stride, dtype=dtype, device=f"cuda:{d.device or 0}"))
                continue
            storage = torch.UntypedStorage._new_shared_cuda(
                d.device, _unb64(d.handle), d.storage_bytes, d.storage_offset_bytes, _unb64(d.ref_counter_handle),
                d.ref_counter_offset, _unb64(d.event_handle), d.event_sync_required)
            _check_layout(d, storage.nbytes())
            out.append(torch.empty(0, dtype=dtype, device=storage.device).set_(storage, d.storage_offset, d.shape, d.stride))
            continue
        if memfd is None:
            raise ExchangeError("a CPU output came without its memory file")
        if mapped is None:
            total = os.fstat(memfd).st_size
            mapped = torch.from_file(f"/proc/self/fd/{memfd}", shared=False, size=max(total, 1), dtype=torch.uint8) \
                if total else torch.empty(1, dtype=torch.uint8)
        n = d.nbytes
        if d.file_offset < 0 or d.file_offset + n > mapped.numel() and n:
            raise ExchangeError("an output's layout reaches past its memory file")
        flat = mapped[d.file_offset:d.file_offset + n].view(dtype) if n else torch.empty(0, dtype=dtype)
        out.append(flat.view(d.shape))
    return out


def receive_fd(sock: socket.socket, timeout: float) -> int:
    """A file descriptor the parent passed over the socket (worker_process.WorkerProcess.send_fd)."""
    sock.settimeout(timeout)
    _, fds, _, _ = socket.recv_fds(sock, 1, 1)
    if not fds:
        raise ExchangeError("no memory file arrived")
    return fds[0]


__all__ = ["ExchangeError", "Exported", "SharedTensor", "export_outputs", "import_outputs", "receive_fd"]
