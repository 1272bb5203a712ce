"""What a judge change does to the verdicts it is about: every verdict of a workspace carrying one flag (by default
`slowed_reference`) on one device, judged again under this judge, side by side with what it was.

A new judge version makes a benchmark judge everything again, which can take hours of device time. This takes only
the verdicts a rule touches, so a change to that rule is measured on them first, in one call:

    python benchmarks/rejudge_flagged.py --workspace OLD_WS --device-name "NVIDIA H100 80GB HBM3" \\
        --out $OUT --budget-wall-s 420

OLD_WS is only read. The new verdicts go to `--into` (a workspace of their own, `rejudged-ws` by default), so the
old benchmark's report stays whole. Per verdict the table prints the old and new judge's speedup, the ratio the audit
ruled on (`reference_slowdown`: the smallest of the reference next to the candidate against the trusted time, the
reference alone again and the control), the control's two ratios (the reference next to the candidate against the
control's reference in the reference's slot, and in the candidate's), whether it stays flagged, and the credit
(`judge.honest_speedup`'s cap: the speedup over the ratio ruled on, for a flagged verdict). The jobs run in order of
the old verdict's run (imported kernels last: a Triton kernel builds in seconds, an imported CUTLASS file in
minutes), until `--budget-wall-s`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

# judged with the head-to-head's options (every scenario), as it was, and run in its slices' way
from gemm_head_to_head import CONFIG, Part, run_parts  # noqa: E402

from kernelcraft.judge import (JUDGE_VERSION, DeviceUnavailable, Job, JudgeConfig, Result, Verdict,  # noqa: E402
                               check_device, describe_device, open_executor, overstatement)
from kernelcraft.store import Store  # noqa: E402
from kernelcraft.tasks import GEMM_FAMILIES, Task, hgemm_task, parse_shapes, task_from_source  # noqa: E402

RATIOS = ("reference_slowdown", "reference_vs_control", "reference_vs_control_first")


@dataclass(frozen=True)
class Flagged:
    """One flagged verdict of the old workspace: its task, candidate, run's side or kind, and whether it was
    imported (import-kernels)."""
    verdict_id: int
    task: Task
    source: str
    run_kind: str
    old: Verdict
    imported: bool


def _task(store: Store, key: str) -> Task:
    family, _, rest = key.partition("/")
    if family in GEMM_FAMILIES:
        return hgemm_task(parse_shapes(rest)[0], family)
    return task_from_source(store.task_source(key), key)


def flagged(store: Store, flag: str, device_name: str) -> list[Flagged]:
    """The latest verdict of each (run, task) on `device_name` that carries `flag`, imported kernels last."""
    runs = store.runs()
    # a run's side: the head-to-head names it; an imported set's (import-kernels) CUTLASS builds take minutes
    kinds = {r.id: str(r.args.get("head_to_head", r.kind)) for r in runs}
    imported = {r.id for r in runs if "import-kernels" in str(r.args.get("solutions", ""))}
    latest: dict[tuple[str | None, str], int] = {}
    for row in sorted(store.verdicts(), key=lambda r: r.created_at):
        if row.device_name == device_name:
            latest[(row.run_id, row.task_key)] = row.id
    found = []
    for (run_id, key), vid in latest.items():
        v = store.verdict(vid)
        if v.has_flag(flag):
            task = _task(store, key)
            found.append(Flagged(vid, task, store.candidate_source(vid), kinds.get(run_id, ""), v, run_id in imported))
    return sorted(found, key=lambda f: (f.imported, f.task.key))


def _ratios(v: Verdict | None) -> dict[str, float | None]:
    audit = v.stage("audit") if v is not None else None
    return {k: (audit.details.get(k) if audit is not None else None) for k in RATIOS}


def _credit(v: Verdict | None) -> float | None:
    return v.speedup / overstatement(v) if v is not None and v.speedup else None


def row(f: Flagged, new: Verdict | None, flag: str) -> dict:
    return {"task": f.task.key, "run_kind": f.run_kind, "old_verdict": f.verdict_id,
            "old": {"judge": f.old.env.get("judge_version"), "speedup": f.old.speedup, "credit": _credit(f.old),
                    **_ratios(f.old)},
            "new": None if new is None else {
                "judge": new.env.get("judge_version"), "status": new.status.value, "speedup": new.speedup,
                "flagged": new.has_flag(flag), "credit": _credit(new), **_ratios(new)}}


def _fmt(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def print_table(rows: list[dict], device_name: str, flag: str) -> None:
    print(f"\n{device_name}: verdicts flagged {flag}, judged again under judge {JUDGE_VERSION}")
    print(f"{'task':24} {'run':11} {'old':>4} {'speedup':>8} {'ruled':>6} {'credit':>7}   {'new':>4} {'status':>10} "
          f"{'speedup':>8} {'vs ctl':>6} {'vs ctl 1st':>10} {'ruled':>6} {'flag':>5} {'credit':>7}")
    for r in rows:
        o, n = r["old"], r["new"] or {}
        print(f"{r['task']:24} {r['run_kind'][:11]:11} {o['judge'] or '-':>4} {_fmt(o['speedup']):>8} "
              f"{_fmt(o['reference_slowdown']):>6} {_fmt(o['credit']):>7}   {n.get('judge') or '-':>4} "
              f"{n.get('status', 'not run'):>10} {_fmt(n.get('speedup')):>8} {_fmt(n.get('reference_vs_control')):>6} "
              f"{_fmt(n.get('reference_vs_control_first')):>10} {_fmt(n.get('reference_slowdown')):>6} "
              f"{('yes' if n.get('flagged') else 'no') if n else '-':>5} {_fmt(n.get('credit')):>7}")
    judged = [r for r in rows if r["new"] is not None and r["new"]["status"] == "correct"]
    still = sum(r["new"]["flagged"] for r in judged)
    print(f"{len(judged)} of {len(rows)} judged again correct; {still} still flagged {flag}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workspace", type=Path, required=True,
                    help="The workspace whose flagged verdicts to judge again (read only).")
    ap.add_argument("--into", type=Path, default=Path("rejudged-ws"), help="Where the new verdicts go.")
    ap.add_argument("--flag", default="slowed_reference")
    ap.add_argument("--side", action="append", help="Only verdicts of runs of this side or kind (repeatable), e.g. "
                    "kernelcraft or cuda-l2 in a head-to-head workspace.")
    ap.add_argument("--device-name", help="Whose verdicts (default: this machine's GPU).")
    ap.add_argument("--budget-wall-s", type=float, default=420.0, help="No job starts after this many seconds.")
    ap.add_argument("--workers", type=int, help="Evaluations at once per GPU (default: the pool's own choice).")
    ap.add_argument("--out", type=Path, default=Path("bench-out"))
    args = ap.parse_args()
    if not (args.workspace / "kernelcraft.db").is_file():
        ap.error(f"{args.workspace} holds no kernelcraft.db")
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        check_device("cuda")
    except DeviceUnavailable:
        sys.exit("rejudge_flagged: no CUDA device here, and the verdicts are judged again on a GPU")
    device_name = args.device_name or describe_device("cuda").name
    start = time.monotonic()
    with Store(args.workspace) as old:
        todo = [f for f in flagged(old, args.flag, device_name) if not args.side or f.run_kind in args.side]
    print(f"{len(todo)} verdicts on {device_name} flagged {args.flag}", flush=True)
    new: dict[int, Verdict] = {}
    with Store(args.into) as store, open_executor("cuda", cache_dir=store.cache_dir, workers=args.workers,
                                                  config=JudgeConfig().with_overrides(CONFIG)) as pool:
        run_id = store.start_run("rejudge", {"from": str(args.workspace), "flag": args.flag})

        def record(r: Result) -> bool:
            print(f"[rejudge] {r.job.task.key}: {r.verdict.summary() if r.verdict else r.error}", flush=True)
            if r.verdict is None:
                return False
            new[r.job.tag] = r.verdict
            store.record_verdict(r.job.task, r.job.source, r.verdict, run_id=run_id, origin=f"rejudge:{r.job.tag}")
            return True

        jobs = [Job(f.task, f.source, tag=f.verdict_id) for f in todo]
        run_parts(pool, [Part("rejudge", jobs, record)], start + args.budget_wall_s)
        store.finish_run(run_id)
    rows = [row(f, new.get(f.verdict_id), args.flag) for f in todo]
    (args.out / "rejudge_flagged.json").write_text(json.dumps({"device": device_name, "judge": JUDGE_VERSION,
                                                               "flag": args.flag, "rows": rows}, indent=1))
    print_table(rows, device_name, args.flag)


if __name__ == "__main__":
    main()
