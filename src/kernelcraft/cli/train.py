"""`kernelcraft train`: training the model on the judge, starting with the SFT data export."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer
from pydantic import ValidationError
from rich.table import Table

from ..settings import first_error
from ..store import DB_NAME, Store
from .common import JsonOpt, UsageError, WorkspaceOpt, out

if TYPE_CHECKING:
    from ..train.sft import ExportSummary

app = typer.Typer(no_args_is_help=True, help="Train the model on the judge: SFT data export.")


@app.command("export-sft")
def export_sft_cmd(
    out_dir: Path = typer.Option(..., "--out", help="The directory to write: sft.jsonl, dataset/ (datasets.load_from_disk) "
                                                    "and summary.json."),
    workspace: Path = WorkspaceOpt,
    runs: list[str] = typer.Option([], "--run", help="A run to export (repeatable; default: every run of the workspace)."),
    max_per_task: Optional[int] = typer.Option(None, "--max-per-task", help="Records kept per task and role, the fastest "
                                                                             "(default: no cap)."),
    similarity: Optional[float] = typer.Option(None, "--similarity", help="Kernels of a task whose shingles' Jaccard "
                                                                          "similarity is at least this are one (default 0.8)."),
    roles: Optional[str] = typer.Option(None, "--roles", help="The roles to export, comma-separated (default: "
                                                              "coder,selector,summarizer,planner)."),
    config_file: Optional[Path] = typer.Option(None, "--config", help="Export options from a TOML file (flags override it)."),
    as_json: bool = JsonOpt,
) -> None:
    """Turn the store's successful trajectories into chat-format SFT data, one record per role and turn."""
    try:  # here, not at the top: the train extra is optional, and `datasets` is slow to import
        from ..train.sft import SFTExportConfig, SFTExportError, export_sft
    except ImportError as e:
        raise UsageError(f"the SFT export needs the train extra (pip install 'kernelcraft[train]'): {e}") from None
    if not (workspace / DB_NAME).is_file():
        raise UsageError(f"{workspace}: no kernelcraft workspace (no {DB_NAME})")
    flags: dict[str, Any] = {"runs": runs or None, "max_per_task": max_per_task, "similarity": similarity,
                             "roles": [r.strip() for r in roles.split(",") if r.strip()] if roles is not None else None}
    try:
        base = SFTExportConfig.from_toml(config_file) if config_file is not None else SFTExportConfig()
        config = SFTExportConfig.model_validate({**base.model_dump(), **{k: v for k, v in flags.items() if v is not None}})
        with Store(workspace) as store:
            summary = export_sft(store, out_dir, config)
    except ValidationError as e:
        where, message = first_error(e)  # a flag as the user typed it: max_per_task is --max-per-task
        raise UsageError(f"--{where.partition('.')[0].replace('_', '-') or 'option'}: {message}") from None
    except SFTExportError as e:
        raise UsageError(str(e)) from None
    if as_json:
        print(summary.model_dump_json(indent=1))
        return
    _print_summary(summary)


@app.command("rl")
def rl_cmd(
    engine: str = typer.Option(..., "--engine", help="trl: GRPO through TRL, run here; verl: write verl's dataset, agent "
                                                     "loop registry, reward file and launch.sh (docs/training.md)."),
    config_file: Path = typer.Option(..., "--config", help="The run's TOML file: model, tasks, and the env, advantages, "
                                                           "trl or verl tables (see examples/train/)."),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="verl: where its files go (default: OUTPUT_DIR/verl)."),
    as_json: bool = JsonOpt,
) -> None:
    """Reinforcement learning of the model with the judge as the reward, through TRL or verl."""
    import contextlib
    import importlib.util
    import json
    import sys

    if engine not in ("trl", "verl"):
        raise UsageError(f"--engine {engine!r}: use trl or verl")
    try:  # here, not at the top: the train extra is optional
        from ..skills import SkillLibrary
        from ..train.config import RLConfig, RLConfigError
    except ImportError as e:
        raise UsageError(f"train rl needs the train extra ({e.name} is missing): pip install 'kernelcraft[train]'") from None
    try:
        cfg = RLConfig.from_toml(config_file)
    except RLConfigError as e:
        raise UsageError(str(e)) from None
    skills = []
    if cfg.skills:
        with Store(Path(cfg.workspace)) as store:
            skills = SkillLibrary(store).skills()
    if engine == "verl":
        if importlib.util.find_spec("verl") is None:
            raise UsageError("--engine verl needs verl here and on the training nodes: pip install 'kernelcraft[verl]'")
        from ..train.verl_adapter import prepare_verl

        try:
            launch = prepare_verl(cfg, out_dir or Path(cfg.output_dir) / "verl", skills)
        except RLConfigError as e:
            raise UsageError(str(e)) from None
        if as_json:
            print(json.dumps({"script": str(launch.script), "data": str(launch.data), "agent_loops": str(launch.agent_loops),
                              "reward": str(launch.reward), "overrides": launch.overrides}, indent=1))
            return
        out.print(launch.script.read_text(), highlight=False, markup=False)
        out.print(f"written: {launch.script} (run it), {launch.data}, {launch.agent_loops}, {launch.reward}", highlight=False)
        return
    try:
        from ..train.trl_adapter import train_grpo
    except ImportError as e:
        raise UsageError(f"--engine trl needs the train extra ({e.name} is missing): pip install 'kernelcraft[train]'") from None
    try:
        with contextlib.redirect_stdout(sys.stderr):  # the trainer's progress and logs: stdout is for the result
            summary = train_grpo(cfg, skills=skills).summary()
    except RLConfigError as e:
        raise UsageError(str(e)) from None
    if as_json:
        print(json.dumps(summary, indent=1))
        return
    table = Table(title=f"GRPO through TRL: {cfg.model}", title_justify="left")
    table.add_column("")
    table.add_column("", overflow="fold")
    for key, value in summary.items():
        table.add_row(key.replace("_", " "), str(value))
    out.print(table)


def _print_summary(summary: ExportSummary) -> None:
    reasons = list(summary.dropped)
    roles = Table(title=f"SFT export: {summary.kept} of {summary.considered} records kept, from {len(summary.runs)} run(s)",
                  title_justify="left")
    for col in ("role", "considered", "kept", *reasons):
        roles.add_column(col, justify="left" if col == "role" else "right")
    for name, r in summary.roles.items():
        roles.add_row(name, str(r.considered), str(r.kept), *(str(r.dropped.get(reason, 0)) for reason in reasons))
    out.print(roles)
    tasks = Table(title="task balance", title_justify="left")
    for col in ("task", "records", "successes", "kept"):
        tasks.add_column(col, justify="left" if col == "task" else "right", overflow="fold")
    for name, t in summary.tasks.items():
        tasks.add_row(name, str(t.before), str(t.successes), str(t.after))
    out.print(tasks)
    for reason, meaning in summary.reasons.items():
        out.print(f"{reason}: {meaning}", highlight=False)
    out.print(f"written to {summary.out}: sft.jsonl, dataset/, summary.json", highlight=False)
