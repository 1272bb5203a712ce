"""Build a kernel pack from a run: per GEMM shape the best verified kernel, its numbers, and the loader.

Nothing here measures: every number comes from a verdict the store recorded."""

from __future__ import annotations

import ast
import hashlib
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from pydantic import ValidationError

from ..judge import Verdict, honest_speedup, overstatement
from ..judge.verdict import DOUBTFUL_TIMING
from ..search import OptimizeConfig, ranked_attempts
from ..store import AttemptRow, Store
from ..tasks import Task, shape_of, task_from_source
from ..kernels.external.imported import origin_of
from .loader import import_kernel
from .manifest import PackEntry, PackError, PackExtension, PackManifest
from .prebuilt import recording

# judge.verdict.DOUBTFUL_TIMING keeps a kernel out of a pack. Other flags do not: "noisy_timing" and "clock_drift" are
# about how well it was measured; "low_coverage" counts 1.00x at most (the judge's rule on library calls), so such a
# kernel never beats torch.matmul; "slowed_reference" (the reference ran slower next to the kernel than alone) counts
# the kernel's speedup over the reference alone, as the judge's rule and the RL reward do.
KERNELS = "kernels"
RUNTIME = "kcpack"  # the loader's copy inside the pack, importable with only torch and triton
RUNTIME_FILES = ("loader.py", "manifest.py", "prebuilt.py")
RUNTIME_INIT = '"""A kernelcraft kernel pack\'s loader: `kcpack.load(PACK_DIR)`."""\n\nfrom .loader import KernelPack, PackError, Route, load\n'

README = """kernelcraft kernel pack: {count} {dtype} GEMM kernel(s) for {device_name} ({device}),
torch {torch}, triton {triton}; from {from_runs} of a kernelcraft workspace, built {created}.

Load it (the device name and the torch and triton versions must match, unless forced):

    import kernelcraft.pack
    pack = kernelcraft.pack.load("PACK_DIR")
    c = pack.matmul(a, b)   # a: M x K, b: K x N; shapes without a winning kernel use torch.matmul

or, where kernelcraft is not installed (torch and triton are enough):

    import sys; sys.path.insert(0, "PACK_DIR")
    import kcpack
    pack = kcpack.load("PACK_DIR")

manifest.json lists every shape's kernel file (kernels/MxNxK.py, a module defining ModelNew), its
sha256, the id of the verdict it was judged by and its run, where the kernel came from (source: kernelcraft,
or the kernel set it was imported from, with its license), and its times and speedups over torch.matmul; and
the compiled libraries in ext/ (built with --compile), which kernels that build C++ or CUDA with
load_inline load instead of compiling. `kernelcraft pack show DIR` prints it; `kernelcraft pack
bench DIR` times the pack on this machine.
"""


@dataclass(frozen=True)
class _Choice:
    """A shape's best packable kernel: its verdict's id, the verdict and its honest speedup."""

    verdict_id: int
    verdict: Verdict
    speedup: float


@dataclass(frozen=True)
class _Pick:
    """The kernel chosen for one shape."""

    shape: tuple[int, int, int]
    task: str
    verdict_id: int
    verdict: Verdict
    speedup: float  # honest: effective, or over the reference alone for a slowed_reference verdict
    run_id: str  # the run whose verdict it is


def _run_sets(store: Store, run_id: str) -> dict[str, object]:
    """The run's --set size overrides (an optimize run's; none for other kinds)."""
    try:
        config = OptimizeConfig.model_validate(store.run(run_id).args)
    except ValidationError:
        return {}
    sets = {}
    for item in config.sets:
        name, _, value = item.partition("=")
        sets[name] = ast.literal_eval(value)  # checked when the run started
    return sets


def judged_shape(task: Task, device: str, sets: dict[str, object]) -> tuple[int, int, int] | None:
    """(m, n, k) of an hgemm task as the judge ran it on `device` (its size overrides applied); None for
    tasks that are not GEMMs of the hgemm suite."""
    shape = shape_of(task)
    if shape is None:
        return None
    sizes = {**task.sizes_for(device), **sets}
    return (int(sizes.get("M", shape.m)), int(sizes.get("N", shape.n)), int(sizes.get("K", shape.k)))


def _choose(store: Store, candidates: list[tuple[int, float]]) -> tuple[_Choice | None, str]:
    """Of correct kernels (verdict id, effective speedup), the one of the highest honest speedup whose verdict
    has no excluded flag, and why none when none."""
    flagged: set[str] = set()
    chosen: _Choice | None = None
    # Highest effective speedup first (of equals, the first given), and the honest speedup is never above it.
    for verdict_id, effective in sorted(candidates, key=lambda c: -c[1]):
        if chosen is not None and effective <= chosen.speedup:
            break
        verdict = store.verdict(verdict_id)
        codes = {f.code for f in verdict.flags} & DOUBTFUL_TIMING
        if codes:
            flagged |= codes
            continue
        speedup = honest_speedup(verdict)
        if chosen is None or speedup > chosen.speedup:
            chosen = _Choice(verdict_id, verdict, speedup)
    if chosen is not None:
        return chosen, ""
    return None, f"every correct kernel is flagged ({', '.join(sorted(flagged))})" if flagged else "no correct kernel"


def _searched(attempts: list[AttemptRow]) -> list[tuple[int, float]]:
    """A search's correct kernels of one task, as the search ranks them (search.ranked_attempts)."""
    return [(a.verdict_id, a.speedup) for a in ranked_attempts(attempts) if a.verdict_id]


def _run_bests(store: Store, run_id: str) -> dict[str, tuple[_Choice | None, str]]:
    """Each task of the run and its best packable kernel (or why none): a search's attempts, or, for a run
    that judged candidates as given (eval-suite, as of an imported kernel set), its verdicts."""
    tasks = [row.task_key for row in store.run_tasks(run_id)]
    if tasks:
        return {key: _choose(store, _searched(store.attempts(run_id, key))) for key in tasks}
    by_task: dict[str, list[tuple[int, float]]] = {}
    for v in store.verdicts(run_id=run_id):
        correct = [(v.id, v.effective_speedup)] if v.status == "correct" and v.effective_speedup is not None else []
        by_task.setdefault(v.task_key, []).extend(correct)
    return {key: _choose(store, found) for key, found in by_task.items()}


def _picks(store: Store, run_ids: list[str], min_speedup: float) -> tuple[list[_Pick], dict[str, str]]:
    """Per shape, the best kernel of any of the runs (a search's, an imported set's), if above `min_speedup`;
    and why each GEMM task has none."""
    picks: dict[tuple[int, int, int], _Pick] = {}
    left_out: dict[str, str] = {}
    gemm_tasks = 0
    for run_id in run_ids:
        sets = _run_sets(store, run_id)
        for key, (best, why) in _run_bests(store, run_id).items():
            task = task_from_source(store.task_source(key), key)
            if shape_of(task) is None:
                continue
            gemm_tasks += 1
            if best is None:
                left_out.setdefault(key, why)
                continue
            shape = judged_shape(task, best.verdict.device, sets)
            if shape not in picks or best.speedup > picks[shape].speedup:
                picks[shape] = _Pick(shape, key, best.verdict_id, best.verdict, best.speedup, run_id)
    if gemm_tasks == 0:
        raise PackError(f"{_runs(run_ids)} {'has' if len(run_ids) == 1 else 'have'} no hgemm task: a pack holds GEMM kernels "
                        "(optimize hgemm ..., or eval-suite hgemm of imported kernels)")
    for shape, pick in list(picks.items()):
        if pick.speedup <= min_speedup:
            left_out[pick.task] = f"best kernel {pick.speedup:.2f}x is not above {min_speedup:.2f}x (torch.matmul serves it)"
            del picks[shape]
    for pick in picks.values():
        left_out.pop(pick.task, None)  # another run had a kernel for it
    if not picks:
        reasons = "; ".join(f"{k}: {v}" for k, v in list(left_out.items())[:3])
        raise PackError(f"{_runs(run_ids)} {'has' if len(run_ids) == 1 else 'have'} no kernel to pack ({reasons})")
    return sorted(picks.values(), key=lambda p: p.shape), left_out


def _runs(run_ids: list[str]) -> str:
    return f"run {run_ids[0]}" if len(run_ids) == 1 else f"runs {', '.join(run_ids)}"


def _environment(picks: list[_Pick]) -> dict[str, object]:
    """Device, versions and bandwidth, the same for every kernel of the pack."""
    envs = {(p.verdict.device, str(p.verdict.env.get("device_name", "")), str(p.verdict.env.get("torch", "")),
             str(p.verdict.env.get("triton", ""))) for p in picks}
    if len(envs) > 1:
        raise PackError(f"the run's kernels were judged on different devices or versions ({sorted(envs)}): a pack is for one")
    ((device, device_name, torch_version, triton_version),) = envs
    bandwidths = [bw for p in picks if (a := p.verdict.stage("audit")) is not None
                  and (bw := a.details.get("ceilings", {}).get("bandwidth_bytes_per_s", 0)) > 0]
    return {"device": device, "device_name": device_name, "capability": str(picks[0].verdict.env.get("capability", "")),
            "torch": torch_version, "triton": triton_version, "bandwidth_bytes_per_s": float(min(bandwidths, default=0.0))}


def _entry(store: Store, pick: _Pick, kernels: Path) -> PackEntry:
    m, n, k = pick.shape
    data = store.candidate_source(pick.verdict_id).encode()
    rel = f"{KERNELS}/{m}x{n}x{k}.py"
    (kernels.parent / rel).write_bytes(data)
    origin = origin_of(data.decode()) or {}
    v = pick.verdict
    server = (getattr(v, "scenarios", {}) or {}).get("server")
    over = overstatement(v)  # 1.0 unless the reference ran slower next to the kernel than alone
    return PackEntry(m=m, n=n, k=k, kernel=rel, sha256=hashlib.sha256(data).hexdigest(), task=pick.task,
                     verdict_id=pick.verdict_id, kernel_ms=v.candidate.median_ms, reference_ms=v.reference.median_ms / over,
                     speedup=v.speedup / over, speedup_server=float(server["speedup"]) / over if server else None,
                     run_id=pick.run_id, source=str(origin.get("set", "kernelcraft")), license=str(origin.get("license", "")),
                     origin=str(origin.get("file", "")))


def _compile(out_dir: Path, entries: list[PackEntry], device: str) -> list[PackExtension]:
    """Construct every kernel once, copying the libraries its load_inline calls build into the pack."""
    import torch

    found: dict[str, PackExtension] = {}
    try:
        if device == "cuda" and not torch.cuda.is_available():
            raise PackError("--compile builds the kernels on the pack's device, and this machine has no CUDA device")
        with recording(out_dir, found):
            for e in entries:
                import_kernel(out_dir / e.kernel, e, device)
    except PackError:
        shutil.rmtree(out_dir, ignore_errors=True)
        raise
    return sorted(found.values(), key=lambda x: x.file)


def build_pack(store: Store, run_ids: str | list[str], out_dir: Path, *, min_speedup: float = 1.0,
               compile_kernels: bool = False) -> PackManifest:
    """Write a pack of the GEMM kernels of one run or several (searches, and eval-suite runs of imported kernel
    sets) into `out_dir` (new or empty): for each hgemm shape the correct kernel with the best honest speedup
    whose verdict has no DOUBTFUL_TIMING flag, whichever run it came from, if that speedup is above
    `min_speedup`; each entry names its run, its source (kernelcraft, or the imported set) and license; the
    manifest, a README and the loader (`kcpack`). With `compile_kernels`, every
    kernel is constructed here once and the libraries its load_inline calls build are shipped in the
    pack (so it loads without a compiler); that needs the pack's device. Returns the manifest.

    Raises PackError for an unknown run, a run without a kernel to pack, an occupied `out_dir`, or a
    kernel that does not build here (the directory is then removed)."""
    run_ids = [run_ids] if isinstance(run_ids, str) else list(dict.fromkeys(run_ids))
    for run_id in run_ids:
        try:
            store.run(run_id)
        except KeyError:
            raise PackError(f"no run {run_id!r} in {store.path}") from None
    out_dir = Path(out_dir)
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise PackError(f"{out_dir}: exists and is not an empty directory; choose a new one")
    picks, left_out = _picks(store, run_ids, min_speedup)
    env = _environment(picks)
    kernels = out_dir / KERNELS
    kernels.mkdir(parents=True)
    entries = [_entry(store, p, kernels) for p in picks]
    extensions = _compile(out_dir, entries, str(env["device"])) if compile_kernels else []
    manifest = PackManifest(**env, run_id=run_ids[0], runs=run_ids, created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                            entries=entries, left_out=left_out, extensions=extensions)
    manifest.write(out_dir)
    runtime = out_dir / RUNTIME
    runtime.mkdir()
    for name in RUNTIME_FILES:
        shutil.copyfile(Path(__file__).parent / name, runtime / name)
    (runtime / "__init__.py").write_text(RUNTIME_INIT)
    (out_dir / "README.txt").write_text(README.format(count=len(entries), from_runs=_runs(run_ids), **manifest.to_dict()))
    return manifest
