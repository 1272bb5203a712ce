"""Kernel packs: a run's best verified GEMM kernel per shape, with a manifest, loadable where only
torch and triton are installed; `load(DIR).matmul(a, b)` dispatches by shape.

Building (`kernelcraft.pack.build`) and timing (`kernelcraft.pack.bench`) need the rest of
kernelcraft and are imported from their modules; this package imports only the loader's side."""

from .loader import KernelPack, Route, choose_padded, load
from .manifest import PackEntry, PackError, PackManifest, read_manifest

__all__ = ["KernelPack", "PackEntry", "PackError", "PackManifest", "Route", "choose_padded", "load", "read_manifest"]
