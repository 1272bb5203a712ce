"""The real-model corpus's kernels against every baseline users compare with: each kernel's verdict
(its speedup over eager under the judge's strict precision, TF32 off), then the same kernel's time
over eager at PyTorch's defaults (cuDNN TF32 on) and over torch.compile at those defaults, timed
on the same device in the same run. Target: every headline names its baseline; a TF32 kernel's
speedup over strict eager is not its speedup over what users run.

    python benchmarks/corpus_baselines.py --kernelbench ../shared/kernelbench --corpus ../shared/real-model-corpus --out $OUT
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from kernelcraft.judge import Job, LocalPool
from kernelcraft.tasks import load_task_file


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--kernelbench", type=Path, default=Path(os.environ.get("KERNELCRAFT_KB", "../shared/kernelbench")))
    ap.add_argument("--corpus", type=Path, default=Path(os.environ.get("KERNELCRAFT_CORPUS", "../shared/real-model-corpus")))
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("KERNELCRAFT_TEST_CACHE", "/tmp/kc-corpus-cache")))
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench-out")))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = []
    for path in sorted((args.corpus / "turn1").glob("*.py")):
        level, stem = path.stem.split("_", 1)
        jobs.append(Job(load_task_file(args.kernelbench / level / f"{stem}.py"), path.read_text(), tag=path.stem))
    rows = []
    with LocalPool("cuda", cache_dir=args.cache, workers=args.workers) as pool:
        verdicts = {r.job.tag: r for r in pool.map(jobs)}
        judge = pool.judges[0]
        for job in jobs:
            r = verdicts[job.tag]
            v = r.verdict
            row = {"task": job.task.key, "status": v.status.value if v else "task_error", "message": (v.message if v else r.error)[:160]}
            if v is not None and v.correct:
                base = {name: s.median_ms for name, s in judge.baseline(job.task).items()}
                cand = v.candidate.median_ms
                row.update(candidate_ms=cand, speedup_strict=v.speedup, eager_ms=base["reference"],
                           eager_default_ms=base["reference_default"], compile_default_ms=base.get("compiled"),
                           vs_eager=base["reference"] / cand, vs_eager_default=base["reference_default"] / cand,
                           vs_compile_default=base["compiled"] / cand if "compiled" in base else None,
                           truth=v.stage("correctness").details.get("truth"), device=v.env.get("device_name"))
            rows.append(row)
    (args.out / "corpus_baselines.json").write_text(json.dumps(rows, indent=1))
    print(f"\n{'task':58s} {'status':10s} {'verdict':>8s} {'eager':>8s} {'default':>8s} {'compile':>8s}  (speedup over each, same device)")
    for r in rows:
        if "candidate_ms" in r:
            comp = f"{r['vs_compile_default']:.2f}x" if r["vs_compile_default"] else "-"
            print(f"{r['task']:58s} {r['status']:10s} {r['speedup_strict']:7.2f}x {r['vs_eager']:7.2f}x "
                  f"{r['vs_eager_default']:7.2f}x {comp:>8s}")
        else:
            print(f"{r['task']:58s} {r['status']:10s} {r['message'][:90]}")


if __name__ == "__main__":
    main()
