"""What the precompiled torch/extension.h saves a candidate's build (judge/precompiled.py): an example candidate's
extension built by the judge without one, the header made (the first build with new flags starts it), and the
build again with it, each build of a source no cache holds, in one call on a cold cache. The builds are the
judge's own (a builder process through the sandbox), timed as its verdict's build stage.

    python benchmarks/build_time.py --device cpu --out $OUT      # examples/candidates/cpu/leaky_relu_clamp.py (C++)
    python benchmarks/build_time.py --device cuda --out $OUT     # examples/candidates/cuda/swish_residual.py (nvcc beside)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import kernelcraft.judge.precompiled as precompiled
from kernelcraft.judge import Judge, describe_device
from kernelcraft.tasks import resolve_task

ROOT = Path(__file__).resolve().parent.parent
# An example candidate per device, and the string its sources begin with (a comment goes after it)
TASKS = {"cpu": ("leaky_relu_clamp", '_CPP = r"""'), "cuda": ("swish_residual", '_CUDA = r"""')}


def fresh_source(device: str) -> str:
    """The example candidate with a comment no earlier build had: its key is new, so the judge compiles it."""
    task, start = TASKS[device]
    source = (ROOT / "examples" / "candidates" / device / f"{task}.py").read_text()
    return source.replace(start, f"{start}\n// {uuid.uuid4()}", 1)


def build_s(judge: Judge, device: str) -> float:
    """Seconds of the judge's build of a fresh copy of the candidate (its verdict's build stage)."""
    v = judge.evaluate(resolve_task(TASKS[device][0]).with_sizes(device, {}), fresh_source(device))
    stage = v.stage("build")
    if stage is None or not stage.ok:
        sys.exit(f"build_time: the build failed: {v.message[:300]}")
    return stage.seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--repeat", type=int, default=2, help="builds on each side")
    ap.add_argument("--out", type=Path, default=Path("bench-out"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if not precompiled.gcc_version():
        sys.exit("build_time: the C++ compiler is not GCC: no precompiled headers")
    with tempfile.TemporaryDirectory(prefix="kc-build-time-") as tmp:
        cache = Path(tmp) / "cache"
        os.environ[precompiled.ENV] = "off"
        with Judge(args.device, cache_dir=cache) as judge:
            without = [build_s(judge, args.device) for _ in range(args.repeat)]
            os.environ[precompiled.ENV] = str(Path(tmp) / "pch")
            t0 = time.perf_counter()
            first = build_s(judge, args.device)  # starts the header's compile; itself built without it
            made = None
            while made is None and time.perf_counter() - t0 < 900:
                made = next((d for d in (Path(tmp) / "pch").glob("*/torch/extension.h.gch")), None)
                time.sleep(0.5)
            header_s = time.perf_counter() - t0
            if made is None:
                sys.exit("build_time: no precompiled header after 15 minutes")
            size = made.stat().st_size
            with_pch = [build_s(judge, args.device) for _ in range(args.repeat)]
    device = describe_device(args.device).name
    result = {"device": device, "task": TASKS[args.device][0], "without_s": without, "first_with_new_flags_s": first,
              "header_ready_after_s": header_s, "header_bytes": size, "with_s": with_pch,
              "ratio": statistics.median(without) / statistics.median(with_pch)}
    (args.out / f"build_time_{args.device}.json").write_text(json.dumps(result, indent=1))
    print(f"\n{device}: the judge's build of examples/candidates/{args.device}/{TASKS[args.device][0]}.py (cold, new key each)")
    print(f"{'without the precompiled header':<36}{statistics.median(without):>8.1f} s  (median of {len(without)})")
    print(f"{'header made (after the first build)':<36}{header_s:>8.1f} s  ({size / 1e6:.0f} MB)")
    print(f"{'with it':<36}{statistics.median(with_pch):>8.1f} s  (median of {len(with_pch)})")
    print(f"{'ratio':<36}{result['ratio']:>8.2f}x")


if __name__ == "__main__":
    main()
