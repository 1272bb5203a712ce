"""The hgemm suite: C = A B with fp16 A (M x K), B (K x N) and C, reference `torch.matmul`, one task
per shape so that a kernel can be made for each. The shapes come from a grid, a stratified sample
of it, a user's list, or the matmuls of a model (`shape_capture`).

A second family, hgemm-wt, takes B as a weight stored K-major (W, N x K, as `nn.Linear` stores it: C = A Wᵀ,
reference `F.linear`): a kernel that wants B column-major reads W as it is. Its tasks are reported apart from
hgemm's and never go into its packs or its template search (`shape_of` knows only hgemm).

Only the standard library here: the judge's worker imports this package on a bare GPU machine.
"""

from __future__ import annotations

import ast
import random
import re
from dataclasses import dataclass
from pathlib import Path
from string import Template

from .loader import TaskError, task_from_source
from .model import Task

HGEMM_SUITE = "hgemm"
HGEMM_WT_SUITE = "hgemm-wt"
GRID_SIZES = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 12288, 16384)
# Each GEMM family's task template, by suite name.
GEMM_FAMILIES = {HGEMM_SUITE: Path(__file__).parent / "templates" / "hgemm.py.tmpl",
                 HGEMM_WT_SUITE: Path(__file__).parent / "templates" / "hgemm_wt.py.tmpl"}
_SHAPE_RE = re.compile(r"^(\d+)[xX](\d+)[xX](\d+)$")
# Strata of `sample_grid`: volume M*N*K up to 1024^3 (latency-bound), up to 4096^3, above.
_SMALL_VOLUME, _LARGE_VOLUME = 1024**3, 4096**3
_VOLUMES = ("small", "medium", "large")
_ASPECTS = ("square", "skinny_m", "skinny_n", "small_k", "large_k")


@dataclass(frozen=True, order=True)
class Shape:
    """A GEMM shape: A is m x k, B is k x n, C is m x n. Written MxNxK."""

    m: int
    n: int
    k: int

    def __str__(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"

    @property
    def flops(self) -> int:
        """Floating-point operations of one product (a multiply and an add per term)."""
        return 2 * self.m * self.n * self.k


def grid() -> list[Shape]:
    """The default grid: every (M, N, K) in GRID_SIZES^3, 1,000 shapes in sorted order."""
    return [Shape(m, n, k) for m in GRID_SIZES for n in GRID_SIZES for k in GRID_SIZES]


def volume_class(shape: Shape) -> str:
    """small (M*N*K <= 1024^3), medium (<= 4096^3) or large."""
    volume = shape.m * shape.n * shape.k
    return "small" if volume <= _SMALL_VOLUME else "medium" if volume <= _LARGE_VOLUME else "large"


def aspect_class(shape: Shape) -> str:
    """The first that holds of: square (largest dimension at most 4x the smallest), large_k
    (K at least 4x both M and N), small_k (K at most a quarter of both), skinny_m (M < N),
    skinny_n."""
    m, n, k = shape.m, shape.n, shape.k
    if max(m, n, k) <= 4 * min(m, n, k):
        return "square"
    if k >= 4 * max(m, n):
        return "large_k"
    if 4 * k <= min(m, n):
        return "small_k"
    return "skinny_m" if m < n else "skinny_n"


def sample_grid(n: int, seed: int = 0) -> list[Shape]:
    """`n` shapes of the grid (1 <= n <= 1000), stratified and deterministic for a given seed.

    The grid is cut into 15 strata: volume (small, medium, large; see `volume_class`) crossed
    with aspect (square, skinny_m, skinny_n, small_k, large_k; see `aspect_class`). Each stratum
    is shuffled with `seed`; shapes are then taken one stratum at a time in turn, so every
    stratum holds an equal share until it runs out. The turn order makes any 3 consecutive
    strata span the 3 volumes and any 5 the 5 aspects: n >= 15 covers every stratum, n >= 5
    every aspect, n >= 3 every volume. A smaller sample is a prefix of a larger one with the
    same seed, so a run cut short by its budget has still seen a spread of shapes.
    """
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= len(GRID_SIZES) ** 3:
        raise TaskError(f"sample {n!r}: must be a whole number between 1 and {len(GRID_SIZES) ** 3}")
    rng = random.Random(seed)
    # Chinese-remainder order over (5 aspects, 3 volumes): consecutive strata differ in both.
    order = [(_ASPECTS[i % len(_ASPECTS)], _VOLUMES[i % len(_VOLUMES)]) for i in range(len(_ASPECTS) * len(_VOLUMES))]
    strata: dict[tuple[str, str], list[Shape]] = {cell: [] for cell in order}
    for shape in grid():
        strata[(aspect_class(shape), volume_class(shape))].append(shape)
    for cell in order:
        rng.shuffle(strata[cell])
    picked: list[Shape] = []
    depth = 0
    while len(picked) < n:
        picked += [strata[cell][depth] for cell in order if depth < len(strata[cell])][: n - len(picked)]
        depth += 1
    return picked


def parse_shapes(text: str) -> list[Shape]:
    """Shapes from "MxNxK,MxNxK,..." (positive integers; duplicates dropped, order kept)."""
    if not text.strip():
        raise TaskError("no shapes given: expected MxNxK[,MxNxK...], e.g. 4096x4096x512")
    shapes: list[Shape] = []
    for item in text.split(","):
        m = _SHAPE_RE.match(item.strip())
        if m is None:
            raise TaskError(f"shape {item.strip()!r}: expected MxNxK of positive integers, e.g. 4096x4096x512")
        if any(int(d) <= 0 for d in m.groups()):
            raise TaskError(f"shape {item.strip()!r}: every dimension must be a positive integer")
        shape = Shape(*(int(d) for d in m.groups()))
        if shape not in shapes:
            shapes.append(shape)
    return shapes


def hgemm_task(shape: Shape, family: str = HGEMM_SUITE) -> Task:
    """The task of one shape, key `FAMILY/MxNxK` (hgemm or hgemm-wt), loaded (and so checked) like any task file."""
    if min(shape.m, shape.n, shape.k) <= 0:
        raise TaskError(f"shape {shape}: every dimension must be a positive integer")
    if family not in GEMM_FAMILIES:
        raise TaskError(f"unknown GEMM family {family!r}: known are {', '.join(GEMM_FAMILIES)}")
    source = Template(GEMM_FAMILIES[family].read_text()).substitute(m=shape.m, n=shape.n, k=shape.k, shape=str(shape))
    return task_from_source(source, f"{family}/{shape}", suite=family)


def hgemm_tasks(sample: int | None = None, shapes: list[Shape] | None = None, family: str = HGEMM_SUITE) -> list[Task]:
    """A family's tasks: the given shapes, a stratified sample of the grid, or the whole grid."""
    if sample is not None and shapes is not None:
        raise TaskError(f"choose the {family} shapes by a sample or by a list, not both")
    if shapes is not None and not shapes:
        raise TaskError("no shapes given")
    chosen = shapes if shapes is not None else sample_grid(sample) if sample is not None else grid()
    return [hgemm_task(s, family) for s in dict.fromkeys(chosen)]


def is_hgemm_target(target: str) -> bool:
    """Whether a command's target names a GEMM family, hgemm or hgemm-wt (a local folder of task files of that
    name wins)."""
    return target in GEMM_FAMILIES and not list(Path(target).glob("*.py"))


def shape_of(task: Task) -> Shape | None:
    """The GEMM shape of an hgemm task (from its constants M, N, K, else its key); None for others."""
    if task.suite != HGEMM_SUITE and not task.key.startswith(f"{HGEMM_SUITE}/") and HGEMM_SUITE not in task.meta.tags:
        return None
    try:
        body = ast.parse(task.source).body
    except SyntaxError:
        body = []
    consts: dict[str, int] = {}
    for node in body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Constant) and type(node.value.value) is int):
            consts[node.targets[0].id] = node.value.value
    if all(consts.get(d, 0) > 0 for d in "MNK"):
        return Shape(consts["M"], consts["N"], consts["K"])
    m = _SHAPE_RE.match(task.key.rsplit("/", 1)[-1])
    if m is not None and all(int(d) > 0 for d in m.groups()):
        return Shape(*(int(d) for d in m.groups()))
    return None
