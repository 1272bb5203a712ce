"""Feedback from the hardware on the real-model corpus's kernels: each kernel judged, then, if correct,
profiled (Nsight Compute where ncu runs, else the PyTorch profiler), and the feedback a model would get
in `optimize` rendered from the verdict and the profile. Target: a profile costs seconds next to the
verdict's own time, and only correct candidates pay it, after their verdict.

    python benchmarks/corpus_profile.py --kernelbench ../shared/kernelbench --corpus ../shared/real-model-corpus --out $OUT

Writes corpus_profile.json and feedback-TASK.txt (the model's feedback message) under --out."""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict
from pathlib import Path

from kernelcraft.agents import Coder
from kernelcraft.judge import Judge, KernelProfiler
from kernelcraft.tasks import load_task_file


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--kernelbench", type=Path, default=Path(os.environ.get("KERNELCRAFT_KB", "../shared/kernelbench")))
    ap.add_argument("--corpus", type=Path, default=Path(os.environ.get("KERNELCRAFT_CORPUS", "../shared/real-model-corpus")))
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("KERNELCRAFT_TEST_CACHE", "/tmp/kc-corpus-cache")))
    ap.add_argument("--only", nargs="*", default=None, help="corpus file stems to take (default: all)")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench-out")))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    judge = Judge("cuda", cache_dir=args.cache)
    profiler = KernelProfiler("cuda", cache_dir=args.cache)
    rows = []
    try:
        for path in sorted((args.corpus / "turn1").glob("*.py")):
            if args.only and path.stem not in args.only:
                continue
            level, stem = path.stem.split("_", 1)
            task = load_task_file(args.kernelbench / level / f"{stem}.py")
            t0 = time.perf_counter()
            v = judge.evaluate(task, path.read_text())
            row = {"task": task.key, "status": v.status.value, "verdict_s": time.perf_counter() - t0, "speedup": v.speedup,
                   "device": v.env.get("device_name")}
            if v.correct:
                kernels = profiler.profile(task, path.read_text())
                feedback = Coder.feedback(v, kernels).content
                (args.out / f"feedback-{path.stem}.txt").write_text(feedback)
                top = kernels.kernels[0] if kernels.kernels else None
                row.update(profile_s=kernels.seconds, tool=kernels.tool, note=kernels.note,
                           roofline=asdict(v.roofline) if v.roofline else None,
                           top_kernel=top.label if top else None, top_limiter=top.limiter if top else None,
                           kernels=kernels.to_dict())
            rows.append(row)
            (args.out / "corpus_profile.json").write_text(json.dumps(rows, indent=1))  # as it goes: a cut run keeps its rows
            print(f"[profile] {task.key}: {v.status.value} {row.get('tool', '')} {row.get('profile_s', 0):.1f}s", flush=True)
    finally:
        judge.close()
    print(f"\n{'task':52s} {'status':9s} {'speedup':>8s} {'bound':>7s} {'roof':>5s} {'tool':>6s} {'verdict s':>9s} "
          f"{'profile s':>9s}  top kernel: limiter")
    for r in rows:
        roof = r.get("roofline") or {}
        print(f"{r['task'][:52]:52s} {r['status']:9s} {(r['speedup'] or 0):7.2f}x {roof.get('bound', '-'):>7s} "
              f"{100 * roof.get('share', 0):4.0f}% {r.get('tool', '-'):>6s} {r['verdict_s']:9.1f} {r.get('profile_s', 0):9.1f}  "
              f"{(r.get('top_kernel') or '-')[:40]}: {r.get('top_limiter') or '-'}")
    print(f"(device: {rows[0]['device'] if rows else '?'})")


if __name__ == "__main__":
    main()
