"""Per-shape GEMM head-to-head: CUDA-L2's published H100 kernels under kernelcraft's judge, next to torch.matmul,
TunableOp and kernelcraft's own template search, on the hgemm suite's stratified sample (`optimize hgemm --sample
64` searches the same shapes; CUDA-L2 has a kernel for every shape of the grid), in the three timing scenarios
(offline, server, sustained), on every GPU of the machine.

One workspace holds everything, so it runs in slices of a few minutes and resumes:

    python benchmarks/gemm_head_to_head.py --set .cuda-l2/kernels/h100_F32F16F16F32 --sample 64 \\
        --workspace WS --parts import --budget-wall-s 420 --out $OUT      # the imported kernels and baselines
    python benchmarks/gemm_head_to_head.py --set ... --workspace WS --parts ours --ours-from HGEMM_WS --out $OUT
    python benchmarks/gemm_head_to_head.py --set ... --workspace WS --parts report --out $OUT     # no GPU needed

`ours` judges again, here and in the same configuration, the best kernel of kernelcraft's template search for each
shape: from `--ours-from` (a workspace of earlier `benchmarks/hgemm.py` runs, on any device), or from a search run
in this workspace (`benchmarks/hgemm.py --shapes "$(cat $OUT/head_to_head_shapes.txt)" --workspace WS`).

`--family hgemm-wt` judges the same kernels with B given as the K-major weight W (C = A Wᵀ, as `nn.Linear` stores
its weight, so no column-major copy is made), in runs of its own, reported apart; it has no search side.

`import` judges each imported kernel once, `ours` the template search's best kernel for each shape, both under one
judge configuration with all three scenarios, into the workspace's two eval-suite runs "head-to-head" (a pack can
take the best of both, `pack build H2H_RUN H2H_OURS_RUN`). The report prints per shape the imported kernel's
verdict, the check it failed (0/1-exact inputs, guard zones, tolerance on random inputs), its accumulator and
flags, its speedups against torch.matmul and TunableOp in each scenario, the speedup CUDA-L2's own results claim
for the shape (eval_results/, against torch.matmul), and kernelcraft's best kernel's; then geometric means and
win rates (significant wins, as the judge counts them) for each side, and the clock the sustained rounds ran at.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import dataclass, replace
from itertools import zip_longest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hgemm import ShapeRow, missing_scenarios, summary, template_runs, vs_tunableop  # noqa: E402

from kernelcraft.judge import (JUDGE_VERSION, SCENARIOS, Executor, Job, JudgeConfig, Result, Verdict,  # noqa: E402
                               describe_device, open_executor, overstatement)
from kernelcraft.kernels.external import import_kernel_set  # noqa: E402
from kernelcraft.kernels.external.imported import origin_of  # noqa: E402
from kernelcraft.report import geomean  # noqa: E402
from kernelcraft.search import best_attempt  # noqa: E402
from kernelcraft.store import Store, baselines_job, record_baselines  # noqa: E402
from kernelcraft.tasks import GEMM_FAMILIES, HGEMM_SUITE, Shape, hgemm_task, sample_grid  # noqa: E402

RUN_KIND = "eval-suite"  # what `pack build` and `runs list` read an imported set's verdicts as
SIDES = {"cuda-l2": "cuda-l2 (import-kernels)", "kernelcraft": "the template search's best (optimize)"}
# Every scenario. The sustained one heats the device 3-10 s: it stays hot from one evaluation to the next, and a
# clock that never settles within 2% (a GPU at its power limit may wander) must not cost 30 s a verdict.
CONFIG = {"timing": {"server": True, "sustained": True, "sustained_min_heat_s": 3.0, "sustained_heat_s": 10.0}}


def head_to_head_run(store: Store, side: str, family: str, make: bool = True) -> str | None:
    """The workspace's head-to-head run of one side on one task family (made on first use; judging more shapes later
    adds to it)."""
    runs = [r for r in store.runs(RUN_KIND) if r.args.get("head_to_head") == side
            and r.args.get("suite", HGEMM_SUITE) == family]
    if runs or not make:
        return runs[-1].id if runs else None
    return store.start_run(RUN_KIND, {"suite": family, "solutions": SIDES[side], "head_to_head": side})


def imported_jobs(args: argparse.Namespace, shapes: list[Shape], store: Store) -> list[tuple[Job, str]]:
    """CUDA-L2's kernel for each shape the set has, with its origin (the file)."""
    return [(Job(hgemm_task(k.shape, args.family), k.source, tag=k.task_key), str(k.path))
            for k in import_kernel_set("cuda-l2", args.set, shapes, args.family).kernels]


def our_jobs(args: argparse.Namespace, shapes: list[Shape], store: Store) -> list[tuple[Job, str]]:
    """kernelcraft's template search's best verified kernel for each shape it has one for: from the newest template
    run of `--ours-from` (a workspace of earlier hgemm runs, on any device: the kernel is judged again here) that
    has one, else of this workspace's runs on this device. The search makes hgemm's kernels only."""
    if args.family != HGEMM_SUITE:
        return []
    if args.ours_from:
        with Store(args.ours_from) as source:
            return best_kernels(source, template_runs(source, None), shapes)
    return best_kernels(store, template_runs(store, describe_device("cuda").name), shapes)


def best_kernels(store: Store, runs: list, shapes: list[Shape]) -> list[tuple[Job, str]]:
    """Per shape, the best attempt of the newest of `runs` (oldest first) with a correct one, and its run."""
    wanted, jobs = {f"hgemm/{s}": s for s in shapes}, {}
    for run in reversed(runs):
        for rt in store.run_tasks(run.id):
            best = best_attempt(store.attempts(run.id, rt.task_key))
            if rt.task_key in wanted and rt.task_key not in jobs and best is not None:
                jobs[rt.task_key] = (Job(hgemm_task(wanted[rt.task_key]), store.candidate_source(best.verdict_id),
                                         tag=rt.task_key), f"optimize:{run.id}")
    return list(jobs.values())


@dataclass
class Part:
    """One kind of job of a slice (an imported kernel, one of ours, a shape's baselines) and what each result
    adds to the workspace."""
    name: str
    jobs: list[Job]
    record: Callable[[Result], bool]
    count: int = 0
    lead_s: float = 0.0  # how long before the slice's deadline it starts no new job (a candidate's build takes minutes)


def run_parts(pool: Executor, parts: list[Part], deadline: float) -> None:
    """Run every part's jobs on `pool` interleaved, so a CUTLASS kernel's minutes of nvcc on the host overlap the
    GPU-bound work of the others, with twice the pool's workers in flight, refilled as each ends; none starts past
    `deadline`, less its part's `lead_s` (a slice under a hard stop: a build that cannot finish is wasted)."""
    owner = {p.name: p for p in parts}
    tagged = [[replace(j, tag=(p.name, j.tag)) for j in p.jobs] for p in parts]
    waiting = [j for row in zip_longest(*tagged) for j in row if j is not None]
    running: set = set()
    while waiting or running:
        while len(running) < 2 * pool.workers:
            now = time.monotonic()
            job = next((j for j in waiting if now < deadline - owner[j.tag[0]].lead_s), None)
            if job is None:
                break
            waiting.remove(job)
            running.add(pool.submit(job))
        if not running:
            break
        finished, running = wait(running, return_when=FIRST_COMPLETED)
        for f in finished:
            r = f.result()
            part = owner[r.job.tag[0]]
            part.count += part.record(replace(r, job=replace(r.job, tag=r.job.tag[1])))


def baselines_part(pool: Executor, store: Store, shapes: list[Shape], family: str, device_name: str) -> Part:
    """torch.matmul's and TunableOp's times in every scenario for shapes that lack them on this device, a job per
    shape spread over the pool's GPUs (each a trusted run on one GPU, so a TunableOp ratio never mixes two)."""
    jobs = []
    for s in shapes:
        task = hgemm_task(s, family)
        missing = missing_scenarios(store.baselines(task.key, device_name), SCENARIOS, tunable=True)
        if missing:
            store.put_task(task)
            # eager at PyTorch's defaults is not in the table: two timed sides a scenario instead of three
            jobs.append(baselines_job(task, compiled=False, tunableop=True, scenarios=missing, defaults=False))
    return Part("baselines", jobs, lambda r: bool(record_baselines(store, pool.device, r)))


def current(v: Verdict) -> bool:
    """Whether a verdict is this judge's (of its version: a verdict of an older judge is judged again)."""
    return v.env.get("judge_version") == JUDGE_VERSION


def side_part(pool: Executor, store: Store, args: argparse.Namespace, side: str, shapes: list[Shape]) -> Part:
    """One side's kernels for shapes its run lacks a current verdict of on this device (one of this judge version,
    of the same source: a judge or wrapper fixed since judges them again)."""
    run_id = head_to_head_run(store, side, args.family)
    jobs = (imported_jobs if side == "cuda-l2" else our_jobs)(args, shapes, store)
    sources = {j.task.key: j.source for j, _ in jobs}
    done = {v.task_key for v in store.verdicts(run_id=run_id) if v.device_name == pool.description.name
            and current(store.verdict(v.id)) and store.candidate_source(v.id) == sources.get(v.task_key)}
    origins = {j.tag: origin for j, origin in jobs}

    def record(r: Result) -> bool:
        if r.verdict is None:
            print(f"[h2h {side}] {r.job.task.key}: task error: {r.error}", flush=True)
            return False
        store.record_verdict(r.job.task, r.job.source, r.verdict, run_id=run_id, origin=origins[r.job.tag])
        print(f"[h2h {side}] {r.job.task.key}: {r.verdict.summary()}", flush=True)
        return True

    return Part(side, [j for j, _ in jobs if j.task.key not in done], record)


def failed_check(v: Verdict) -> str:
    """Which check an incorrect verdict failed, from its message (the timed calls' output: a kernel whose output
    was not ready, or wrong, when its stream's work was done)."""
    if v.correct:
        return ""
    m = v.message
    if "0s and 1s" in m:
        return "0/1-exact"
    if "guard" in m:
        return "guard zones"
    if m.startswith("seed"):
        return "tolerance (random inputs)"
    if "timed call" in m:
        return "timed calls' output"
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


def side_rows(store: Store, run_id: str | None, device_name: str, shapes: list[Shape], family: str) -> list[dict]:
    """Per shape, one side's verdict on `device_name` in its head-to-head run (none judged yet: no run), with
    its speedups over torch.matmul and TunableOp in each scenario and the clock of its sustained rounds."""
    rows = []
    judged = store.verdicts(run_id=run_id) if run_id else []
    verdicts = {v.task_key: v for v in judged if v.device_name == device_name}
    for s in shapes:
        key = f"{family}/{s}"
        row: dict = {"shape": str(s)}
        if key in verdicts:
            v = store.verdict(verdicts[key].id)
            origin = origin_of(store.candidate_source(verdicts[key].id)) or {}
            row.update(status=v.status.value, check=failed_check(v), flags=list(dict.fromkeys(f.code for f in v.flags)),
                       judge=v.env.get("judge_version", ""),
                       accumulator=origin.get("accumulator", ""),
                       vs_matmul=v.speedup if v.correct else None, significant=v.correct and v.significant and (v.speedup or 0) > 1,
                       vs_matmul_alone=v.speedup / overstatement(v) if v.correct else None,
                       message=v.message[:160])
            b = store.baselines(key, device_name)
            for scenario in SCENARIOS:
                x = v.speedup if scenario == "offline" else (v.scenarios.get(scenario) or {}).get("speedup")
                x = x if v.correct else None
                row[f"vs_matmul_{scenario}"], row[f"vs_tunableop_{scenario}"] = x, vs_tunableop(b, scenario, x)
            settled = ((v.scenarios.get("sustained") or {}).get("clocks") or {}).get("settled") or {}
            row["sustained_clock_mhz"] = settled.get("clock_mhz")
        rows.append(row)
    return rows


def shape_rows(rows: list[dict]) -> list[ShapeRow]:
    """A side's correct kernels as hgemm.summary counts them."""
    return [ShapeRow(shape=r["shape"], status="done", vs_matmul=r["vs_matmul"], vs_matmul_alone=r["vs_matmul_alone"],
                     vs_matmul_server=r["vs_matmul_server"], vs_tunableop=r["vs_tunableop_offline"],
                     vs_tunableop_server=r["vs_tunableop_server"], vs_matmul_sustained=r["vs_matmul_sustained"],
                     vs_tunableop_sustained=r["vs_tunableop_sustained"], significant=r["significant"])
            for r in rows if r.get("vs_matmul")]


def report(args: argparse.Namespace, shapes: list[Shape], device_name: str) -> None:
    claims = claimed(args.set)
    with Store(args.workspace) as store:
        theirs = side_rows(store, head_to_head_run(store, "cuda-l2", args.family, make=False), device_name, shapes,
                           args.family)
        ours = {r["shape"]: r for r in side_rows(store, head_to_head_run(store, "kernelcraft", args.family, make=False),
                                                 device_name, shapes, args.family)}
    f = lambda x: f"{x:.2f}x" if x else "-"  # noqa: E731
    print(f"\n{'shape':<18}{'CUDA-L2':>16}{'acc':>13}{'vs mm':>8}{'srv':>8}{'sus':>8}{'vs tuned':>9}{'claimed':>9}"
          f"{'ours vs mm':>11}{'srv':>8}{'sus':>8}{'MHz':>6}  check / flags")
    for row in theirs:
        o = ours.get(row["shape"], {})
        c = claims.get(row["shape"], {})
        mhz = row.get("sustained_clock_mhz") or o.get("sustained_clock_mhz")
        print(f"{row['shape']:<18}{row.get('status', 'not judged'):>16}{row.get('accumulator', ''):>13}"
              f"{f(row.get('vs_matmul')):>8}{f(row.get('vs_matmul_server')):>8}{f(row.get('vs_matmul_sustained')):>8}"
              f"{f(row.get('vs_tunableop_offline')):>9}{f(c.get('offline')):>9}{f(o.get('vs_matmul')):>11}"
              f"{f(o.get('vs_matmul_server')):>8}{f(o.get('vs_matmul_sustained')):>8}{f'{mhz:.0f}' if mhz else '-':>6}  "
              f"{row.get('check', '')} {','.join(row.get('flags', []))}")
    judged = [r for r in theirs if "status" in r]
    statuses = Counter(r["status"] for r in judged)
    checks = Counter(r["check"] for r in judged if r["check"])
    print(f"\n{device_name}; {args.family}: CUDA-L2 kernels judged {len(judged)}/{len(shapes)}: "
          + ", ".join(f"{n} {s}" for s, n in statuses.most_common()) + (f"; failed checks: {dict(checks)}" if checks else ""))
    versions = Counter(r["judge"] for r in [*judged, *ours.values()] if "status" in r)
    print("judge version: " + ", ".join(f"{v or '?'} ({n} verdicts)" for v, n in sorted(versions.items())))
    mhz = [r["sustained_clock_mhz"] for r in [*judged, *ours.values()] if r.get("sustained_clock_mhz")]
    if mhz:
        print(f"sustained rounds ran at {min(mhz):.0f}-{max(mhz):.0f} MHz (median {statistics.median(mhz):.0f})")
    sides = {"CUDA-L2 (correct kernels)": summary(shape_rows(judged)),
             "kernelcraft template search": summary(shape_rows(list(ours.values())))}
    claimed_xs = [claims[r["shape"]]["offline"] for r in judged if claims.get(r["shape"], {}).get("offline")]
    for name, rows in sides.items():
        for s in rows:
            print(f"{name:<30} {s['comparison']:<28} {s['shapes']:>3} shapes  geomean {s['geomean']:.3f}x  "
                  f"median {s['median']:.3f}x  wins {s['win_rate']:.0%}  worst {s['worst']}")
    if claimed_xs:
        print(f"{'CUDA-L2 as it reports itself':<30} {'vs torch.matmul, offline':<28} {len(claimed_xs):>3} shapes  geomean "
              f"{geomean(claimed_xs):.3f}x  wins "
              f"{sum(x > 1 for x in claimed_xs) / len(claimed_xs):.0%}")
    (args.out / "head_to_head.json").write_text(json.dumps({"device": device_name, "shapes": [str(s) for s in shapes],
                                                             "cuda_l2": theirs, "claimed": {r["shape"]: claims.get(r["shape"])
                                                                                            for r in theirs},
                                                             "summary": sides}, indent=1, default=str))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", type=Path, required=True, help="CUDA-L2's kernels/h100_F32F16F16F32 folder.")
    ap.add_argument("--sample", type=int, default=64, help="Shapes of the hgemm suite's stratified sample (as "
                                                               "optimize hgemm --sample N takes them).")
    ap.add_argument("--ours-from", type=Path, help="ours: a workspace of earlier hgemm template runs to take "
                                                   "kernelcraft's best kernels from (default: this workspace's).")
    ap.add_argument("--family", choices=list(GEMM_FAMILIES), default=HGEMM_SUITE,
                    help="hgemm (B row-major), or hgemm-wt (B as the K-major weight W; reported apart, no search side).")
    ap.add_argument("--workspace", type=Path, default=Path("h2h-ws"))
    ap.add_argument("--parts", default="import,report", help="import (the imported kernels and their baselines), ours "
                                                               "(the template search's best kernels), report.")
    ap.add_argument("--budget-wall-s", type=float, default=420.0)
    ap.add_argument("--build-lead-s", type=float, default=0.0,
                    help="Start no kernel (it builds for minutes) this long before the budget ends; baselines go on "
                         "until it does. For slices under a hard stop, e.g. 240 with a 420 s budget and a 510 s stop.")
    ap.add_argument("--gpus", default="all", help="The GPUs to judge on: all, or indices such as 0,1.")
    ap.add_argument("--workers", type=int, help="Evaluations at once per GPU (default: the pool's own choice).")
    ap.add_argument("--device-name", help="report: the device whose numbers to show (default: this machine's GPU).")
    ap.add_argument("--out", type=Path, default=Path("bench-out"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    # the hgemm suite's stratified sample (volume x aspect), the shapes kernelcraft's own hgemm runs search
    shapes = sample_grid(args.sample)
    (args.out / "head_to_head_shapes.txt").write_text(",".join(map(str, shapes)))
    start = time.monotonic()
    if "import" in args.parts or "ours" in args.parts:
        with Store(args.workspace) as store, open_executor("cuda", cache_dir=store.cache_dir, gpus=args.gpus,
                                                           config=JudgeConfig().with_overrides(CONFIG),
                                                           workers=args.workers) as pool:
            print(f"judging on {pool.description.name}, GPUs {pool.device_indices}, {pool.workers} workers", flush=True)
            parts = []
            if "import" in args.parts:
                parts += [replace(side_part(pool, store, args, "cuda-l2", shapes), lead_s=args.build_lead_s),
                          baselines_part(pool, store, shapes, args.family, pool.description.name)]
            if "ours" in args.parts:
                parts.append(replace(side_part(pool, store, args, "kernelcraft", shapes), lead_s=args.build_lead_s))
            run_parts(pool, parts, start + args.budget_wall_s)
            for part in parts:
                print(f"{part.name} this slice: {part.count} of {len(part.jobs)} judged or timed", flush=True)
    if "report" in args.parts:
        report(args, shapes, args.device_name or describe_device("cuda").name)


if __name__ == "__main__":
    main()
