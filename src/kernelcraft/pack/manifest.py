"""A kernel pack's manifest: each shape's kernel file, where and how fast it was measured.

Standard library only: this file is copied into every pack (with the loader), so a pack loads
where only torch and triton are installed."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

FORMAT = 1  # bumped when a field changes meaning; a reader refuses formats newer than its own
MANIFEST = "manifest.json"


class PackError(Exception):
    """A pack that cannot be built, read or loaded here; the message is one line."""


@dataclass(frozen=True)
class PackEntry:
    """One shape's kernel: C (m x n) = A (m x k) @ B (k x n), and the judge's numbers for it."""

    m: int
    n: int
    k: int
    kernel: str  # path of the kernel file inside the pack, e.g. "kernels/64x64x32.py"
    sha256: str  # of the kernel file's bytes
    task: str  # the task key it was judged on
    verdict_id: int  # in the workspace the pack was built from
    kernel_ms: float  # offline median of the kernel
    # offline median of torch.matmul, timed interleaved with the kernel; where it ran slower there than
    # alone (the verdict's slowed_reference flag), its time alone (the host's speed accounted)
    reference_ms: float
    speedup: float  # offline: reference_ms / kernel_ms
    speedup_server: float | None = None  # the server scenario's speedup where the verdict measured it (corrected as speedup is)
    run_id: str = ""  # the run whose verdict it is
    source: str = "kernelcraft"  # who wrote the kernel: kernelcraft's search, or the kernel set it was imported from
    license: str = ""  # an imported kernel's license, as its set states it
    origin: str = ""  # an imported kernel's file in its set

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.m, self.n, self.k)

    @property
    def name(self) -> str:
        """The shape as "MxNxK"."""
        return f"{self.m}x{self.n}x{self.k}"

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k


@dataclass(frozen=True)
class PackExtension:
    """A compiled library shipped in the pack (`pack build --compile`): the load_inline call it answers,
    and the file (see prebuilt.py)."""

    key: str  # hash of the load_inline call's arguments that built it
    module: str  # the Python module name it was compiled as
    file: str  # path inside the pack, e.g. "ext/3f2a....so"
    sha256: str  # of the file's bytes


@dataclass(frozen=True)
class PackManifest:
    """What a pack holds and where it was measured; `entries` one per shape."""

    device: str  # "cuda" or "cpu"
    device_name: str  # the GPU's name (or the CPU's), as torch reports it
    capability: str  # CUDA compute capability "9.0"; "" on CPU
    torch: str
    triton: str  # "" when the judge's worker had no triton
    run_id: str  # the first of `runs`
    created: str  # ISO 8601, UTC
    bandwidth_bytes_per_s: float  # the device's measured copy bandwidth; 0 when unknown (no padded dispatch then)
    entries: list[PackEntry]
    dtype: str = "float16"
    left_out: dict[str, str] = field(default_factory=dict)  # task key -> why the run has no kernel for it in the pack
    extensions: list[PackExtension] = field(default_factory=list)  # compiled libraries its kernels load instead of building
    runs: list[str] = field(default_factory=list)  # every run its kernels were chosen from
    format: int = FORMAT

    def entry(self, m: int, n: int, k: int) -> PackEntry | None:
        """The entry of exactly this shape, if the pack has one."""
        return next((e for e in self.entries if e.shape == (m, n, k)), None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def write(self, directory: Path) -> Path:
        """Write `manifest.json` into `directory`; returns its path."""
        path = Path(directory) / MANIFEST
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        return path


def read_manifest(directory: str | Path) -> PackManifest:
    """The manifest of the pack in `directory`; PackError when there is none or it cannot be read."""
    path = Path(directory) / MANIFEST
    if not Path(directory).is_dir():
        raise PackError(f"{directory}: no such pack directory")
    if not path.is_file():
        raise PackError(f"{directory}: not a kernel pack (no {MANIFEST})")
    try:
        data = json.loads(path.read_text())
        if int(data.get("format", 0)) > FORMAT:
            raise PackError(f"{path}: pack format {data['format']}, this kernelcraft reads format {FORMAT} and older")
        entries = [PackEntry(**_known(PackEntry, e)) for e in data["entries"]]
        extensions = [PackExtension(**_known(PackExtension, e)) for e in data.get("extensions", [])]
        bad = next((e for e in entries if min(e.shape) <= 0), None)
        if bad is not None:
            raise ValueError(f"shape {bad.shape}: dimensions must be positive")
        return PackManifest(**{**_known(PackManifest, data), "entries": entries, "extensions": extensions})
    except PackError:
        raise
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
        raise PackError(f"{path}: unreadable manifest ({type(e).__name__}: {e})") from None


_SCALARS = {"int": (int,), "float": (int, float), "str": (str,)}


def _known(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    """The keys of `data` that `cls` has as fields (a later format's extra keys are ignored), each scalar
    checked against its field's type: a hand-edited manifest fails here, not in the middle of a call."""
    types = {f.name: str(f.type) for f in fields(cls)}
    known = {k: v for k, v in data.items() if k in types}
    for name, value in known.items():
        base, _, optional = types[name].partition(" | ")
        if (value is None and optional) or base not in _SCALARS:
            continue
        if isinstance(value, bool) or not isinstance(value, _SCALARS[base]):
            raise ValueError(f"{name} = {value!r}: expected {'a number' if base == 'float' else 'an integer' if base == 'int' else 'text'}")
    return known
