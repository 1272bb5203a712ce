"""Which kernel cuBLAS runs for each GEMM shape, and how long that kernel takes on the device alone.

torch.matmul on fp16 row-major A (M x K) and B (K x N), as the hgemm tasks call it, profiled with
torch.profiler: every device kernel of the call (an L2 flush before each call, not counted), its
name, and the median over the profiled calls of the call's summed kernel time. cuBLAS's Hopper
kernels ("nvjet") name their configuration; the name is split into its fields where it parses:

    nvjet_sm90_hsh_256x128_64x4_1x2_h_bz_coopA_NNT
                   tile    k  stages cluster raster ...

cuBLAS is column-major: it computes C^T = B^T A^T, so its tile's first number and its cluster's first
number run along N of the task (C's columns), the second along M.

    python benchmarks/cublas_kernels.py --sample 64 --out $OUT          # on the GPU
    python benchmarks/cublas_kernels.py --compare OUT/cublas-kernels.json --workspace WS [RUN]

With --compare (no device), each shape's row also shows the best kernel of a stored template run and
its verdict's ratio over torch.matmul, so what cuBLAS picks sits next to what the search found.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from kernelcraft.tasks import Shape, TaskError, parse_shapes, sample_grid  # noqa: E402

FLUSH_BYTES = 256 * 1024 * 1024
_NVJET = re.compile(r"nvjet_sm(?P<sm>\d+)_(?P<types>[a-z]+)_(?P<tile_a>\d+)x(?P<tile_b>\d+)_(?P<tile_k>\d+)x(?P<stages>\d+)"
                    r"_(?P<cluster_a>\d+)x(?P<cluster_b>\d+)_(?P<raster>[hv])_(?P<rest>.*)")


@dataclass
class ShapeKernels:
    shape: str
    kernels: list[str] = field(default_factory=list)  # distinct device kernels of one call, in launch order
    device_us: float = 0.0  # median over the profiled calls of the call's summed kernel time
    tile_n: int | None = None  # parsed from an nvjet name, in the task's terms (N along C's columns)
    tile_m: int | None = None
    tile_k: int | None = None
    stages: int | None = None
    cluster_n: int | None = None
    cluster_m: int | None = None
    raster: str = ""
    flags: str = ""


def parse_nvjet(row: ShapeKernels) -> None:
    """Fill `row`'s configuration fields from its main kernel's name, where it is an nvjet kernel."""
    m = next((m for m in map(_NVJET.search, row.kernels) if m), None)
    if m is None:
        return
    row.tile_n, row.tile_m, row.tile_k, row.stages = (int(m[g]) for g in ("tile_a", "tile_b", "tile_k", "stages"))
    row.cluster_n, row.cluster_m, row.raster, row.flags = int(m["cluster_a"]), int(m["cluster_b"]), m["raster"], m["rest"]


def profile_shapes(shapes: list[Shape], iters: int) -> list[ShapeKernels]:
    """Every shape's kernels from one profiler session (starting one per shape costs seconds): inputs made
    and each shape warmed up beforehand, so the session holds only flushes and products, in order."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    operands = [(torch.randn(s.m, s.k, device="cuda", dtype=torch.float16),
                 torch.randn(s.k, s.n, device="cuda", dtype=torch.float16)) for s in shapes]
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    for a, b in operands:
        for _ in range(3):
            torch.matmul(a, b)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for a, b in operands:
            for _ in range(iters):
                flush.zero_()
                torch.cuda.synchronize()
                torch.matmul(a, b)
                torch.cuda.synchronize()
    calls: list[list] = []  # each flush starts a call: the kernels after it are that call's
    for e in sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA), key=lambda e: e.time_range.start):
        if "FillFunctor" in e.name:
            calls.append([])
        elif calls:
            calls[-1].append(e)
    if len(calls) != iters * len(shapes):
        raise RuntimeError(f"the profile holds {len(calls)} flushes for {iters * len(shapes)} calls")
    rows = []
    for i, s in enumerate(shapes):
        mine = calls[i * iters:(i + 1) * iters]
        row = ShapeKernels(shape=str(s), kernels=list(dict.fromkeys(e.name for call in mine for e in call)))
        row.device_us = statistics.median(sum(e.time_range.elapsed_us() for e in call) for call in mine)
        parse_nvjet(row)
        rows.append(row)
    return rows


def measure(args: argparse.Namespace) -> int:
    if not torch.cuda.is_available():
        print("error: no CUDA device: measuring cuBLAS's kernels needs a GPU (use --compare for stored results)",
              file=sys.stderr)
        return 2
    shapes = parse_shapes(args.shapes) if args.shapes else sample_grid(args.sample)
    rows = profile_shapes(shapes, args.iters)
    for r in rows:
        print(f"{r.shape:<20} {r.device_us:9.1f} us  {' + '.join(r.kernels)}")
    payload = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
               "rows": [asdict(r) for r in rows]}
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "cublas-kernels.json").write_text(json.dumps(payload, indent=1))
    print_table(rows, {})
    print(f"\n{payload['device']}, torch {payload['torch']}: {len(rows)} shapes")
    return 0


def best_kernels(workspace: Path, run: str | None) -> dict[str, tuple[str, float]]:
    """Per shape, the stored run's best kernel name and its offline ratio over torch.matmul."""
    from hgemm import rows_of  # noqa: PLC0415  (a sibling script, as benchmarks run)
    from kernelcraft.store import Store  # noqa: PLC0415

    with Store(workspace) as store:
        runs = [r.id for r in store.runs("optimize") if r.args["search"]["strategy"] == "template"]
        run_id = run or (runs[-1] if runs else None)
        if run_id not in runs:
            raise SystemExit(f"error: no template run {run_id} in {workspace}" if run_id else
                             f"error: no template run in {workspace}")
        device_name = next((v.device_name for v in store.verdicts(run_id=run_id)), "")
        rows, _ = rows_of(store, run_id, device_name)
    return {r.shape: (r.kernel, r.vs_matmul) for r in rows if r.vs_matmul}


def print_table(rows: list[ShapeKernels], ours: dict[str, tuple[str, float]]) -> None:
    print(f"\n{'shape':<20} {'device us':>9} {'tile NxM':>9} {'kxst':>6} {'cl NxM':>6} {'r':>1}  "
          f"{'flags':<16}" + ("  ours (stored verdict)" if ours else ""))
    for r in rows:
        cfg = (f"{r.tile_n}x{r.tile_m:<4} {r.tile_k:>3}x{r.stages:<2} {r.cluster_n}x{r.cluster_m:<4} {r.raster}  {r.flags:<16}"
               if r.tile_n else f"{'':9} {'':6} {'':6} {'':1}  {(r.kernels[0][:40] if r.kernels else '-'):<16}")
        mine = ours.get(r.shape)
        print(f"{r.shape:<20} {r.device_us:9.1f} {cfg}" + (f"  {mine[1]:.3f}x {mine[0]}" if mine else ""))


def compare(args: argparse.Namespace) -> int:
    try:
        payload = json.loads(args.compare.read_text())
    except (OSError, ValueError) as e:
        print(f"error: cannot read {args.compare}: {e}", file=sys.stderr)
        return 2
    if not (args.workspace / "kernelcraft.db").is_file():
        print(f"error: no workspace database at {args.workspace}/kernelcraft.db", file=sys.stderr)
        return 2
    rows = [ShapeKernels(**r) for r in payload["rows"]]
    print_table(rows, best_kernels(args.workspace, args.run))
    print(f"\ncuBLAS measured on {payload['device']}, torch {payload['torch']}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sample", type=int, default=64, help="Stratified grid shapes (as benchmarks/hgemm.py).")
    ap.add_argument("--shapes", help="Explicit shapes instead, MxNxK,...")
    ap.add_argument("--iters", type=int, default=20, help="Profiled calls per shape.")
    ap.add_argument("--out", type=Path, help="Write cublas-kernels.json here.")
    ap.add_argument("--compare", type=Path, help="A cublas-kernels.json to set beside a stored run (no device).")
    ap.add_argument("--workspace", type=Path, help="With --compare: the workspace holding the template run.")
    ap.add_argument("run", nargs="?", help="With --compare: the template run (default: the newest).")
    args = ap.parse_args()
    try:
        if args.compare:
            if args.workspace is None:
                print("error: --compare needs --workspace", file=sys.stderr)
                return 2
            return compare(args)
        return measure(args)
    except TaskError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
