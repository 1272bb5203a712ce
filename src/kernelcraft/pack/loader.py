"""Load a kernel pack and dispatch `matmul(a, b)` by shape.

Standard library, torch and triton only (and `manifest.py` and `prebuilt.py`, standard library and
torch only): this file is copied into every pack, so a pack loads where kernelcraft is not installed.

Dispatch, decided once per distinct (shapes, dtypes, device, contiguity, grad) and cached, so a
call costs one dict lookup before the kernel:
1. the pack has a kernel for exactly this shape: that kernel;
2. else the smallest pack shape (by FLOPs) that covers the request in every dimension and whose
   padded use is estimated to win (see `padded_ms`, `torch_ms`): A and B zero-padded to that
   shape, its kernel, the result sliced back (zero rows and columns add nothing to the product);
3. else torch.matmul. So is any call the pack's kernels were not judged on: other dtypes or
   devices, non-contiguous inputs, inputs that need autograd.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from .manifest import PackEntry, PackError, PackManifest, read_manifest
from .prebuilt import serving

Matmul = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

# The padded-dispatch estimate is meant to err towards torch.matmul:
LAUNCH_MS = 0.005  # each of the 3 extra operations of a padded call (pad A, pad B, copy out) costs at least a launch
BANDWIDTH_SHARE = 0.5  # the pad copies are small and reach about half the device's measured copy bandwidth
MARGIN = 1.1  # the padded call must be estimated at least 10% faster than torch.matmul


@dataclass(frozen=True)
class Route:
    """How the pack serves one kind of call: "exact", "padded" (to `entry`'s shape) or "torch"."""

    kind: str
    entry: PackEntry | None
    reason: str  # why, in a phrase
    call: Matmul

    def describe(self) -> str:
        if self.kind == "exact":
            return "pack kernel"
        if self.kind == "padded":
            return f"padded to {self.entry.name}"
        return f"torch.matmul ({self.reason})"


def kernel_cost_ms(entry: PackEntry) -> float:
    """The kernel's time at its own shape, in the worse of its two scenarios, in units of the offline
    torch.matmul time: a kernel that wins offline but loses under server traffic counts as losing."""
    worst = min(entry.speedup, entry.speedup_server) if entry.speedup_server is not None else entry.speedup
    return entry.reference_ms / worst


def padded_ms(entry: PackEntry, m: int, n: int, k: int, bandwidth_bytes_per_s: float, elem_bytes: int) -> float:
    """Estimated time of an (m, n, k) matmul served by `entry`'s kernel with zero padding: the kernel at
    its shape, plus the bytes the pads and the result copy move at part of the measured bandwidth, plus
    a launch per extra operation."""
    moved = elem_bytes * (m * k + entry.m * entry.k  # read A, write padded A
                          + k * n + entry.k * entry.n  # read B, write padded B
                          + 2 * m * n)  # read and write the sliced result
    return kernel_cost_ms(entry) + 3 * LAUNCH_MS + moved / (BANDWIDTH_SHARE * bandwidth_bytes_per_s) * 1e3


def torch_ms(entry: PackEntry, m: int, n: int, k: int) -> float:
    """Estimated torch.matmul time at (m, n, k): its measured time at `entry`'s shape scaled by FLOPs.
    Small matmuls run below peak, so the true time is rarely lower: the estimate favours torch."""
    return entry.reference_ms * (m * n * k) / (entry.m * entry.n * entry.k)


def choose_padded(entries: list[PackEntry], m: int, n: int, k: int, bandwidth_bytes_per_s: float,
                  elem_bytes: int = 2) -> PackEntry | None:
    """The smallest entry (by FLOPs) covering (m, n, k) whose padded use is estimated to beat torch.matmul
    by MARGIN; None when none does or the bandwidth is unknown."""
    if bandwidth_bytes_per_s <= 0:
        return None
    covering = sorted((e for e in entries if e.m >= m and e.n >= n and e.k >= k), key=lambda e: (e.flops, e.shape))
    for e in covering:
        if padded_ms(e, m, n, k, bandwidth_bytes_per_s, elem_bytes) * MARGIN < torch_ms(e, m, n, k):
            return e
    return None


def current_device_name(kind: str) -> str:
    """This machine's name for a device kind, as the judge records it."""
    if kind == "cuda":
        return torch.cuda.get_device_name(torch.cuda.current_device())
    return platform.processor() or platform.machine()


def installed_triton() -> str:
    """Triton's version here, "" when it is not installed."""
    try:
        import triton
    except ImportError:
        return ""
    return triton.__version__


def _check_environment(manifest: PackManifest, force: bool) -> None:
    """The device and versions the pack was measured with must be these, unless forced; its device kind
    and dtype must make sense whatever the force."""
    if manifest.device not in ("cuda", "cpu"):
        raise PackError(f"the pack was built for an unknown device kind {manifest.device!r}")
    if not isinstance(getattr(torch, manifest.dtype, None), torch.dtype):
        raise PackError(f"the pack's dtype {manifest.dtype!r} is not a torch dtype")
    if manifest.device == "cuda" and not torch.cuda.is_available():
        raise PackError(f"the pack was built for CUDA ({manifest.device_name}) and this machine has no CUDA device")
    if force:
        return
    here = current_device_name(manifest.device)
    if here != manifest.device_name:
        raise PackError(f"the pack was built on {manifest.device_name}, this is {here}: its kernels and timings "
                        "may not hold here (force to load it anyway)")
    for name, built, now in (("torch", manifest.torch, torch.__version__), ("triton", manifest.triton, installed_triton())):
        if built != now:
            raise PackError(f"the pack was built with {name} {built or '(none)'}, this is {name} {now or '(none)'} "
                            "(force to load it anyway)")


def import_kernel(path: Path, entry: PackEntry, device: str) -> torch.nn.Module:
    """Import a kernel file as a module of its own and construct its ModelNew once (on `device`'s terms)."""
    name = f"kcpack_kernel_{entry.name}_{entry.sha256[:12]}"
    # Only Triton's interpreter runs a Triton kernel on a CPU, and it must be on before triton is first imported
    # (triton's own library functions are compiled or interpreted from then on), as in the judge's CPU workers.
    if device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1" and "triton.jit" in path.read_text():
        raise PackError(f"{path}: a Triton kernel on a CPU runs only under Triton's interpreter: "
                        "start Python with TRITON_INTERPRET=1")
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # triton and dataclasses look a kernel's module up by name
        spec.loader.exec_module(module)
        model = module.ModelNew()
    except Exception as e:  # noqa: BLE001 - any failure of a kernel file is this file's error, in one line
        sys.modules.pop(name, None)
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise PackError(f"{path}: cannot load the kernel ({type(e).__name__}: {first[:300]})") from None
    return model.eval()


class KernelPack:
    """A loaded pack: `matmul(a, b)` with the pack's kernels where they win, torch.matmul elsewhere."""

    def __init__(self, root: Path, manifest: PackManifest, models: dict[tuple[int, int, int], torch.nn.Module],
                 missing: list[str]) -> None:
        self.root = root
        self.manifest = manifest
        self.models = models  # shape -> the kernel's ModelNew, for every kernel that loaded
        self.missing = missing  # kernel files absent from the directory, served by torch.matmul (fallback)
        self.dtype = getattr(torch, manifest.dtype)
        self._elem_bytes = torch.empty((), dtype=self.dtype).element_size()
        self._loaded = [e for e in manifest.entries if e.shape in models]
        self._calls: dict[tuple, Matmul] = {}

    @property
    def shapes(self) -> list[tuple[int, int, int]]:
        """The (m, n, k) of every entry of the manifest."""
        return [e.shape for e in self.manifest.entries]

    def matmul(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """a @ b: the exact shape's kernel, a padded larger one where estimated to win, else torch.matmul."""
        key = (a.shape, b.shape, a.dtype, b.dtype, a.device, b.device, a.is_contiguous() and b.is_contiguous(),
               a.requires_grad or b.requires_grad)
        call = self._calls.get(key)
        if call is None:
            call = self._calls[key] = self.route(a, b).call
        return call(a, b)

    def route(self, a: torch.Tensor, b: torch.Tensor) -> Route:
        """How `matmul` serves these inputs (not cached: `matmul` caches it)."""
        kind = self.manifest.device
        if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
            return Route("torch", None, "not a 2-D matmul", torch.matmul)
        if a.dtype != self.dtype or b.dtype != self.dtype:
            return Route("torch", None, f"not {self.manifest.dtype}", torch.matmul)
        if a.device.type != kind or b.device.type != kind:
            return Route("torch", None, f"not on {kind}", torch.matmul)
        if a.requires_grad or b.requires_grad:
            return Route("torch", None, "needs autograd", torch.matmul)
        if not (a.is_contiguous() and b.is_contiguous()):
            return Route("torch", None, "non-contiguous input", torch.matmul)
        return self.route_shape(a.shape[0], b.shape[1], a.shape[1])

    def route_shape(self, m: int, n: int, k: int) -> Route:
        """How a contiguous (m, k) @ (k, n) matmul of the pack's dtype and device is served."""
        model = self.models.get((m, n, k))
        if model is not None:
            return Route("exact", self.manifest.entry(m, n, k), "", model.forward)
        exact = self.manifest.entry(m, n, k)
        if exact is not None:
            return Route("torch", exact, f"kernel file {exact.kernel} missing", torch.matmul)
        entry = choose_padded(self._loaded, m, n, k, self.manifest.bandwidth_bytes_per_s, self._elem_bytes)
        if entry is None:
            why = ("no pack shape covers it" if not any(e.m >= m and e.n >= n and e.k >= k for e in self._loaded)
                   else "padding estimated to lose" if self.manifest.bandwidth_bytes_per_s > 0
                   else "no bandwidth recorded to estimate padding")
            return Route("torch", None, why, torch.matmul)
        return Route("padded", entry, "", _padded(self.models[entry.shape].forward, m, n, k, entry))


def _padded(forward: Matmul, m: int, n: int, k: int, entry: PackEntry) -> Matmul:
    pad_a = (0, entry.k - k, 0, entry.m - m)  # F.pad lists the last dimension first
    pad_b = (0, entry.n - n, 0, entry.k - k)

    def call(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return forward(F.pad(a, pad_a), F.pad(b, pad_b))[:m, :n].contiguous()
    return call


def _check_unchanged(path: Path, sha256: str, what: str) -> None:
    """PackError unless the file's bytes still have the manifest's sha256."""
    if hashlib.sha256(path.read_bytes()).hexdigest() != sha256:
        raise PackError(f"{path}: contents differ from the manifest's sha256: the {what} was changed after the pack was built")


def load(path: str | Path, *, force: bool = False, fallback: bool = False) -> KernelPack:
    """Load the pack in directory `path`: check it was built on this device name and these torch and
    triton versions (`force` skips that), that every kernel file is present (`fallback` serves a missing
    one's shape with torch.matmul instead) and unchanged, and construct every kernel, its load_inline
    calls answered by the libraries the pack ships (`pack build --compile`) where it has them.

    Raises PackError, with a one-line message naming the problem (and the file)."""
    root = Path(path)
    manifest = read_manifest(root)
    _check_environment(manifest, force)
    missing = [e.kernel for e in manifest.entries if not (root / e.kernel).is_file()]
    if missing and not fallback:
        raise PackError(f"{root}: kernel file(s) missing: {', '.join(missing)} (fallback to serve them with torch.matmul)")
    for ext in manifest.extensions:
        file = root / ext.file
        if not file.is_file():
            raise PackError(f"{file}: compiled library missing (build the pack again, or without --compile)")
        _check_unchanged(file, ext.sha256, "library")
    models = {}
    with serving(root, manifest.extensions):
        for e in manifest.entries:
            if e.kernel in missing:
                continue
            _check_unchanged(root / e.kernel, e.sha256, "kernel")
            models[e.shape] = import_kernel(root / e.kernel, e, manifest.device)
    return KernelPack(root, manifest, models, missing)
