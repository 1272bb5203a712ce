"""The task model: a reference PyTorch module in KernelBench format plus metadata."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

DTYPES = ("float32", "float16", "bfloat16")
# Extra correctness checks a task may ask the judge for (the GEMM suite asks for both):
# binary_exact: inputs of 0s and 1s, outputs compared exactly against a float64 reference where
#   the exact value is representable in the task's dtype;
# guard_zones: inputs inside canary-filled guard regions and a canary region after the output's
#   allocation, so writes outside the result are caught.
CHECKS = ("binary_exact", "guard_zones")


@dataclass(frozen=True)
class TaskMeta:
    """Optional metadata a task file may declare in a literal `KERNELCRAFT = {...}` dict."""

    description: str = ""
    tags: tuple[str, ...] = ()
    dtype: str = "float32"
    atol: float | None = None
    rtol: float | None = None
    # Overrides of module-level constants per device ("cpu", "cuda"); module constants are the default.
    sizes: dict[str, dict[str, Any]] = field(default_factory=dict)
    checks: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["tags"] = list(self.tags)
        d["checks"] = list(self.checks)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TaskMeta":
        return cls(
            description=str(d.get("description", "")),
            tags=tuple(d.get("tags", ())),
            dtype=str(d.get("dtype", "float32")),
            atol=d.get("atol"),
            rtol=d.get("rtol"),
            sizes={k: dict(v) for k, v in (d.get("sizes") or {}).items()},
            checks=tuple(d.get("checks", ())),
        )


@dataclass(frozen=True)
class Task:
    """One reference module: `Model`, `get_inputs()`, `get_init_inputs()` and metadata."""

    key: str  # unique within a suite, e.g. "level1/19_ReLU" or "examples/softmax_rows"
    name: str
    source: str
    suite: str = ""
    level: int | None = None
    problem_id: int | None = None
    path: Path | None = None
    meta: TaskMeta = field(default_factory=TaskMeta)

    def sizes_for(self, device: str) -> dict[str, Any]:
        """Module-constant overrides that give this task its size on `device`."""
        return dict(self.meta.sizes.get(device, {}))

    def with_sizes(self, device: str, overrides: dict[str, Any]) -> "Task":
        """A copy whose size on `device` has these module-constant overrides on top."""
        if not overrides:
            return self
        sizes = {k: dict(v) for k, v in self.meta.sizes.items()}
        sizes[device] = {**sizes.get(device, {}), **overrides}
        return replace(self, meta=replace(self.meta, sizes=sizes))

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "name": self.name,
            "suite": self.suite,
            "level": self.level,
            "problem_id": self.problem_id,
            "path": str(self.path) if self.path else None,
            "meta": self.meta.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Task":
        """The task `to_dict` describes, with its `source` (which `to_dict` leaves out) from `d["source"]`."""
        return cls(key=d["key"], name=d["name"], source=d["source"], suite=d.get("suite", ""), level=d.get("level"),
                   problem_id=d.get("problem_id"), path=Path(d["path"]) if d.get("path") else None,
                   meta=TaskMeta.from_dict(d.get("meta") or {}))
