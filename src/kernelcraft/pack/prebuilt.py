"""Compiled extensions shipped inside a pack, so its `load_inline` kernels load without a compiler.

A kernel file that builds C++ or CUDA with `torch.utils.cpp_extension.load_inline` (a CUTLASS template
kernel, a Triton template kernel's C++ launcher) needs a compiler, and for CUTLASS its headers, when the
pack first loads it. `pack build --compile` runs each kernel's construction once under `recording`,
which lets `load_inline` build as usual and copies each built library into the pack's `ext/` directory,
keyed by a hash of the call's arguments (sources, flags, name). `serving` then answers the same call
from that copy. A call with other arguments, or whose copy is gone, builds as before.

Standard library and torch only: this file is copied into every pack with the loader."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import torch.utils.cpp_extension as cpp_extension

from .manifest import PackExtension

EXT_DIR = "ext"
_IGNORED = ("verbose", "build_directory", "keep_intermediates")  # arguments that do not change what is built


def call_key(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """A hash of a load_inline call's arguments that decide what it builds."""
    kept = sorted((k, v) for k, v in kwargs.items() if k not in _IGNORED)
    return hashlib.sha256(repr((args, kept)).encode()).hexdigest()[:32]


def _import_library(module: str, path: Path) -> ModuleType:
    """Import a compiled extension module from `path`, as load_inline imports the one it built."""
    spec = importlib.util.spec_from_file_location(module, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: not an extension module")
    lib = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lib)
    return lib


@contextlib.contextmanager
def _load_inline_as(replacement: Callable[..., Any]) -> Iterator[None]:
    # Kernel files import load_inline while they execute and call it while their model is built:
    # both happen inside this block, and a kernel keeps the replacement it imported.
    real = cpp_extension.load_inline
    cpp_extension.load_inline = replacement
    try:
        yield
    finally:
        cpp_extension.load_inline = real


@contextlib.contextmanager
def recording(pack_dir: Path, found: dict[str, PackExtension]) -> Iterator[None]:
    """Within the block, load_inline builds as usual and each library it returns is copied into
    `pack_dir`/ext and added to `found` (by key)."""
    real = cpp_extension.load_inline

    def load_inline(*args: Any, **kwargs: Any) -> Any:
        key = call_key(args, kwargs)  # first: load_inline adds to the source lists it is given
        lib = real(*args, **kwargs)
        source = Path(getattr(lib, "__file__", "") or "")
        if key not in found and source.is_file():
            rel = f"{EXT_DIR}/{key}{source.suffix}"
            (pack_dir / EXT_DIR).mkdir(exist_ok=True)
            shutil.copyfile(source, pack_dir / rel)
            found[key] = PackExtension(key, lib.__name__, rel, hashlib.sha256((pack_dir / rel).read_bytes()).hexdigest())
        return lib

    with _load_inline_as(load_inline):
        yield


@contextlib.contextmanager
def serving(pack_dir: Path, extensions: list[PackExtension]) -> Iterator[None]:
    """Within the block, a load_inline call the pack has a library for imports that library instead
    of building (the caller has checked the files' hashes); any other call builds as usual."""
    real = cpp_extension.load_inline
    by_key = {e.key: e for e in extensions}

    def load_inline(*args: Any, **kwargs: Any) -> Any:
        ext = by_key.get(call_key(args, kwargs))
        if ext is None:
            return real(*args, **kwargs)
        return _import_library(ext.module, pack_dir / ext.file)

    with _load_inline_as(load_inline):
        yield
