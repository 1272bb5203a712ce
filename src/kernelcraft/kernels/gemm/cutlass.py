"""CUTLASS Hopper GEMM kernels for the template search, from `templates/cutlass_gemm.cu.j2`: TMA
loads, warp-specialized warpgroup MMAs (cooperative or ping-pong), thread-block clusters, and a
persistent or stream-K tile scheduler, the kernels cuBLAS itself is built from. `cutlass_space`
lists the configurations worth judging for one shape on an sm_90 device (none elsewhere, or where
CUTLASS's headers are missing); `render_cutlass` writes one as a complete candidate (`ModelNew`),
which compiles it with nvcc when first constructed."""

from __future__ import annotations

import importlib.util
import itertools
import math
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ...tasks import Shape
from .caps import DeviceCaps
from .render import TemplateError, template
from .tiles import tile_fit

VARIANTS = ("cutlass_cooperative", "cutlass_pingpong")
SCHEDULERS = ("persistent", "streamk")
SUMMARIES = {
    "cutlass_cooperative": "CUTLASS, two consumer warpgroups sharing each output tile",
    "cutlass_pingpong": "CUTLASS, two consumer warpgroups taking turns on alternate output tiles",
}
_SCHEDULES = {  # mainloop and epilogue schedules, and how the kernel's comment puts it
    "cutlass_cooperative": ("cutlass::gemm::KernelTmaWarpSpecializedCooperative",
                            "cutlass::epilogue::TmaWarpSpecializedCooperative",
                            "two consumer warpgroups splitting each output tile"),
    "cutlass_pingpong": ("cutlass::gemm::KernelTmaWarpSpecializedPingpong", "cutlass::epilogue::TmaWarpSpecialized",
                         "two consumer warpgroups on alternate tiles, one's epilogue hiding under the other's MMAs"),
}
# Each tile, cluster and scheduler is an nvcc build of a minute or two (swizzle, raster and splits
# are arguments): 16 builds per device cover the space, which stays small on purpose.
# The output tiles each schedule does well with: a cooperative tile is split between two
# warpgroups by rows (at least 128), a ping-pong tile is one warpgroup's (64 or 128 rows).
TILES = {"cutlass_cooperative": ((128, 128), (128, 256), (256, 128)),
         "cutlass_pingpong": ((64, 128), (64, 256), (128, 128))}
STREAMK_TILES = ((128, 128), (128, 256))
# The clusters searched: two programs along M sharing B's tiles, or none. A 1x2 cluster (two along N
# sharing A's) is a configuration a user can ask for, but not searched: kernel time alone under
# sustained load favoured it on 7 of 11 long shapes (docs/results/2026-11-25-which-kernel-cublas-runs-per-shape-tile.md), yet under the judge
# it beat the 2x1 by more than a point on 1 of 27 shapes, and with CUTLASS's own tile order it fell
# to 0.62-0.79x on the four largest (run 20261125-173621-08790f, H100; docs/results/2026-11-25-47-shapes-on-one-fast-host-1x2.md).
CLUSTERS = ((1, 1), (2, 1))
SWIZZLES = (1, 4)
# The order in which a persistent program walks its output tiles, an argument like the swizzle (no
# build of its own): CUTLASS's heuristic (along M where there are more tiles along N, else along N),
# or either order forced. cuBLAS's own Hopper kernels come in both orders, picked per shape.
RASTERS = {"heuristic": 0, "along_m": 1, "along_n": 2}  # CUTLASS's RasterOrderOptions
# nvcc's flags for the kernel: sm_90a's warpgroup MMAs, the TMA descriptor encoder called directly
# (CUTLASS otherwise looks it up by name on every call), and CUDA's own half operators, which
# CUTLASS's half type needs and torch's flags hide.
NVCC_FLAGS = ["-O3", "-std=c++17", "-DNDEBUG", "--expt-relaxed-constexpr", "-gencode=arch=compute_90a,code=sm_90a",
              "-DCUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL", "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
              "-U__CUDA_NO_HALF2_OPERATORS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__"]
STREAMK_MIN_K = 1024  # K steps enough (16 of 64) for stream-K to hand out in even shares
_NAMED = re.compile(r"# kernelcraft template GEMM \((cutlass_cooperative|cutlass_pingpong)_(\d+)x(\d+)x(\d+)_c(\d+)x(\d+)"
                    r"_(persistent|streamk)_sw(\d+)(?:_r(m|n))?(?:_k(\d+))?\)")


@dataclass(frozen=True)
class CutlassConfig:
    tile_m: int
    tile_n: int
    tile_k: int = 64
    cluster_m: int = 1
    cluster_n: int = 1
    variant: str = "cutlass_cooperative"
    scheduler: str = "persistent"
    swizzle: int = 1
    splits: int = 1
    raster: str = "heuristic"

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise TemplateError(f"unknown variant {self.variant!r}: use one of {', '.join(VARIANTS)}")
        if self.scheduler not in SCHEDULERS:
            raise TemplateError(f"unknown scheduler {self.scheduler!r}: use one of {', '.join(SCHEDULERS)}")
        if min(self.tile_m, self.tile_n, self.tile_k) < 64 or any(t % 64 for t in (self.tile_m, self.tile_n, self.tile_k)):
            raise TemplateError("CUTLASS tiles are multiples of 64 (a warpgroup's MMA)")
        if self.variant == "cutlass_cooperative" and self.tile_m < 128:
            raise TemplateError("a cooperative tile has at least 128 rows: two warpgroups of 64")
        if self.variant == "cutlass_pingpong" and self.tile_m > 128:
            raise TemplateError("a ping-pong tile has at most 128 rows: one warpgroup's")
        if self.scheduler == "streamk" and self.variant != "cutlass_cooperative":
            raise TemplateError("CUTLASS's stream-K scheduler runs the cooperative kernel only")
        if self.cluster_m not in (1, 2) or self.cluster_n not in (1, 2):
            raise TemplateError("clusters of 1 or 2 programs per dimension")
        if self.swizzle not in (1, 2, 4, 8):
            raise TemplateError("swizzle 1, 2, 4 or 8")
        if self.splits < 1 or (self.splits > 1 and self.scheduler != "streamk"):
            raise TemplateError("K is split only by the stream-K scheduler")
        if self.raster not in RASTERS:
            raise TemplateError(f"unknown raster {self.raster!r}: use one of {', '.join(RASTERS)}")

    @property
    def binary(self) -> str:
        """What is compiled in: configurations that differ only in swizzle and splits share a build."""
        return f"{self.variant}_{self.tile_m}x{self.tile_n}x{self.tile_k}_c{self.cluster_m}x{self.cluster_n}_{self.scheduler}"

    @property
    def name(self) -> str:
        raster = "" if self.raster == "heuristic" else "_r" + self.raster[-1]
        return f"{self.binary}_sw{self.swizzle}{raster}" + (f"_k{self.splits}" if self.splits > 1 else "")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CutlassConfig":
        return cls(**d)

    @classmethod
    def of_source(cls, source: str) -> "CutlassConfig | None":
        """The configuration a CUTLASS template candidate was rendered from (its first line names it), or None."""
        m = _NAMED.match(source)
        if m is None:
            return None
        variant, tm, tn, tk, cm, cn, scheduler, swizzle, raster, splits = m.groups()
        return cls(int(tm), int(tn), int(tk), int(cm), int(cn), variant, scheduler, int(swizzle), int(splits or 1),
                   f"along_{raster}" if raster else "heuristic")


def cutlass_include_dirs() -> list[str] | None:
    """CUTLASS's include directories: under $CUTLASS_PATH (a CUTLASS checkout) or in the
    nvidia-cutlass package; None if neither has them."""
    root = os.environ.get("CUTLASS_PATH")
    if not root:
        spec = importlib.util.find_spec("cutlass_library")  # finds the package without importing it
        if spec is None or not spec.submodule_search_locations:
            return None
        root = str(Path(list(spec.submodule_search_locations)[0]) / "source")
    include, util = Path(root) / "include", Path(root) / "tools" / "util" / "include"
    if not (include / "cutlass" / "cutlass.h").is_file() or not (util / "cutlass" / "util" / "packed_stride.hpp").is_file():
        return None
    return [str(include), str(util)]


def cutlass_runs_on(caps: DeviceCaps) -> bool:
    """Whether the CUTLASS kernels can run here: compiled for sm_90a, they run on Hopper (compute
    capability 9.0) only, and need CUTLASS's headers to build."""
    return caps.kind == "cuda" and caps.capability == (9, 0) and cutlass_include_dirs() is not None


def render_cuda(config: CutlassConfig) -> str:
    """The CUDA source of `config`'s kernel and its host entry points (no torch in it)."""
    mainloop, epilogue, note = _SCHEDULES[config.variant]
    scheduler = "cutlass::gemm::StreamKScheduler" if config.scheduler == "streamk" else "cutlass::gemm::PersistentScheduler"
    return template("cutlass_gemm.cu.j2").render(
        c=config, mainloop_schedule=mainloop, epilogue_schedule=epilogue, schedule_note=note,
        tile_scheduler=scheduler)


def render_cutlass(config: CutlassConfig) -> str:
    """The complete candidate source for `config`. Raises TemplateError where CUTLASS's headers are missing."""
    include = cutlass_include_dirs()
    if include is None:
        raise TemplateError(f"variant {config.variant} needs CUTLASS's headers: pip install nvidia-cutlass, "
                            "or set CUTLASS_PATH to a CUTLASS checkout")
    return template("cutlass_gemm.py.j2").render(
        c=config, name=config.name, summary=SUMMARIES[config.variant], raster=RASTERS[config.raster], include_dirs=repr(include),
        nvcc_flags=repr(NVCC_FLAGS), cuda_source=render_cuda(config))


def cutlass_prior(c: CutlassConfig, shape: Shape, caps: DeviceCaps) -> float:
    """A guess at how fast `c` runs on `shape`, for ordering only: the output tile's fit, whole waves
    of tiles over the SMs (stream-K evens out a partial last wave at the cost of its fix-ups),
    clusters only with tiles to share loads with along the cluster (rows of tiles for 2x1, columns for
    1x2), a wide swizzle only with many waves."""
    tiles_m, tiles_n = math.ceil(shape.m / c.tile_m), math.ceil(shape.n / c.tile_n)
    tiles = tiles_m * tiles_n
    # CUTLASS's schedulers round the tiles along each dimension up to a whole number of swizzle x
    # cluster groups and hand the padding out as work: 4 rows of tiles with a 2x1 cluster at swizzle
    # 4 become 8, and the kernel ran at half speed (512x8192x8192: 0.50x of swizzle 1's; cutlass_order.py, H100).
    padded = _round_up(tiles_m, c.swizzle * c.cluster_m) * _round_up(tiles_n, c.swizzle * c.cluster_n)
    waves = tiles / (math.ceil(tiles / caps.sms) * caps.sms)
    balance = 0.97 if c.scheduler == "streamk" else math.sqrt(waves)
    if c.splits > 1:  # split-K only pays where K is long next to the tiles that fill the SMs
        balance *= 1.0 if tiles * c.splits <= 2 * caps.sms and shape.k // c.splits >= 4 * c.tile_k else 0.8
    along = tiles_m if c.cluster_m > 1 else tiles_n if c.cluster_n > 1 else 0
    cluster = 1.0 if not along else 1.02 if along >= 2 and tiles >= caps.sms else 0.95
    swizzle = 1.0 if c.swizzle == (4 if tiles > 2 * caps.sms else 1) else 0.98
    schedule = 1.0 if c.variant == "cutlass_cooperative" or c.tile_m == 64 else 0.99
    return tile_fit(c.tile_m, c.tile_n, shape, caps) * balance * cluster * swizzle * schedule * tiles / padded


def _round_up(x: int, multiple: int) -> int:
    return -(-x // multiple) * multiple


def cutlass_space(shape: Shape, caps: DeviceCaps) -> list[CutlassConfig]:
    """The CUTLASS configurations worth judging for `shape` on `caps`, most promising first; none
    off Hopper, without CUTLASS's headers, or where rows are not 16-byte aligned (N or K not a
    multiple of 8). Stream-K only where the tiles leave the last wave of SMs partly idle and K is
    long enough to share out."""
    if not cutlass_runs_on(caps) or shape.n % 8 or shape.k % 8:
        return []
    found = []
    for variant in VARIANTS:
        for (tm, tn), (cm, cn), swizzle in itertools.product(TILES[variant], CLUSTERS, SWIZZLES):
            found.append(CutlassConfig(tm, tn, 64, cm, cn, variant, "persistent", swizzle))
    for (tm, tn), (cm, cn) in itertools.product(STREAMK_TILES, CLUSTERS):
        tiles = math.ceil(shape.m / tm) * math.ceil(shape.n / tn)
        if tiles % caps.sms and shape.k >= STREAMK_MIN_K:
            found += [CutlassConfig(tm, tn, 64, cm, cn, "cutlass_cooperative", "streamk", 1, splits) for splits in (1, 2, 4)]
    return sorted(found, key=lambda c: -cutlass_prior(c, shape, caps))
