"""`kernelcraft pack`: build a kernel pack from a run, show it, time it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from ..pack import PackError, PackManifest, read_manifest
from ..pack.bench import SCENARIOS, BenchRow, bench_pack
from ..pack.build import build_pack
from ..store import DB_NAME, Store
from ..tasks import parse_shapes
from .app import app
from .common import JsonOpt, UsageError, WorkspaceOpt, out

pack_app = typer.Typer(no_args_is_help=True, help="Kernel packs: a run's best GEMM kernel per shape, loadable with torch and triton.")
app.add_typer(pack_app, name="pack")

DirArg = typer.Argument(..., help="The pack's directory.")
ForceOpt = typer.Option(False, "--force", help="Load a pack built on another device name or torch/triton version.")
FallbackOpt = typer.Option(False, "--fallback", help="Serve shapes whose kernel file is missing with torch.matmul.")


def _speedup(x: float | None) -> str:
    return f"{x:.2f}x" if x is not None else "-"


def _manifest_table(m: PackManifest) -> Table:
    table = Table(title=f"{len(m.entries)} kernels for {m.device_name} ({m.device}), torch {m.torch}, triton {m.triton or '-'}; "
                        f"{'runs ' + ', '.join(m.runs) if len(m.runs) > 1 else 'run ' + m.run_id}, built {m.created}",
                  title_justify="left")
    for col in ("shape", "kernel", "speedup", "server", "kernel ms", "torch.matmul ms", "verdict", "source"):
        table.add_column(col, overflow="fold")
    for e in m.entries:
        source = e.source + (f" ({e.license})" if e.license else "")
        table.add_row(e.name, e.kernel, _speedup(e.speedup), _speedup(e.speedup_server), f"{e.kernel_ms:.4g}",
                      f"{e.reference_ms:.4g}", str(e.verdict_id), source)
    return table


def _print_manifest(m: PackManifest, as_json: bool) -> None:
    if as_json:
        print(json.dumps(m.to_dict(), indent=1))
        return
    out.print(_manifest_table(m))
    for key, why in m.left_out.items():
        out.print(f"left out {key}: {why}", highlight=False)


@pack_app.command("build")
def pack_build(run_ids: list[str] = typer.Argument(..., metavar="RUN...", help="The runs' ids (optimize's, or eval-suite's of "
                                                     "imported kernels): per shape, the best kernel of any of them."),
               out_dir: Path = typer.Option(..., "--out", help="The pack's directory (new or empty)."),
               workspace: Path = WorkspaceOpt,
               min_speedup: float = typer.Option(1.0, "--min-speedup", help="Leave out shapes whose best kernel's "
                                                 "effective speedup is not above this (default: kernels that beat torch.matmul)."),
               compile_kernels: bool = typer.Option(False, "--compile", help="Build every kernel here (on the pack's device) and "
                                            "ship the libraries it compiles, so the pack loads without a compiler."),
               as_json: bool = JsonOpt) -> None:
    """Write the best verified kernel per GEMM shape of the runs (whoever wrote it), a manifest and the loader into a
    directory; each entry names its run, its source and license."""
    if not (workspace / DB_NAME).is_file():
        raise UsageError(f"{workspace}: no kernelcraft workspace (no {DB_NAME})")
    if not (math.isfinite(min_speedup) and min_speedup >= 0):
        raise UsageError("--min-speedup must be a number, 0 or more")
    with Store(workspace) as store:
        try:
            manifest = build_pack(store, run_ids, out_dir, min_speedup=min_speedup, compile_kernels=compile_kernels)
        except PackError as e:
            raise UsageError(str(e)) from None
    _print_manifest(manifest, as_json)
    if not as_json:
        out.print(f"pack: {out_dir} (load it with kernelcraft.pack.load; see its README.txt)", highlight=False)


@pack_app.command("show")
def pack_show(pack_dir: Path = DirArg, as_json: bool = JsonOpt) -> None:
    """A pack's manifest: its shapes, kernels, speedups, device and versions."""
    try:
        manifest = read_manifest(pack_dir)
    except PackError as e:
        raise UsageError(str(e)) from None
    _print_manifest(manifest, as_json)


def _bench_table(rows: list[BenchRow]) -> Table:
    table = Table(title="pack vs torch.matmul (medians)", title_justify="left")
    for col in ("shape", "in pack", "route", "scenario", "pack ms", "torch.matmul ms", "speedup", "dispatch us", "match"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r.shape, "yes" if r.in_pack else "no", r.route, r.scenario, f"{r.pack_ms:.4g}", f"{r.torch_ms:.4g}",
                      f"{r.speedup:.2f}x", f"{r.overhead_us:.2f}" if r.overhead_us is not None else "",
                      "yes" if r.match else "NO")
    return table


@pack_app.command("bench")
def pack_bench(pack_dir: Path = DirArg,
               shapes: Optional[str] = typer.Option(None, "--shapes", help="Shapes besides the pack's, MxNxK,... "
                                                    "(default: each pack shape with M 32 smaller)."),
               scenario: str = typer.Option("both", "--scenario", help="offline, server or both."),
               qps: float = typer.Option(200.0, "--qps", help="Server scenario: mean calls per second."),
               iters: int = typer.Option(50, "--iters", help="Timed calls per side, shape and scenario."),
               force: bool = ForceOpt, fallback: bool = FallbackOpt, as_json: bool = JsonOpt) -> None:
    """Time the pack against torch.matmul on its shapes and on others, offline and under server traffic."""
    if scenario not in (*SCENARIOS, "both"):
        raise UsageError(f"--scenario {scenario!r}: expected offline, server or both")
    if not (math.isfinite(qps) and qps > 0) or iters <= 0:
        raise UsageError("--qps and --iters must be positive")
    extra = [(s.m, s.n, s.k) for s in parse_shapes(shapes)] if shapes is not None else None
    try:
        rows = bench_pack(pack_dir, extra, scenarios=SCENARIOS if scenario == "both" else (scenario,), qps=qps, iters=iters,
                          force=force, fallback=fallback)
    except PackError as e:
        raise UsageError(str(e)) from None
    if as_json:
        print(json.dumps([r.to_dict() for r in rows], indent=1))
        return
    out.print(_bench_table(rows))
    if any(not r.match for r in rows):
        out.print("a pack result differs from torch.matmul's (match NO): do not use this pack here", highlight=False)
