"""Where a template kernel's time behind torch.matmul goes: host or device. Stored verdicts, no device needed.

Every verdict's timing stage records each side's median host time: from the start event until the call
returned, the part of a call the device waits for when it is idle at the start (as under the judge's
clock). Per kernel family, and for short and long shapes apart (the reference under or over LONG_US),
this prints the median of the candidate's time minus the reference's, and of its host time minus the
reference's. A family whose host difference is most of its total loses in its launch path, not in
its kernel.

    python benchmarks/verdict_gap.py --workspace WS [RUN ...]   # default: every template run
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict

from stored_runs import template_runs  # a sibling script: benchmarks run as `python benchmarks/X.py`

from kernelcraft.kernels.gemm import CutlassConfig, config_of_source
from kernelcraft.store import Store

LONG_US = 120.0  # torch.matmul's verdict time above which a shape counts as long


def family(source: str) -> str:
    """The kernel family of a template candidate: cutlass, triton tma, triton split-K or triton."""
    config = config_of_source(source)
    if config is None:
        return "other"
    if isinstance(config, CutlassConfig):
        return "cutlass"
    if config.variant.startswith("tma"):
        return "triton tma"
    return "triton split-K" if config.split_k > 1 else "triton"


def gaps(store: Store, run_id: str) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """Per (family, short or long): each correct verdict's (total, host) difference from the reference, us."""
    out: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    seen = set()
    for attempt in store.attempts(run_id):
        if attempt.status != "correct" or attempt.verdict_id in seen:
            continue
        seen.add(attempt.verdict_id)
        v = store.verdict(attempt.verdict_id)
        host = v.stage("timing").details.get("host_ms") if v.stage("timing") else None
        if not host or v.reference is None or v.candidate is None:
            continue
        length = "long" if v.reference.median_ms * 1e3 > LONG_US else "short"
        total = (v.candidate.median_ms - v.reference.median_ms) * 1e3
        out[family(store.candidate_source(attempt.verdict_id)), length].append(
            (total, (host["candidate"] - host["reference"]) * 1e3))
    return out


def main() -> int:
    with template_runs(__doc__.splitlines()[0]) as (store, runs):
        print(f"{'run':<24} {'family':<15} {'shapes':<6} {'verdicts':>8} {'total us':>9} {'host us':>8}")
        for run_id in runs:
            for (fam, length), rows in sorted(gaps(store, run_id).items()):
                total = statistics.median(t for t, _ in rows)
                host = statistics.median(h for _, h in rows)
                print(f"{run_id:<24} {fam:<15} {length:<6} {len(rows):>8} {total:>+9.1f} {host:>+8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
