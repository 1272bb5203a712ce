"""The `kernelcraft` command: parse, call, print. Logic lives in the packages."""

from __future__ import annotations

import ast
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from ..judge import (DeviceUnavailable, Job, Judge, JudgeConfig, LocalPool, TaskRunError, Verdict, baseline_kind, check_device,
                     describe_device, device_indices)
from ..judge.sandbox import kill_all_workers
from ..llm import EndpointError, LLMConfig, Price, Spend, make_client
from ..report import (RunReport, Summary, TaskOutcome, baseline_label, load_run, not_judged_text, roofline_table, status_text,
                     summarize_by_level, summary_table, verdict_lines, verdict_table, write_report)
from ..search import (RUN_KIND, BranchOptions, ContrastiveOptions, EvolveOptions, OptimizeConfig, Optimizer, RunResult, SearchConfig,
                      SearchEvent, SkillOptions, TemplateOptions, unsuited)
from ..skills import SkillError, SkillFileError
from ..store import Store, StoreError
from ..tasks import (Task, TaskError, find_solution, hgemm_tasks, is_hgemm_target, load_suite, matmul_shapes, module_constants,
                     parse_shapes, resolve_task, task_from_module)

app = typer.Typer(add_completion=False, no_args_is_help=True, help="LLM-written kernels for PyTorch, with a judge that proves every speedup.")
tasks_app = typer.Typer(no_args_is_help=True, help="List, show and vet tasks.")
app.add_typer(tasks_app, name="tasks")
# Wide enough that task keys and messages are not cut when output goes to a file or a pipe.
out = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True)


class UsageError(Exception):
    """A mistake in what the user asked for; printed as one line."""


WorkspaceOpt = typer.Option(Path(os.environ.get("KERNELCRAFT_WORKSPACE", "kernelcraft-workspace")), "--workspace", "-w",
                            help="Workspace directory (database, build cache, artifacts).")
DeviceOpt = typer.Option("cuda", "--device", "-d", help="cuda or cpu.")
JsonOpt = typer.Option(False, "--json", help="Print JSON for machines.")
GpusOpt = typer.Option(1, "--gpus", help="Spread the evaluations over this machine's first N GPUs (--workers each).")
SetOpt = typer.Option([], "--set", help="Override a task's module-level size constant, e.g. --set batch_size=16 (repeatable).")
ConfigOpt = typer.Option(None, "--config", help="Judge options from a TOML file (keys of JudgeConfig).")
SeedsOpt = typer.Option(None, "--seeds", min=1, help="Correctness seeds (default 5).")
AtolOpt = typer.Option(None, "--atol", help="Absolute tolerance (default per dtype: fp32 1e-4, fp16/bf16 1e-2).")
RtolOpt = typer.Option(None, "--rtol", help="Relative tolerance (default per dtype).")
SampleOpt = typer.Option(None, "--sample", help="hgemm: a stratified sample of N grid shapes (1 to 1000).")
ShapesOpt = typer.Option(None, "--shapes", help="hgemm: these shapes, MxNxK,... (A is MxK, B is KxN, C is MxN).")
FromModelOpt = typer.Option(None, "--from-model", help="hgemm: the matmul shapes of one forward pass of path.py:Class "
                                                       "(with --inputs).")
InputsOpt = typer.Option(None, "--inputs", help="path.py:fn making example forward inputs (module targets, --from-model).")
InitInputsOpt = typer.Option(None, "--init-inputs", help="path.py:fn making constructor arguments.")
BaselinesOpt = typer.Option(True, "--baselines/--no-baselines", envvar="KERNELCRAFT_BASELINES",
                            help="Time the baselines the summary compares with (eager strict and at PyTorch's defaults, "
                                 "torch.compile) once for each correct task that has none on its device (torch.compile "
                                 "takes seconds to minutes a task; KERNELCRAFT_BASELINES=0 skips it too).")


def _parse_sets(items: list[str]) -> dict[str, Any]:
    sizes: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise UsageError(f"--set {item!r}: expected NAME=VALUE")
        try:
            sizes[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            raise UsageError(f"--set {item!r}: {value!r} is not a Python literal") from None
    return sizes


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text") from None


def _candidate_source(path: Path) -> str:
    """A candidate file's source."""
    if not path.is_file():
        raise UsageError(f"{path}: no such candidate file")
    return _text(path)


def _config(path: Optional[Path], seeds: Optional[int], atol: Optional[float], rtol: Optional[float]) -> JudgeConfig:
    data: dict[str, Any] = {}
    if path is not None:
        if not path.is_file():
            raise UsageError(f"{path}: no such config file")
        if sys.version_info >= (3, 11):
            import tomllib
        else:
            import tomli as tomllib
        try:
            data = tomllib.loads(_text(path))
        except tomllib.TOMLDecodeError as e:
            raise UsageError(f"{path}: {e}") from None
    for key, value in (("seeds", seeds), ("atol", atol), ("rtol", rtol)):
        if value is not None:
            data[key] = value
    try:
        return JudgeConfig().with_overrides(data)
    except (TypeError, ValueError) as e:
        raise UsageError(f"judge config: {e}") from None


def _task(spec: str, device: str, sets: list[str]) -> Task:
    task, sizes = resolve_task(spec), _parse_sets(sets)
    constants = module_constants(task.source)
    unknown = sorted(set(sizes) - constants)
    if unknown:
        raise UsageError(f"--set {unknown[0]}: not a module-level constant of {task.key} "
                         f"(its constants: {', '.join(sorted(constants)) or 'none'})")
    return task.with_sizes(device, sizes)


def _shape_selection(target: str, sets: list[str], sample: Optional[int], shapes: Optional[str], from_model: Optional[str],
                     inputs: Optional[str], init_inputs: Optional[str]) -> dict[str, Any]:
    """The hgemm options checked against the target, as OptimizeConfig's fields sample, shapes and
    from_model; a --from-model capture is kept as its list of shapes."""
    given = [flag for flag, v in (("--sample", sample), ("--shapes", shapes), ("--from-model", from_model)) if v is not None]
    if given and not is_hgemm_target(target):
        raise UsageError(f"{given[0]} chooses shapes of the hgemm suite only, not of the target {target!r}")
    if len(given) > 1:
        raise UsageError(f"give at most one of --sample, --shapes and --from-model, not {' and '.join(given)}")
    if from_model is not None and inputs is None:
        raise UsageError("--from-model needs --inputs PATH.py:FN (a function making example forward inputs)")
    if is_hgemm_target(target) and from_model is None and (inputs is not None or init_inputs is not None):
        raise UsageError("--inputs and --init-inputs go with --from-model for the hgemm suite")
    if is_hgemm_target(target) and sets:
        raise UsageError("--set does not apply to hgemm: each task is one shape; choose shapes with --shapes")
    listed = (parse_shapes(shapes) if shapes is not None
              else matmul_shapes(from_model, inputs, init_inputs) if from_model is not None else None)
    return {"sample": sample, "shapes": None if listed is None else [str(s) for s in listed], "from_model": from_model}


def _suite_tasks(target: str, sample: Optional[int], shapes: Optional[list[str]]) -> list[Task]:
    """The tasks of a suite target: the hgemm suite's selected shapes, or whatever load_suite finds."""
    if is_hgemm_target(target):
        return hgemm_tasks(sample=sample, shapes=None if shapes is None else parse_shapes(",".join(shapes)))
    return load_suite(target)


def _suite(path: str, device: str, sets: list[str], sample: Optional[int] = None, shapes: Optional[str] = None,
           from_model: Optional[str] = None, inputs: Optional[str] = None, init_inputs: Optional[str] = None) -> list[Task]:
    if from_model is None and (inputs is not None or init_inputs is not None):
        raise UsageError("--inputs and --init-inputs go with --from-model here")
    selection = _shape_selection(path, sets, sample, shapes, from_model, inputs, init_inputs)
    sizes = _parse_sets(sets)
    return [t.with_sizes(device, sizes) for t in _suite_tasks(path, selection["sample"], selection["shapes"])]


def _print_verdict(v: Verdict) -> None:
    out.print(verdict_table(v))
    if v.roofline is not None:
        out.print(roofline_table(v.roofline))
    for line in verdict_lines(v):
        out.print(line, highlight=False)


# -- tasks --------------------------------------------------------------------------------
@tasks_app.command("list")
def tasks_list(path: str = typer.Argument(..., help="A task file, a directory, a KernelBench tree, 'examples' or 'hgemm'."),
               sample: Optional[int] = SampleOpt, shapes: Optional[str] = ShapesOpt, from_model: Optional[str] = FromModelOpt,
               inputs: Optional[str] = InputsOpt, init_inputs: Optional[str] = InitInputsOpt, as_json: bool = JsonOpt) -> None:
    """List the tasks of a suite."""
    tasks = _suite(path, "cpu", [], sample, shapes, from_model, inputs, init_inputs)
    if as_json:
        print(json.dumps([t.to_dict() for t in tasks], indent=1))
        return
    table = Table(title=f"{len(tasks)} tasks", title_justify="left")
    for col in ("key", "level", "id", "name", "dtype", "tags"):
        table.add_column(col, overflow="fold")
    for t in tasks:
        table.add_row(t.key, str(t.level or ""), str(t.problem_id or ""), t.name, t.meta.dtype, ",".join(t.meta.tags))
    out.print(table)


@tasks_app.command("show")
def tasks_show(task: str = typer.Argument(..., help="A task file or a bundled example name."), as_json: bool = JsonOpt) -> None:
    """Show a task's metadata and source."""
    t = resolve_task(task)
    if as_json:
        print(json.dumps({**t.to_dict(), "source": t.source}, indent=1))
        return
    out.print(f"[bold]{t.key}[/bold]  level={t.level} id={t.problem_id} dtype={t.meta.dtype} tags={','.join(t.meta.tags)}")
    if t.meta.description:
        out.print(t.meta.description)
    if t.meta.sizes:
        out.print(f"sizes: {t.meta.sizes}")
    out.print(t.source, highlight=False, markup=False)


@tasks_app.command("vet")
def tasks_vet(path: str = typer.Argument(..., help="A task file, a directory, a KernelBench tree, 'examples' or 'hgemm'."),
              device: str = DeviceOpt, workspace: Path = WorkspaceOpt, sets: list[str] = SetOpt,
              sample: Optional[int] = SampleOpt, shapes: Optional[str] = ShapesOpt, from_model: Optional[str] = FromModelOpt,
              inputs: Optional[str] = InputsOpt, init_inputs: Optional[str] = InitInputsOpt,
              seeds: int = typer.Option(3, "--seeds", min=1, help="Seeds per input distribution."),
              baseline: bool = typer.Option(True, "--baseline/--no-baseline", help="Also record eager (strict and at PyTorch's "
                                                                                     "defaults) and torch.compile times."),
              as_json: bool = JsonOpt) -> None:
    """Flag degenerate tasks (constant, zero or input-independent outputs, nondeterminism, failures)
    and record eager (strict and at PyTorch's defaults) and torch.compile baseline times in the store."""
    tasks = _suite(path, device, sets, sample, shapes, from_model, inputs, init_inputs)
    results = []
    with Store(workspace) as store:
        judge = Judge(device, cache_dir=store.cache_dir)
        for t in _progress(tasks, "vetting"):
            try:
                rep = judge.vet(t, seeds=seeds)
            except TaskRunError as e:
                rep = {"degenerate": True, "findings": [{"code": "reference_error", "distribution": "task", "message": str(e)}]}
            store.put_task(t)
            store.record_vetting(t.key, device, rep["degenerate"], rep["findings"])
            row = {"task": t.key, "degenerate": rep["degenerate"], "findings": rep["findings"]}
            if baseline and not any(f["code"] == "reference_error" for f in rep["findings"]):
                row["baseline_ms"] = _record_baselines(judge, store, t, rep.get("env", {}))
            results.append(row)
    if as_json:
        print(json.dumps(results, indent=1))
        return
    table = Table(title="task vetting", title_justify="left")
    for col in ("task", "verdict", "findings", *(f"{baseline_label(k)} ms" for k in _SUMMARY_BASELINES)):
        table.add_column(col)
    for r in results:
        findings = "; ".join(f"{f['code']} ({f['distribution']}): {f['message']}" for f in r["findings"]) or "-"
        b = r.get("baseline_ms") or {}
        table.add_row(r["task"], status_text("DEGENERATE" if r["degenerate"] else "ok"), findings,
                      *(f"{b[k]:.4g}" if k in b else "-" for k in _SUMMARY_BASELINES))
    out.print(table)


# The baselines summaries compare with: every verdict's own reference (eager, strict) and what users run (eager and
# torch.compile at PyTorch's defaults).
_SUMMARY_BASELINES = tuple(baseline_kind(side) for side in ("reference", "reference_default", "compiled"))


def _record_baselines(judge: Judge, store: Store, t: Task, env: dict[str, Any], compiled: bool = True,
                      tunableop: bool = False, scenarios: tuple[str, ...] = ("offline",)) -> dict[str, float]:
    """Time the task's baselines in each scenario and record them; their medians by store kind."""
    found: dict[str, float] = {}
    for scenario in scenarios:
        try:
            stats = judge.baseline(t, compiled=compiled, tunableop=tunableop, scenario=scenario)
        except TaskRunError as e:
            print(f"warning: {t.key}: baseline failed: {e}", file=sys.stderr)
            if not compiled:
                continue
            stats = judge.baseline(t, compiled=False, tunableop=tunableop, scenario=scenario)
        for side, s in stats.items():
            kind = baseline_kind(side, scenario)
            store.record_baseline(t.key, judge.device, str(env.get("device_name", "")), kind, s, str(env.get("torch", "")))
            found[kind] = s.median_ms
    return found


def _fill_baselines(store: Store, device: str, config: JudgeConfig, judged: list[tuple[Task, Verdict]]) -> None:
    """Record the summary's baselines for each correct task that lacks one on its verdict's device: once, as later
    runs find them. A task whose baselines cannot be timed is a warning; its summary rows leave it out."""
    todo = [(t, v.env) for t, v in judged
            if v.correct and not set(_SUMMARY_BASELINES) <= set(store.baselines(t.key, str(v.env.get("device_name", ""))))]
    if not todo:
        return
    judge = Judge(device, cache_dir=store.cache_dir, config=config)
    try:
        for t, env in _progress(todo, "timing baselines"):
            try:
                _record_baselines(judge, store, t, env)
            except TaskRunError as e:
                print(f"warning: {t.key}: baselines not recorded: {e}", file=sys.stderr)
    finally:
        judge.close()


@app.command("baseline")
def baseline_cmd(suite: str = typer.Argument(..., help="A task file, a directory, a KernelBench tree, 'examples' or 'hgemm'."),
                 device: str = DeviceOpt, workspace: Path = WorkspaceOpt, sets: list[str] = SetOpt,
                 sample: Optional[int] = SampleOpt, shapes: Optional[str] = ShapesOpt, from_model: Optional[str] = FromModelOpt,
                 inputs: Optional[str] = InputsOpt, init_inputs: Optional[str] = InitInputsOpt,
                 compiled: bool = typer.Option(True, "--compile/--no-compile", help="Also time torch.compile (at PyTorch's "
                                                                                     "defaults)."),
                 tunableop: bool = typer.Option(False, "--tunableop", help="Also time PyTorch's TunableOp (cuBLAS/cuBLASLt "
                                                                            "autotuned per shape; CUDA only)."),
                 scenario: str = typer.Option("offline", "--scenario", help="offline (back to back), server (random "
                                                                            "pauses between calls), or both.")) -> None:
    """Record the reference's baseline times on this device: eager (strict, and at PyTorch's defaults), torch.compile
    (at PyTorch's defaults), TunableOp."""
    if scenario not in ("offline", "server", "both"):
        raise UsageError(f"--scenario {scenario!r}: use offline, server or both")
    if tunableop and device != "cuda":
        raise UsageError("--tunableop needs --device cuda")
    scenarios = ("offline", "server") if scenario == "both" else (scenario,)
    tasks = _suite(suite, device, sets, sample, shapes, from_model, inputs, init_inputs)
    kinds = [baseline_kind(side, sc) for sc in scenarios for side in ("reference", "reference_default", "compiled", "tunableop")
             if (side != "compiled" or compiled) and (side != "tunableop" or tunableop)]
    table = Table(title="baselines (ms, median)", title_justify="left",
                  caption="strict: TF32 off everywhere (the judge's reference); PyTorch defaults: what users run",
                  caption_justify="left")
    table.add_column("task")
    for kind in kinds:
        table.add_column(baseline_label(kind), justify="right")
    with Store(workspace) as store:
        judge = Judge(device, cache_dir=store.cache_dir)
        for t in _progress(tasks, "timing baselines"):
            store.put_task(t)
            env = judge.reference(t).env
            b = _record_baselines(judge, store, t, env, compiled, tunableop, scenarios)
            table.add_row(t.key, *(f"{b[k]:.4g}" if k in b else "-" for k in kinds))
    out.print(table)


def _progress(items: list[Any], what: str) -> Any:
    with Progress(TextColumn(f"{what}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                  transient=True) as bar:
        for item in bar.track(items):
            yield item


# -- eval ---------------------------------------------------------------------------------
@app.command("eval")
def eval_cmd(task: str = typer.Argument(..., help="A task file or a bundled example name."),
             candidate: Path = typer.Argument(..., help="The candidate's Python file (defines ModelNew)."),
             device: str = DeviceOpt, workspace: Path = WorkspaceOpt, as_json: bool = JsonOpt, sets: list[str] = SetOpt,
             config: Optional[Path] = ConfigOpt, seeds: Optional[int] = SeedsOpt, atol: Optional[float] = AtolOpt,
             rtol: Optional[float] = RtolOpt) -> None:
    """Evaluate one candidate against one task: one verdict. Exit 0 if correct, 1 otherwise."""
    t = _task(task, device, sets)
    source = _candidate_source(candidate)
    cfg = _config(config, seeds, atol, rtol)
    with Store(workspace) as store:
        judge = Judge(device, cache_dir=store.cache_dir, config=cfg)
        v = judge.evaluate(t, source)
        vid = store.record_verdict(t, source, v, origin=str(candidate))
    if as_json:
        print(json.dumps({"verdict_id": vid, **v.to_dict()}, indent=1))
    else:
        _print_verdict(v)
        out.print(f"verdict {vid} recorded in {store.path}", highlight=False)
    raise typer.Exit(0 if v.correct else 1)


@app.command("eval-suite")
def eval_suite_cmd(suite: str = typer.Argument(..., help="A task directory, a KernelBench tree, 'examples' or 'hgemm'."),
                   solutions: Path = typer.Argument(..., help="Directory of solutions named by problem (hgemm: MxNxK.py)."),
                   device: str = DeviceOpt, workspace: Path = WorkspaceOpt, as_json: bool = JsonOpt,
                   sample: Optional[int] = SampleOpt, shapes: Optional[str] = ShapesOpt, from_model: Optional[str] = FromModelOpt,
                   inputs: Optional[str] = InputsOpt, init_inputs: Optional[str] = InitInputsOpt,
                   workers: Optional[int] = typer.Option(None, "--workers", min=1, help="Concurrent evaluations (default: half the cores, at most 8)."),
                   sets: list[str] = SetOpt, config: Optional[Path] = ConfigOpt, seeds: Optional[int] = SeedsOpt,
                   atol: Optional[float] = AtolOpt, rtol: Optional[float] = RtolOpt, baselines: bool = BaselinesOpt,
                   gpus: int = GpusOpt) -> None:
    """KernelBench-style batch evaluation: per level, correct count, fast_p, geomean and median speedup, win rate, against
    eager (strict) and each baseline users compare with, each speedup counted as the judge counts it (README: Library
    calls and coverage); tasks the judge failed on (judge_error) reported apart."""
    if not solutions.is_dir():
        raise UsageError(f"{solutions}: no such solutions directory")
    tasks = _suite(suite, device, sets, sample, shapes, from_model, inputs, init_inputs)
    cfg = _config(config, seeds, atol, rtol)
    jobs, missing = [], []
    indices = device_indices(device, gpus)
    for t in tasks:
        p = find_solution(t, solutions)
        if p is None:
            missing.append(t)
        else:
            jobs.append(Job(t, _text(p), tag=str(p)))
    if not jobs:
        example = f", e.g. {tasks[0].key}.py" if tasks else ""
        raise UsageError(f"{solutions}: no solution for any of the {len(tasks)} tasks (named by problem{example})")
    rows: list[dict[str, Any]] = [{"task": t.key, "level": t.level, "status": "missing"} for t in missing]
    outcomes = [TaskOutcome(t.key, t.level, False) for t in missing]
    judged: list[tuple[Task, Verdict]] = []
    with Store(workspace) as store:
        run_id = store.start_run("eval-suite", {"suite": suite, "solutions": str(solutions), "device": device})
        with LocalPool(device, cache_dir=store.cache_dir, config=cfg, workers=workers,
                       device_indices=indices) as pool, \
                Progress(TextColumn("evaluating"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                         TimeElapsedColumn(), console=err, transient=True) as bar:
            progress = bar.add_task("eval", total=len(jobs), info="")
            correct = 0
            for r in pool.map(jobs):
                t = r.job.task
                if r.verdict is None:
                    rows.append({"task": t.key, "level": t.level, "status": "task_error", "message": r.error})
                    outcomes.append(TaskOutcome(t.key, t.level, False))
                else:
                    v = r.verdict
                    vid = store.record_verdict(t, r.job.source, v, run_id=run_id, origin=r.job.tag)
                    judged.append((t, v))
                    correct += v.correct
                    rows.append({"task": t.key, "level": t.level, "status": v.status.value, "speedup": v.speedup,
                                 "effective_speedup": v.effective_speedup, "flags": [f.code for f in v.flags],
                                 "message": v.message, "verdict_id": vid})
                bar.update(progress, advance=1, info=f"{correct} correct")
        store.finish_run(run_id)
        if baselines:  # after the pool: nothing else runs while they are timed
            _fill_baselines(store, device, cfg, judged)
        outcomes += [TaskOutcome.of_verdict(t.key, t.level, v, store.baselines(t.key, str(v.env.get("device_name", ""))))
                     for t, v in judged]
    summaries = summarize_by_level(outcomes)
    if as_json:
        print(json.dumps({"run_id": run_id, "results": rows, "summary": [s.to_dict() for s in summaries]}, indent=1, default=str))
        return
    table = Table(title=f"run {run_id}", title_justify="left")
    for col in ("task", "status", "speedup", "flags", "message"):
        table.add_column(col)
    for r in sorted(rows, key=lambda r: r["task"]):
        sp = f"{r['speedup']:.2f}x" if r.get("speedup") else "-"
        if r.get("speedup") and r["effective_speedup"] != r["speedup"]:
            sp += f" (counted {r['effective_speedup']:.2f}x)"
        table.add_row(r["task"], status_text(r["status"]), sp, ",".join(r.get("flags", [])), (r.get("message") or "")[:90])
    out.print(table)
    out.print(summary_table(summaries))


# -- optimize and report ----------------------------------------------------------------------
def _default(model: type[BaseModel], field: str) -> Any:
    """A flag's default is its configuration model's: one source of truth."""
    return model.model_fields[field].default


def _parse_prices(items: list[str]) -> dict[str, Price]:
    prices = {}
    for item in items:
        name, sep, values = item.partition("=")
        parts = values.split(",")
        try:
            if not sep or not name or len(parts) != 2:
                raise ValueError
            prices[name] = Price(input=float(parts[0]), output=float(parts[1]))
        except ValueError:
            raise UsageError(f"--price {item!r}: expected MODEL=INPUT,OUTPUT in dollars per million tokens") from None
    return prices


def _parse_max_tokens(items: list[str]) -> dict[str, Any]:
    """LLMConfig values from `--max-tokens`: N for the run's model, MODEL=N (globs) for a model by name."""
    values: dict[str, Any] = {}
    for item in items:
        name, sep, number = item.rpartition("=")
        try:
            n = int(number)
            if n < 1 or (sep and not name):
                raise ValueError
        except ValueError:
            raise UsageError(f"--max-tokens {item!r}: expected N or MODEL=N, a positive number of tokens") from None
        if sep:
            values.setdefault("max_tokens_per_model", {})[name] = n
        else:
            values["max_tokens"] = n
    return values


def _endpoint_options(base_url: Optional[str], api_key_env: Optional[str], prices: list[str]) -> dict[str, Any]:
    """LLMConfig values from the endpoint flags; flags not given keep the model's defaults."""
    llm: dict[str, Any] = {"prices": _parse_prices(prices)}
    if base_url is not None:
        llm["base_url"] = base_url
    if api_key_env is not None:
        llm["api_key_env"] = api_key_env
    return llm


def _optimize_tasks(config: OptimizeConfig) -> list[Task]:
    """The tasks of a target: the hgemm suite, a user's module (path.py:Class with --inputs), a task file or suite,
    or a bundled example."""
    if is_hgemm_target(config.target):
        tasks = _suite_tasks(config.target, config.sample, config.shapes)
    elif config.inputs is not None:
        tasks = [task_from_module(config.target, config.inputs, config.init_inputs)]
    elif ":" in config.target and config.target.rpartition(":")[0].endswith(".py"):
        raise UsageError(f"{config.target}: a module target needs --inputs PATH.py:FN (a function making example inputs)")
    elif Path(config.target).exists() or config.target == "examples":
        tasks = _suite_tasks(config.target, None, None)
    else:
        tasks = [resolve_task(config.target)]  # a bundled example by name
    sizes = _parse_sets(config.sets)
    return [t.with_sizes(config.device, sizes) for t in tasks]


def _new_optimize_config(target: Optional[str], model: Optional[str], values: dict[str, Any], llm: dict[str, Any],
                         search: dict[str, Any]) -> OptimizeConfig:
    if target is None:
        raise UsageError("give a TARGET (task file, suite directory or path/model.py:Class), or --resume RUN")
    try:
        search_config = SearchConfig(**search)
        if model is None and search_config.needs_model:
            hint = "" if search_config.skills.enabled else " (--strategy template without --skills on needs none)"
            raise UsageError(f"--model is required: NAME (OpenAI-compatible), anthropic:NAME, replay:FILE or batch:DIR[:NAME]{hint}")
        llm_config = LLMConfig.from_spec(model, **llm) if model is not None else LLMConfig.no_model(**llm)
        return OptimizeConfig(target=target, llm=llm_config, search=search_config, **values)
    except ValueError as e:  # pydantic's ValidationError: say which option, in one line
        first = e.errors()[0] if hasattr(e, "errors") else {"loc": (), "msg": str(e)}
        message = str(first["msg"]).removeprefix("Value error, ")  # pydantic's prefix for a validator's own words
        where = ".".join(str(x) for x in first["loc"])
        raise UsageError(f"bad option {where}: {message}" if where else message) from None


def _resumed_config(store: Store, run_id: str, target: Optional[str], budget: dict[str, Any],
                    search_budget: dict[str, Any], out_dir: Optional[Path]) -> OptimizeConfig:
    if target is not None:
        raise UsageError("give either a TARGET or --resume RUN, not both (a resumed run keeps its own target)")
    try:
        run = store.run(run_id)
    except KeyError as e:
        raise UsageError(str(e.args[0])) from None
    if run.kind != RUN_KIND:
        raise UsageError(f"run {run_id} is a {run.kind} run, not an optimize run")
    config = OptimizeConfig.model_validate(run.args)
    # a larger budget is the usual reason to resume, a new --out another; every other setting stays the run's own
    return config.model_copy(update={
        "llm": config.llm.model_copy(update={k: v for k, v in budget.items() if v is not None}),
        "search": config.search.model_copy(update={k: v for k, v in search_budget.items() if v is not None}),
        **({"out": str(out_dir)} if out_dir is not None else {})})


class _ProgressView:
    """The live line of an optimize run: tasks done, attempts, best speedup, tokens and cost."""

    def __init__(self, bar: Progress, total: int, done: int, spend: Spend) -> None:
        self.bar, self.spend = bar, spend
        self.id = bar.add_task("optimizing", total=total, completed=done, info="")
        self.attempts, self.correct, self.best = 0, 0, None

    def __call__(self, e: SearchEvent) -> None:
        if e.kind == "attempt":
            self.attempts += 1
            self.correct += e.status == "correct"
            if e.speedup is not None and (self.best is None or e.speedup > self.best):
                self.best = e.speedup
        elif e.kind == "task_done":
            self.bar.advance(self.id)
            if e.message:
                err.print(f"warning: {e.task_key}: {e.message}", highlight=False)
        s = self.spend
        cost = f"${s.cost_usd:.2f}" + ("+?" if s.unpriced_calls else "")
        best = f"{self.best:.2f}x" if self.best is not None else "-"
        self.bar.update(self.id, info=f"{self.attempts} attempts, {self.correct} correct, best {best}, "
                                      f"{s.tokens:,} tokens, {cost}")


def _run_summaries(run: RunReport) -> list[Summary]:
    """An optimize run's summaries, per level, as its HTML report counts them."""
    return summarize_by_level([t.outcome() for t in run.tasks])


def _print_optimize(result: RunResult, report: Path, run: RunReport) -> None:
    table = Table(title=f"run {result.run_id}", title_justify="left")
    for col in ("task", "best", "attempts", "kernel"):
        table.add_column(col)
    not_judged = {t.key: t.not_judged for t in run.tasks}
    for t in result.tasks:
        if t.best is not None:
            best = Text(f"{t.best.speedup:.2f}x", style="green")
        elif not_judged.get(t.task.key):
            best = status_text("not judged") + Text(f" ({not_judged[t.task.key]})")
        else:
            best = status_text(t.error and "task error" or ("no correct candidate" if t.finished else "unfinished"))
        table.add_row(t.task.key, best, str(t.attempts), str(t.best_file or "-"))
    out.print(table)
    out.print(summary_table(_run_summaries(run)))
    if run.evaluations_not_judged:
        out.print(status_text(not_judged_text(run.evaluations_not_judged, "evaluations not judged")))
    s = result.spend
    cost = f"${s.cost_usd:.4f}" + (f" (+{s.unpriced_calls} calls without a price)" if s.unpriced_calls else "")
    out.print(f"{s.calls} model calls ({s.cached_calls} cached), {s.prompt_tokens:,} prompt + {s.completion_tokens:,} "
              f"completion tokens, {cost}", highlight=False)
    out.print(f"best kernels: {result.out_dir}\nreport: {report}", highlight=False)


# What `optimize --resume` may be given; every other setting is the run's own (a TARGET has its own message).
_RESUME_OPTIONS = {"target", "resume", "budget_tokens", "budget_usd", "budget_judge_calls", "budget_wall_s", "out_dir", "workspace",
                   "as_json", "baselines"}


@app.command("optimize")
def optimize_cmd(
    ctx: typer.Context,
    target: Optional[str] = typer.Argument(None, help="A task file, a suite directory or KernelBench tree, 'examples', "
                                                      "'hgemm', or your own module as path/model.py:ClassName (with --inputs)."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="NAME (OpenAI-compatible endpoint), anthropic:NAME, "
                                                                    "replay:FILE or batch:DIR[:NAME]."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="The endpoint, e.g. http://localhost:8000/v1."),
    api_key_env: Optional[str] = typer.Option(None, "--api-key-env", help="Variable holding the API key (default OPENAI_API_KEY)."),
    inputs: Optional[str] = InputsOpt, init_inputs: Optional[str] = InitInputsOpt,
    sample: Optional[int] = SampleOpt, shapes: Optional[str] = ShapesOpt, from_model: Optional[str] = FromModelOpt,
    strategy: str = typer.Option(_default(SearchConfig, "strategy"), "--strategy", help="Search strategy."),
    turns: int = typer.Option(_default(SearchConfig, "turns"), "--turns", help="Refinement turns per sample."),
    samples: int = typer.Option(_default(SearchConfig, "samples"), "--samples", help="Independent samples per task."),
    language: str = typer.Option(_default(SearchConfig, "language"), "--language", help="cuda (load_inline) or triton."),
    history_tokens: int = typer.Option(_default(SearchConfig, "history_tokens"), "--history-tokens", help="Longest conversation shown to the model "
                                                                       "(the task and the latest attempts that fit)."),
    width: int = typer.Option(_default(BranchOptions, "width"), "--width", help="branch: ideas per round."),
    impls: int = typer.Option(_default(BranchOptions, "impls"), "--impls", help="branch: implementations per idea."),
    bank: int = typer.Option(_default(BranchOptions, "bank"), "--bank", help="branch: best earlier kernels kept as seeds."),
    buckets: int = typer.Option(_default(ContrastiveOptions, "buckets"), "--buckets", help="contrastive: score buckets."),
    bucket_temperature: float = typer.Option(_default(ContrastiveOptions, "temperature"), "--bucket-temperature",
                                             help="contrastive: softmax temperature over bucket mean scores."),
    islands: int = typer.Option(_default(EvolveOptions, "islands"), "--islands", help="evolve: islands."),
    generations: int = typer.Option(_default(EvolveOptions, "generations"), "--generations", help="evolve: children per task."),
    migrate_every: int = typer.Option(_default(EvolveOptions, "migrate_every"), "--migrate-every",
                                      help="evolve: children between migrations."),
    crossover: float = typer.Option(_default(EvolveOptions, "crossover"), "--crossover", help="evolve: chance of a crossover."),
    parallel: int = typer.Option(_default(EvolveOptions, "parallel"), "--parallel", help="evolve: children in flight."),
    seed: int = typer.Option(_default(SearchConfig, "seed"), "--seed", help="Seed of the strategies' random choices."),
    start: str = typer.Option(_default(SearchConfig, "start"), "--start", help="refine, branch: scratch, or best (start from "
                                                                               "the best kernel the workspace has for the task)."),
    configs: int = typer.Option(_default(TemplateOptions, "configs"), "--configs", help="template: configurations judged "
                                                                                       "per task (coarse stage)."),
    finalists: int = typer.Option(_default(TemplateOptions, "finalists"), "--finalists", help="template: the fastest "
                                                                                             "configurations judged again in full."),
    profile: bool = typer.Option(_default(SearchConfig, "profile"), "--profile/--no-profile",
                                 help="After each correct verdict, profile the candidate's top kernels with Nsight Compute for "
                                      "the model's feedback (CUDA, where ncu runs; the roofline is given either way)."),
    skills: str = typer.Option("off", "--skills", help="on: show each task's samples skills the selector picked from "
                                                       "the library (a no-skill scheme is always tried too)."),
    skill_schemes: int = typer.Option(_default(SkillOptions, "schemes"), "--skill-schemes", help="Selector calls per task."),
    skill_k: int = typer.Option(_default(SkillOptions, "k"), "--skill-k", help="Skills the selector may pick per scheme."),
    learn: bool = typer.Option(_default(SkillOptions, "learn"), "--learn/--no-learn",
                               help="With --skills on: summarize improving trajectories into candidate skills and verify them."),
    budget_tokens: Optional[int] = typer.Option(None, "--budget-tokens", help="Stop the run after this many tokens."),
    budget_usd: Optional[float] = typer.Option(None, "--budget-usd", help="Stop the run after this many dollars."),
    budget_judge_calls: Optional[int] = typer.Option(None, "--budget-judge-calls", help="Stop the run after this many evaluations."),
    budget_wall_s: Optional[float] = typer.Option(None, "--budget-wall-s", help="Stop after this many seconds (of this invocation)."),
    prices: list[str] = typer.Option([], "--price", help="MODEL=IN,OUT dollars per million tokens (repeatable; globs)."),
    concurrency: int = typer.Option(_default(LLMConfig, "concurrency"), "--concurrency", help="Model calls in flight."),
    workers: Optional[int] = typer.Option(None, "--workers", min=1, help="Concurrent judge evaluations (default: half the cores, at most 8)."),
    temperature: float = typer.Option(_default(LLMConfig, "temperature"), "--temperature"),
    max_tokens: list[str] = typer.Option([], "--max-tokens", help="Longest reply: N, or MODEL=N per model (globs; "
                                                                  "repeatable). Default: the model's documented maximum, "
                                                                  "else 32768."),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Where to write the best kernels (default: the run's folder)."),
    resume: Optional[str] = typer.Option(None, "--resume", help="Continue a stopped run; finished work is not repeated."),
    device: str = DeviceOpt, workspace: Path = WorkspaceOpt, sets: list[str] = SetOpt, config_file: Optional[Path] = ConfigOpt,
    as_json: bool = JsonOpt, baselines: bool = BaselinesOpt,
) -> None:
    """Write faster kernels for every task of TARGET with a language model (or, with --strategy template, by searching
    Triton GEMM templates); every one is proved by the judge. Exit 0 when the run finished, 3 when it stopped early
    (budget, batch replies pending, evaluations the judge failed on its side): resume it with --resume."""
    if skills not in ("on", "off"):
        raise UsageError(f"--skills {skills!r}: use on or off")
    if out_dir is not None and out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out {out_dir}: a file, not a directory")
    with Store(workspace) as store:
        budget = {"budget_tokens": budget_tokens, "budget_usd": budget_usd}
        search_budget = {"budget_judge_calls": budget_judge_calls, "budget_wall_s": budget_wall_s}
        if resume is not None:
            # by the enum's name: typer ships its own copy of click
            given = [p.opts[0] for p in ctx.command.params if p.name not in _RESUME_OPTIONS
                     and getattr(ctx.get_parameter_source(p.name), "name", "") == "COMMANDLINE"]
            if given:
                raise UsageError(f"a resumed run keeps its own settings: drop {', '.join(given)} (it takes budgets and --out)")
            config = _resumed_config(store, resume, target, budget, search_budget, out_dir)
        else:
            llm = {**_endpoint_options(base_url, api_key_env, prices), "concurrency": concurrency, "temperature": temperature,
                   **_parse_max_tokens(max_tokens), **{k: v for k, v in budget.items() if v is not None}}
            selection = _shape_selection(target, sets, sample, shapes, from_model, inputs, init_inputs) if target else {}
            config = _new_optimize_config(
                target, model, {"inputs": inputs, "init_inputs": init_inputs, **selection, "sets": sets, "device": device,
                                "workers": workers, "out": str(out_dir) if out_dir else None,
                                "judge": _config(config_file, None, None, None).to_dict()},
                llm, {"strategy": strategy, "turns": turns, "samples": samples, "language": language, "profile": profile,
                      "history_tokens": history_tokens, "seed": seed, **{k: v for k, v in search_budget.items() if v is not None},
                      "branch": {"width": width, "impls": impls, "bank": bank},
                      "contrastive": {"buckets": buckets, "temperature": bucket_temperature},
                      "evolve": {"islands": islands, "generations": generations, "migrate_every": migrate_every,
                                 "crossover": crossover, "parallel": parallel},
                      "start": start, "template": {"configs": configs, "finalists": finalists},
                      "skills": {"enabled": skills == "on", "schemes": skill_schemes, "k": skill_k, "learn": learn}})
        tasks = _optimize_tasks(config)
        reason = unsuited(config.search.strategy, tasks)
        if reason is not None:
            raise UsageError(reason)
        check_device(config.device)
        client = make_client(config.llm, cache_dir=store.workspace / "llm-cache")
        client.check()  # an unreachable endpoint or a bad key fails here, before any task starts
        found = client.survey() if resume is not None else None
        if found is not None:  # what a resumed run finds first: replies matched, requests still pending and where
            err.print(f"resuming: {found}", highlight=False, soft_wrap=True)
        judge_config = JudgeConfig().with_overrides(config.judge)
        with LocalPool(config.device, cache_dir=store.cache_dir, config=judge_config, workers=config.workers) as pool:
            dev = describe_device(config.device)
            optimizer = Optimizer(config, store, client, pool, dev)
            run_id = resume or optimizer.start(tasks)
            kernels = "kernel metrics by ncu" if optimizer.profiler else f"no kernel metrics ({optimizer.no_profile})"
            err.print(f"run {run_id}: {len(tasks)} tasks, {optimizer.config.search.describe()}, {config.llm.model} on {dev.name}, "
                      f"{kernels}", highlight=False)
            done = sum(1 for r in store.run_tasks(run_id) if r.finished_at is not None)
            with Progress(TextColumn("optimizing"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                          TimeElapsedColumn(), console=err, transient=True) as bar:
                optimizer.emit = _ProgressView(bar, len(tasks), done, client.spend)
                result = optimizer.run(run_id, tasks)
        if baselines:  # after the pool: nothing else runs while they are timed
            _fill_baselines(store, config.device, judge_config, [(t.task, store.verdict(t.best.verdict_id)) for t in result.tasks
                                                                 if t.best is not None and t.best.verdict_id is not None])
        run = load_run(store, run_id)
        report = write_report(store, run_id, run=run)
    if as_json:
        print(json.dumps({"run_id": run_id, "stopped": result.stopped, "report": str(report), "tasks": [
            {"task": t.task.key, "speedup": t.best.speedup if t.best else None, "attempts": t.attempts,
             "finished": t.finished, "file": str(t.best_file) if t.best_file else None, "error": t.error}
            for t in result.tasks], "summary": [s.to_dict() for s in _run_summaries(run)],
            "spend": result.spend.__dict__}, indent=1))
    else:
        _print_optimize(result, report, run)
    if result.stopped:
        print(f"stopped: {result.stopped}. Everything so far is recorded; continue with: "
              f"kernelcraft optimize --resume {run_id}", file=sys.stderr)
        raise typer.Exit(3)


@app.command("report")
def report_cmd(run_id: str = typer.Argument(..., help="The run's id (printed by optimize)."), workspace: Path = WorkspaceOpt,
               out_file: Optional[Path] = typer.Option(None, "--out", help="The HTML file (default: the run's folder).")) -> None:
    """Write a run's report: one self-contained HTML file with its summary, plots, kernels and trajectories."""
    with Store(workspace) as store:
        try:
            store.run(run_id)
        except KeyError as e:
            raise UsageError(str(e.args[0])) from None
        path = write_report(store, run_id, out_file)
    out.print(f"report: {path}", highlight=False)


def _interrupted() -> None:
    kill_all_workers()
    print("interrupted: every verdict finished so far is in the store", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    # Every write is already committed; threads still waiting on a model's reply must not hold
    # the exit (a normal exit would join them).
    os._exit(130)


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # a kill ends a run as Ctrl-C does: workers stopped, the run resumable


def main() -> None:
    """Entry point: every user mistake is one line on stderr and a non-zero exit, never a traceback."""
    debug = bool(os.environ.get("KERNELCRAFT_DEBUG"))
    signal.signal(signal.SIGTERM, _terminate)
    try:
        rc = app(standalone_mode=False)  # click returns a command's typer.Exit code here
        if rc == 130:  # typer turns Ctrl-C into Exit(130)
            _interrupted()
        sys.exit(rc if isinstance(rc, int) else 0)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except (TaskError, TaskRunError, DeviceUnavailable, UsageError, EndpointError, SkillError, SkillFileError, StoreError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except OSError as e:
        if e.filename is None:  # not about a path the user gave
            _internal(e, debug)
        print(f"error: {e.filename}: {e.strerror}", file=sys.stderr)
        sys.exit(2)
    except UnicodeDecodeError as e:
        print(f"error: a file given is not UTF-8 text ({e.reason} at byte {e.start})", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        _interrupted()
    except Exception as e:  # noqa: BLE001 - last resort: one line, the traceback only on request
        # click's exceptions, by shape: typer ships its own copy of click in recent versions
        if callable(getattr(e, "show", None)) and isinstance(getattr(e, "exit_code", None), int):
            e.show()
            sys.exit(e.exit_code)
        if type(e).__name__ == "Abort":  # click's form of Ctrl-C
            _interrupted()
        _internal(e, debug)


def _internal(e: Exception, debug: bool) -> None:
    if debug:
        raise e
    print(f"internal error: {type(e).__name__}: {e} (set KERNELCRAFT_DEBUG=1 for the traceback)", file=sys.stderr)
    sys.exit(1)

