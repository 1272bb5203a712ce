"""Timing noise: the same honest candidate evaluated 5 times by the judge; the spread of the
reported speedup (median absolute deviation over the median). Target: at most 1% for tasks of
1 ms or more.

    python benchmarks/timing_noise.py --device cuda --repeats 5 --out $OUT
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from jobs import noise_jobs  # noqa: E402

from kernelcraft.judge import Judge  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench-out")))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    judge = Judge(args.device, cache_dir=Path(tempfile.mkdtemp(prefix="kc-noise-")))
    rows = []
    for job in noise_jobs():
        verdicts = [judge.evaluate(job.task, job.source) for _ in range(args.repeats)]
        speedups = [v.speedup for v in verdicts if v.speedup]
        ref_ms = [v.reference.median_ms for v in verdicts if v.reference]
        med = statistics.median(speedups) if speedups else float("nan")
        mad = statistics.median(abs(s - med) for s in speedups) if speedups else float("nan")
        rows.append({"job": job.label, "statuses": [v.status.value for v in verdicts], "speedups": speedups,
                     "reference_ms": statistics.median(ref_ms) if ref_ms else None, "median": med, "mad_rel": mad / med,
                     "device_name": verdicts[0].env.get("device_name")})
    (args.out / "noise.json").write_text(json.dumps(rows, indent=1))
    print(f"\ntiming noise on {rows[0]['device_name'] if rows else '?'}: {args.repeats} evaluations of the same candidate")
    print(f"{'job':60s} {'ref ms':>8s} {'median':>8s} {'MAD %':>7s}  speedups")
    for r in rows:
        ref = f"{r['reference_ms']:.3f}" if r["reference_ms"] else "-"
        print(f"{r['job'][:60]:60s} {ref:>8s} {r['median']:7.3f}x {100 * r['mad_rel']:6.2f}%  "
              + " ".join(f"{s:.3f}" for s in r["speedups"]) + ("" if set(r["statuses"]) == {"correct"} else f"  {r['statuses']}"))


if __name__ == "__main__":
    main()
