"""Per-shape GEMM head-to-head: CUDA-L2's published H100 kernels under kernelcraft's judge, next to torch.matmul,
TunableOp and kernelcraft's own template search, on a stratified sample of the set's shapes, offline and server.

One workspace holds everything, so it runs in slices of a few minutes and resumes:

    python benchmarks/gemm_head_to_head.py --set .cuda-l2/kernels/h100_F32F16F16F32 --sample 64 \\
        --workspace WS --parts import --budget-wall-s 420 --out $OUT      # baselines, then the imported kernels
    python benchmarks/hgemm.py --shapes "$(cat $OUT/head_to_head_shapes.txt)" --workspace WS ...   # kernelcraft's own
    python benchmarks/gemm_head_to_head.py --set ... --workspace WS --parts report --out $OUT     # no GPU needed

`import` judges each imported kernel once (the eval-suite run "head-to-head" of the workspace; a pack can take
its kernels, `pack build TEMPLATE_RUN H2H_RUN`). The report prints per shape the imported kernel's verdict, the
check it failed (0/1-exact inputs, guard zones, tolerance on random inputs), its accumulator and flags, its
speedups against torch.matmul and TunableOp offline and server, the speedup CUDA-L2's own results claim for the
shape (eval_results/, against torch.matmul), and kernelcraft's best kernel for it; then geometric means and win
rates (significant wins, as the judge counts them) for each side.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, wait
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hgemm import SCENARIOS, ShapeRow, record_baselines, rows_of, summary, template_runs, vs_tunableop  # noqa: E402

from kernelcraft.judge import Job, Judge, JudgeConfig, LocalPool, Verdict, describe_device  # noqa: E402
from kernelcraft.kernels.external import import_kernel_set  # noqa: E402
from kernelcraft.kernels.external.imported import origin_of  # noqa: E402
from kernelcraft.store import Store  # noqa: E402
from kernelcraft.tasks import Shape, hgemm_task  # noqa: E402

RUN_KIND = "eval-suite"  # what `pack build` and `runs list` read an imported set's verdicts as
RUN_ARGS = {"suite": "hgemm", "solutions": "cuda-l2 (import-kernels)", "head_to_head": True}
CONFIG = {"timing": {"server": True}}


def stratified(shapes: list[Shape], count: int) -> list[Shape]:
    """`count` shapes spread over the set's range of work: sorted by FLOPs, one from each of `count` equal slices."""
    ordered = sorted(shapes, key=lambda s: (s.flops, s.m, s.n, s.k))
    if count >= len(ordered):
        return ordered
    return [ordered[int((i + 0.5) * len(ordered) / count)] for i in range(count)]


def set_shapes(path: Path) -> list[Shape]:
    return [Shape(*map(int, f.stem.split("_"))) for f in path.glob("*_*_*.cu")]


def head_to_head_run(store: Store) -> str:
    """The workspace's head-to-head run (made on first use; judging more shapes later adds to it)."""
    runs = [r for r in store.runs(RUN_KIND) if r.args.get("head_to_head")]
    return runs[-1].id if runs else store.start_run(RUN_KIND, RUN_ARGS)


def judge_imported(args: argparse.Namespace, shapes: list[Shape], deadline: float) -> int:
    """Judge the imported kernels of shapes not yet judged on this device; no new one starts past `deadline`."""
    imported = import_kernel_set("cuda-l2", args.set, shapes)
    device_name = describe_device("cuda").name
    with Store(args.workspace) as store:
        run_id = head_to_head_run(store)
        done = {v.task_key for v in store.verdicts(run_id=run_id) if v.device_name == device_name}
        todo = [k for k in imported.kernels if k.task_key not in done]
        judged = 0
        with LocalPool("cuda", cache_dir=store.cache_dir, config=JudgeConfig().with_overrides(CONFIG),
                       workers=args.workers) as pool:
            # a window of jobs in flight, refilled as each ends: none starts past the deadline
            waiting, running = list(todo), set()
            while waiting or running:
                while waiting and len(running) < 2 * pool.workers and time.monotonic() < deadline:
                    k = waiting.pop(0)
                    running.add(pool.submit(Job(hgemm_task(k.shape), k.source, tag=k)))
                if not running:
                    break
                finished, running = wait(running, return_when=FIRST_COMPLETED)
                for f in finished:
                    r = f.result()
                    if r.verdict is not None:
                        store.record_verdict(r.job.task, r.job.source, r.verdict, run_id=run_id, origin=str(r.job.tag.path))
                        judged += 1
                        print(f"[h2h] {r.job.task.key}: {r.verdict.summary()}", flush=True)
                    else:
                        print(f"[h2h] {r.job.task.key}: task error: {r.error}", flush=True)
    return judged


def failed_check(v: Verdict) -> str:
    """Which check an incorrect verdict failed, from its message."""
    if v.correct:
        return ""
    m = v.message
    if "0s and 1s" in m:
        return "0/1-exact"
    if "guard" in m:
        return "guard zones"
    if m.startswith("seed"):
        return "tolerance (random inputs)"
    return v.status.value


def claimed(set_path: Path) -> dict[str, dict[str, float]]:
    """CUDA-L2's own speedups per shape (its eval_results CSVs, found above the kernels' folder), by scenario."""
    out: dict[str, dict[str, float]] = {}
    for d in [set_path.resolve(), *set_path.resolve().parents][:4]:
        for scenario in SCENARIOS:
            f = d / "eval_results" / f"cuda_l2_h100_F32F16F16F32_speedup_{scenario}.csv"
            if f.is_file():
                for row in csv.DictReader(f.open()):
                    shape = row["mnk"].replace("_", "x")
                    out.setdefault(shape, {})[scenario] = float(row["torch.matmul"])
                    out[shape][f"{scenario}_cublas_max"] = float(row["cuBLAS-max"])
    return out


def imported_rows(store: Store, run_id: str | None, device_name: str, shapes: list[Shape]) -> list[dict]:
    """Per shape, the imported kernel's verdict on `device_name` in the head-to-head run (none judged yet: no run)."""
    rows = []
    judged = store.verdicts(run_id=run_id) if run_id else []
    verdicts = {v.task_key: v for v in judged if v.device_name == device_name}
    for s in shapes:
        key = f"hgemm/{s}"
        row: dict = {"shape": str(s)}
        if key in verdicts:
            v = store.verdict(verdicts[key].id)
            origin = origin_of(store.candidate_source(verdicts[key].id)) or {}
            row.update(status=v.status.value, check=failed_check(v), flags=[f.code for f in v.flags],
                       accumulator=origin.get("accumulator", ""),
                       vs_matmul=v.speedup if v.correct else None, significant=v.correct and v.significant and (v.speedup or 0) > 1,
                       message=v.message[:160])
            server = v.scenarios.get("server") if v.correct else None
            row["vs_matmul_server"] = server["speedup"] if server else None
            b = store.baselines(key, device_name)
            row["vs_tunableop"] = vs_tunableop(b, "offline", row["vs_matmul"])
            row["vs_tunableop_server"] = vs_tunableop(b, "server", row["vs_matmul_server"])
        rows.append(row)
    return rows


def report(args: argparse.Namespace, shapes: list[Shape], device_name: str) -> None:
    claims = claimed(args.set)
    with Store(args.workspace) as store:
        runs = [r for r in store.runs(RUN_KIND) if r.args.get("head_to_head")]
        theirs = imported_rows(store, runs[-1].id if runs else None, device_name, shapes)
        templates = template_runs(store, device_name)
        ours = {r.shape: r for r in rows_of(store, templates[-1].id, device_name)[0]} if templates else {}
    f = lambda x: f"{x:.2f}x" if x else "-"  # noqa: E731
    print(f"\n{'shape':<18}{'CUDA-L2':>16}{'acc':>6}{'vs mm':>8}{'srv':>8}{'vs tuned':>9}{'claimed':>9}"
          f"{'ours vs mm':>11}{'ours srv':>9}  check / flags")
    for row in theirs:
        o = ours.get(row["shape"])
        c = claims.get(row["shape"], {})
        print(f"{row['shape']:<18}{row.get('status', 'not judged'):>16}{row.get('accumulator', ''):>6}"
              f"{f(row.get('vs_matmul')):>8}{f(row.get('vs_matmul_server')):>8}{f(row.get('vs_tunableop')):>9}"
              f"{f(c.get('offline')):>9}{f(o.vs_matmul if o else None):>11}{f(o.vs_matmul_server if o else None):>9}  "
              f"{row.get('check', '')} {','.join(row.get('flags', []))}")
    judged = [r for r in theirs if "status" in r]
    statuses = Counter(r["status"] for r in judged)
    checks = Counter(r["check"] for r in judged if r["check"])
    print(f"\n{device_name}; CUDA-L2 kernels judged {len(judged)}/{len(shapes)}: "
          + ", ".join(f"{n} {s}" for s, n in statuses.most_common()) + (f"; failed checks: {dict(checks)}" if checks else ""))
    as_rows = [ShapeRow(shape=r["shape"], status="done", vs_matmul=r["vs_matmul"], vs_matmul_alone=r["vs_matmul"],
                        vs_matmul_server=r["vs_matmul_server"], vs_tunableop=r["vs_tunableop"],
                        vs_tunableop_server=r["vs_tunableop_server"], significant=r["significant"])
               for r in judged if r["vs_matmul"]]
    sides = {"CUDA-L2 (correct kernels)": summary(as_rows),
             "kernelcraft template search": summary([o for o in ours.values() if o.status == "done"])}
    claimed_xs = [claims[r["shape"]]["offline"] for r in judged if claims.get(r["shape"], {}).get("offline")]
    for name, rows in sides.items():
        for s in rows:
            print(f"{name:<30} {s['comparison']:<28} {s['shapes']:>3} shapes  geomean {s['geomean']:.3f}x  "
                  f"median {s['median']:.3f}x  wins {s['win_rate']:.0%}  worst {s['worst']}")
    if claimed_xs:
        print(f"{'CUDA-L2 as it reports itself':<30} {'vs torch.matmul, offline':<28} {len(claimed_xs):>3} shapes  geomean "
              f"{math.exp(sum(map(math.log, claimed_xs)) / len(claimed_xs)):.3f}x  wins "
              f"{sum(x > 1 for x in claimed_xs) / len(claimed_xs):.0%}")
    (args.out / "head_to_head.json").write_text(json.dumps({"device": device_name, "shapes": [str(s) for s in shapes],
                                                             "cuda_l2": theirs, "claimed": {r["shape"]: claims.get(r["shape"])
                                                                                            for r in theirs},
                                                             "summary": sides}, indent=1, default=str))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", type=Path, required=True, help="CUDA-L2's kernels/h100_F32F16F16F32 folder.")
    ap.add_argument("--sample", type=int, default=64)
    ap.add_argument("--workspace", type=Path, default=Path("h2h-ws"))
    ap.add_argument("--parts", default="import,report", help="import (baselines, then the imported kernels), report.")
    ap.add_argument("--budget-wall-s", type=float, default=420.0)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--device-name", help="report: the device whose numbers to show (default: this machine's GPU).")
    ap.add_argument("--out", type=Path, default=Path("bench-out"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    shapes = stratified(set_shapes(args.set), args.sample)
    (args.out / "head_to_head_shapes.txt").write_text(",".join(map(str, shapes)))
    start = time.monotonic()
    if "import" in args.parts:
        with Store(args.workspace) as store:
            judge = Judge("cuda", cache_dir=store.cache_dir, config=JudgeConfig().with_overrides(CONFIG))
            timed = record_baselines(store, judge, [hgemm_task(s) for s in shapes], describe_device("cuda").name,
                                     start + args.budget_wall_s * 0.35)
            judge.close()
        print(f"baselines timed this slice: {timed} (shape, scenario) pairs", flush=True)
        print(f"imported kernels judged this slice: {judge_imported(args, shapes, start + args.budget_wall_s)}", flush=True)
    if "report" in args.parts:
        report(args, shapes, args.device_name or describe_device("cuda").name)


if __name__ == "__main__":
    main()
