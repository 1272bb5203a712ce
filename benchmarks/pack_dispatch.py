"""Kernel pack dispatch overhead: host time per call that `pack.matmul` adds over calling what it
dispatches to directly (the kernel's ModelNew.forward, the padded call, or torch.matmul), on the
same inputs. Target: at most 5 us per call.

    python benchmarks/pack_dispatch.py --device cuda --out $OUT               # a synthetic pack
    python benchmarks/pack_dispatch.py --pack PACK_DIR --out $OUT             # an existing pack
    python benchmarks/pack_dispatch.py --run RUN --workspace WS --out $OUT    # a pack built from a run

The synthetic pack's kernels are torch.matmul inside a ModelNew (built for this device and these
versions), so it needs no run: dispatch costs the same whatever the kernel does. Every shape of
the pack is timed, and each with M one smaller (no kernel: torch.matmul through the pack).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from kernelcraft.pack import PackEntry, PackManifest, load  # noqa: E402
from kernelcraft.pack.bench import dispatch_overhead_us  # noqa: E402
from kernelcraft.pack.build import build_pack  # noqa: E402
from kernelcraft.pack.loader import current_device_name, installed_triton  # noqa: E402
from kernelcraft.store import Store  # noqa: E402
from kernelcraft.tasks import parse_shapes  # noqa: E402

TARGET_US = 5.0
SYNTHETIC_KERNEL = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)
'''


def synthetic_pack(root: Path, device: str, shapes: list[tuple[int, int, int]]) -> Path:
    """A pack for this device and these versions whose kernels are torch.matmul (speedup 1: no padding)."""
    (root / "kernels").mkdir(parents=True)
    data = SYNTHETIC_KERNEL.encode()
    entries = []
    for m, n, k in shapes:
        rel = f"kernels/{m}x{n}x{k}.py"
        (root / rel).write_bytes(data)
        entries.append(PackEntry(m=m, n=n, k=k, kernel=rel, sha256=hashlib.sha256(data).hexdigest(), task="synthetic",
                                 verdict_id=0, kernel_ms=1.0, reference_ms=1.0, speedup=1.0))
    PackManifest(device=device, device_name=current_device_name(device), capability="", torch=torch.__version__,
                 triton=installed_triton(), run_id="synthetic", created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                 bandwidth_bytes_per_s=0.0, entries=entries).write(root)
    return root


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="the synthetic pack's device")
    ap.add_argument("--shapes", default="256x256x256,1024x1024x1024,4096x4096x4096", help="the synthetic pack's shapes")
    ap.add_argument("--pack", type=Path, help="an existing pack directory")
    ap.add_argument("--run", help="build the pack from this run of --workspace")
    ap.add_argument("--workspace", type=Path, default=Path(os.environ.get("KERNELCRAFT_WORKSPACE", "kernelcraft-workspace")))
    ap.add_argument("--force", action="store_true", help="load a pack built on another device or versions")
    ap.add_argument("--calls", type=int, default=20, help="calls per timed burst")
    ap.add_argument("--reps", type=int, default=50, help="bursts per side; the median difference is reported")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench-out")))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    pack_dir = args.pack
    if pack_dir is None:
        pack_dir = Path(tempfile.mkdtemp(prefix="kc-pack-")) / "pack"
        if args.run:
            with Store(args.workspace) as store:
                build_pack(store, args.run, pack_dir, min_speedup=0.0)
        else:
            synthetic_pack(pack_dir, args.device, [(s.m, s.n, s.k) for s in parse_shapes(args.shapes)])
    pack = load(pack_dir, force=args.force)
    device = torch.device(pack.manifest.device)
    rows = []
    for m, n, k in [s for shape in pack.shapes for s in (shape, (shape[0] - 1, *shape[1:])) if s[0] > 0]:
        a = torch.randn(m, k, device=device, dtype=pack.dtype)
        b = torch.randn(k, n, device=device, dtype=pack.dtype)
        route = pack.route(a, b)
        for fn in (pack.matmul, route.call):  # warm up
            fn(a, b)
        overheads = [dispatch_overhead_us(pack.matmul, route.call, a, b, calls=args.calls, reps=args.reps) for _ in range(3)]
        rows.append({"shape": f"{m}x{n}x{k}", "route": route.describe(), "overhead_us": statistics.median(overheads),
                     "runs_us": overheads})
    worst = max(r["overhead_us"] for r in rows)
    (args.out / "pack_dispatch.json").write_text(json.dumps(
        {"device_name": pack.manifest.device_name, "pack": str(pack_dir), "rows": rows, "worst_us": worst}, indent=1))
    print(f"\npack dispatch overhead on {current_device_name(pack.manifest.device)} ({pack.manifest.device}): "
          f"host time per call over the direct call, median of {args.reps} bursts of {args.calls} calls, 3 runs")
    print(f"{'shape':>20s}  {'route':45s} {'overhead us':>11s}  runs")
    for r in rows:
        print(f"{r['shape']:>20s}  {r['route'][:45]:45s} {r['overhead_us']:11.2f}  " + " ".join(f"{x:.2f}" for x in r["runs_us"]))
    print(f"worst {worst:.2f} us per call; target <= {TARGET_US:.0f} us: {'met' if worst <= TARGET_US else 'NOT met'}")


if __name__ == "__main__":
    main()
