"""Running a bench. One invocation takes every arm as far as it can, one after another, on one judge pool: each arm is
an `optimize` run in a workspace of its own under `arms/` (its own verdicts, model replies and skill library: no arm
reuses another's verdicts; builds are shared through the bench's build cache). Then it times the baselines every task
lacks on this device (eager at the judge's strict settings and at PyTorch's defaults, torch.compile), once.

With batch replies every arm asks through its own lane of the bench's one batch directory (custom_id `ARM/KEY`), and
after the last arm the directory's held requests are written as one round, `round-NNNN.requests.jsonl`: one request
file per round across all arms. Replies dropped in that directory (OpenAI batch output format) reach each arm's run
by custom_id on the next invocation, which resumes every arm where it stopped."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..judge import Executor, check_device, open_executor
from ..llm import Spend, make_client
from ..llm.backends.batch import Batch, BatchLane
from ..search import RUN_KIND, OptimizeConfig, Optimizer, SearchEvent
from ..store import SUMMARY_BASELINES, Store, baselines_job, record_baselines
from ..tasks import Task
from .arms import Arm
from .spec import (ARMS_DIR, SPEC_FILE, BenchError, BenchSpec, BenchState, load_spec, load_state, save_spec,
                   save_state)

LLM_CACHE = "llm-cache"
# What a caller watches an arm with: given the arm, its tasks, those finished and the model's spend so far, the
# function its search events go to.
Watch = Callable[[Arm, int, int, Spend], Callable[[SearchEvent], None]]


@dataclass(frozen=True)
class ArmRun:
    """One arm in this invocation."""

    arm: str
    run_id: str
    finished: bool
    stopped: str | None  # why its run stopped before finishing (None: finished)
    wall_s: float  # in this invocation


@dataclass(frozen=True)
class BenchRun:
    """One invocation of a bench."""

    arms: list[ArmRun]
    waiting: str | None  # the batch directory's line: which requests wait for replies, in which round files
    device_name: str

    @property
    def stopped(self) -> str | None:
        """Why the bench has not finished (None: every arm's run finished): the batch directory's line, then each
        unfinished arm's own reason."""
        if all(a.finished for a in self.arms):
            return None
        return "; ".join([*([self.waiting] if self.waiting else []),
                          *(f"{a.arm}: {a.stopped or 'unfinished'}" for a in self.arms if not a.finished)])


def start_bench(workspace: Path, spec: BenchSpec) -> BenchSpec:
    """Save a new bench in `workspace`, or find the same one there (re-running a command resumes it). BenchError for a
    workspace holding another bench, or runs of its own (a bench needs a directory of its own)."""
    if (workspace / SPEC_FILE).is_file():
        saved = load_spec(workspace)
        differs = saved.differs(spec)
        if differs is not None:
            raise BenchError(f"{workspace} holds another bench (its {differs} differs): give a new -w, or resume it "
                             f"with kernelcraft bench --resume -w {workspace}")
        return saved
    if (workspace / "kernelcraft.db").is_file():
        with Store(workspace) as store:
            if store.runs():
                raise BenchError(f"{workspace} is a workspace with runs of its own: give the bench a new directory")
    workspace.mkdir(parents=True, exist_ok=True)
    save_spec(workspace, spec)
    return spec


def restart_arm(workspace: Path, name: str) -> None:
    """Start arm `name` of the bench in `workspace` over: its workspace (run, verdicts, reply cache, skill library) and
    its wall time go; its batch lane's replies stay, so the requests it asks again are answered as before. For an arm
    whose strategy was fixed while the bench ran. BenchError for a name that is no arm of the bench."""
    spec = load_spec(workspace)
    names = [arm.name for arm in spec.arms]
    if name not in names:
        raise BenchError(f"--restart-arm {name!r}: the bench's arms are {', '.join(names)}")
    shutil.rmtree(workspace / ARMS_DIR / name, ignore_errors=True)
    state = load_state(workspace)
    state.arm_wall_s.pop(name, None)
    state.restarted_arms.append(name)
    save_state(workspace, state)


def run_bench(workspace: Path, *, baselines: bool = True, gpus: str | None = None, ray: str | None = None,
              watch: Watch = lambda arm, total, done, spend: lambda e: None,
              say: Callable[[str], None] = lambda line: None) -> BenchRun:
    """One invocation of the bench saved in `workspace` (`start_bench`): every arm as far as it can go, then, with
    batch replies, this round's request file, then the missing baselines (`baselines`; last, so that an invocation cut
    short while timing them has lost nothing). `watch` gets each arm's progress, `say` a line at each step."""
    spec = load_spec(workspace)
    state = load_state(workspace)
    tasks = spec.task_list()
    check_device(spec.base.device)
    llm = spec.llm(workspace)
    batch = Batch(Path(llm.path or workspace / "batch")) if llm.provider == "batch" else None  # the arms' one directory
    with Store(workspace) as store, open_executor(spec.base.device, cache_dir=store.cache_dir, config=spec.base.judge,
                                                  gpus=gpus, ray=ray, workers=spec.base.workers) as pool:
        device = pool.description.name
        if state.device_name and state.device_name != device:
            raise BenchError(f"this bench's verdicts were measured on {state.device_name}, and this machine's device is "
                             f"{device}: resume it on a {state.device_name} (speedups on two devices are never put together)")
        state = state.model_copy(update={"device_name": device, "invocations": state.invocations + 1})
        save_state(workspace, state)
        found = batch.survey().summary() if batch is not None and state.invocations > 1 else None
        if found is not None:
            say(f"resuming: {found}")
        runs = []
        for arm in spec.arms:
            run, wall = _run_arm(workspace, spec, arm, tasks, pool, store.cache_dir, batch, watch, say)
            state.arm_wall_s[arm.name] = state.arm_wall_s.get(arm.name, 0.0) + wall
            save_state(workspace, state)
            runs.append(run)
        waiting = batch.flush() if batch is not None else None
        if baselines:
            _time_baselines(store, pool, tasks, state, say)
            save_state(workspace, state)
    return BenchRun(runs, waiting, device)


def _run_arm(workspace: Path, spec: BenchSpec, arm: Arm, tasks: list[Task], pool: Executor, cache_dir: Path,
             batch: Batch | None, watch: Watch, say: Callable[[str], None]) -> tuple[ArmRun, float]:
    """The arm's run, started or continued, as far as it goes in this invocation; its time."""
    path = workspace / ARMS_DIR / arm.name
    with Store(path) as store:
        earlier = store.runs(RUN_KIND)
        if earlier and earlier[0].finished_at is not None:
            return ArmRun(arm.name, earlier[0].id, True, None, 0.0), 0.0
        # A started run keeps the settings it recorded (its skill snapshot among them).
        config = OptimizeConfig.model_validate(earlier[0].args) if earlier else spec.arm_config(arm)
        client = make_client(spec.llm(workspace), cache_dir=path / LLM_CACHE,
                             backend=BatchLane(batch, arm.name) if batch is not None else None)
        client.check()
        optimizer = Optimizer(config, store, client, pool, pool.description, cache_dir=cache_dir)
        run_id = earlier[0].id if earlier else optimizer.start(tasks)
        done = sum(1 for r in store.run_tasks(run_id) if r.finished_at is not None)
        say(f"arm {arm.name}: run {run_id}, {optimizer.config.search.describe()}, {done} of {len(tasks)} tasks done")
        optimizer.emit = watch(arm, len(tasks), done, client.spend)
        started = time.monotonic()
        result = optimizer.run(run_id, tasks)
        wall = time.monotonic() - started
    return ArmRun(arm.name, run_id, result.stopped is None, result.stopped, wall), wall


def _time_baselines(store: Store, pool: Executor, tasks: list[Task], state: BenchState, say: Callable[[str], None]) -> None:
    """The summary's baselines of every task that lacks one on this device and has not failed to get it, each recorded
    as it comes (an interrupted bench keeps those timed); a warning (torch.compile failed) is kept as the task's note."""
    todo = [t for t in tasks if t.key not in state.baseline_notes
            and not set(SUMMARY_BASELINES) <= set(store.baselines(t.key, state.device_name))]
    if not todo:
        return
    say(f"timing the baselines of {len(todo)} tasks (eager strict and at PyTorch's defaults, torch.compile)")
    for task, future in [(t, pool.submit(baselines_job(t))) for t in todo]:
        warnings: list[str] = []
        record_baselines(store, pool.device, future.result(), warn=warnings.append)
        if warnings:
            state.baseline_notes[task.key] = "; ".join(warnings)


__all__ = ["ArmRun", "BenchRun", "Watch", "restart_arm", "run_bench", "start_bench"]
