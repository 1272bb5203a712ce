"""`kernelcraft skills`: the workspace's versioned skill library."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from ..judge import check_device, open_executor
from ..llm import make_client
from ..search import Optimizer, Verification, tasks_of
from ..skills import Skill, SkillFileError, SkillLibrary, read_skill_file
from ..store import Store
from .app import app
from .common import ApiKeyEnvOpt, BaseUrlOpt, ConfigOpt, DeviceOpt, JsonOpt, LanguageOpt, PriceOpt, SetOpt, UsageError, WorkspaceOpt, err, judge_config, out
from .run_config import llm_flags, new_config

skills_app = typer.Typer(no_args_is_help=True, help="The skill library: list, show, add, remove, verify, export, import, diff.")
app.add_typer(skills_app, name="skills")

SnapshotOpt = typer.Option(None, "--snapshot", help="A snapshot id (default: the newest).")
VERIFY_KIND = "skill-verify"


def _evidence_text(skill: Skill) -> str:
    if not skill.evidence:
        return "-"
    e = skill.evidence[-1]
    with_ = f"{e.speedup_with:.2f}x" if e.speedup_with is not None else "none"
    without = f"{e.speedup_without:.2f}x" if e.speedup_without is not None else "none"
    return f"{with_} vs {without} on {e.task}" + (f" (+{len(skill.evidence) - 1})" if len(skill.evidence) > 1 else "")


@skills_app.command("list")
def skills_list(workspace: Path = WorkspaceOpt, snapshot: Optional[int] = SnapshotOpt, as_json: bool = JsonOpt) -> None:
    """The skills of a snapshot, with the latest verification of each."""
    with Store(workspace) as store:
        library = SkillLibrary(store)
        skills = library.skills(snapshot)
        sid = snapshot or library.current
        candidates = store.skill_candidates()
    if as_json:
        print(json.dumps({"snapshot": sid, "skills": [s.model_dump(mode="json") for s in skills]}, indent=1))
        return
    table = Table(title=f"skill snapshot {sid}: {len(skills)} skills", title_justify="left")
    for col in ("name", "v", "origin", "tags", "evidence (with vs without)", "description"):
        table.add_column(col, overflow="fold")
    for s in skills:
        table.add_row(s.name, str(s.version), s.origin, ",".join(s.tags), _evidence_text(s), s.description)
    out.print(table)
    decided = [c for c in candidates if c.status != "pending"]
    if decided:
        out.print(f"{sum(c.status == 'admitted' for c in decided)} candidate skills admitted, "
                  f"{sum(c.status == 'rejected' for c in decided)} rejected (see the run reports)", highlight=False)


@skills_app.command("show")
def skills_show(name: str = typer.Argument(..., help="A skill's name."), workspace: Path = WorkspaceOpt,
                snapshot: Optional[int] = SnapshotOpt, as_json: bool = JsonOpt) -> None:
    """One skill: metadata, technique and evidence."""
    with Store(workspace) as store:
        skill = SkillLibrary(store).get(name, snapshot)
    if as_json:
        print(json.dumps(skill.model_dump(mode="json"), indent=1))
        return
    out.print(f"[bold]{skill.name}[/bold] v{skill.version} ({skill.origin})  tags: {', '.join(skill.tags)}")
    out.print(f"{skill.description}\nscope: {skill.scope}\n", highlight=False)
    out.print(skill.content, highlight=False, markup=False)
    for e in skill.evidence:
        out.print(f"evidence: {e.task} on {e.device}: {e.speedup_with}x with, {e.speedup_without}x without (run {e.run_id})",
                  highlight=False)


@skills_app.command("add")
def skills_add(
    file: Path = typer.Argument(..., help="A skill file: Markdown with a TOML header between '+++' lines."),
    task: Optional[str] = typer.Option(None, "--task", help="Verify on this task before admitting (a task file or bundled name)."),
    trusted: bool = typer.Option(False, "--trusted", help="Admit without verification (a technique you vouch for)."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="The model that regenerates the kernel for verification."),
    base_url: Optional[str] = BaseUrlOpt, api_key_env: Optional[str] = ApiKeyEnvOpt,
    prices: list[str] = PriceOpt, samples: int = typer.Option(1, "--samples", help="Regenerations per arm."),
    turns: int = typer.Option(1, "--turns", help="Turns per regeneration."), language: Optional[str] = LanguageOpt,
    device: str = DeviceOpt, workspace: Path = WorkspaceOpt, sets: list[str] = SetOpt, config_file: Optional[Path] = ConfigOpt,
) -> None:
    """Add a skill. It is admitted only if regenerating TASK's kernel with it beats regenerating without it
    (1.2x relative and absolute), unless --trusted."""
    skills = read_skill_file(file)
    if trusted and task is not None:
        raise UsageError("--trusted admits the skill unverified: drop --task (or drop --trusted to verify it on the task)")
    if not trusted and task is None:
        raise UsageError("give --task TASK (and --model) to verify the skill, or --trusted to admit it unverified")
    with Store(workspace) as store:
        library = SkillLibrary(store)
        if trusted:
            sid = library.put(skills, f"added {', '.join(s.name for s in skills)} from {file.name} (trusted)")
            out.print(f"added {', '.join(s.name for s in skills)}: snapshot {sid}", highlight=False)
            return
        for skill in skills:
            _print_verification(_verify(store, skill, task, model, base_url, api_key_env, prices, samples, turns, language,
                                        device, sets, config_file))


@skills_app.command("verify")
def skills_verify(
    name: str = typer.Argument(..., help="A skill of the library."),
    task: str = typer.Option(..., "--task", help="The task to regenerate (a task file or bundled name)."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="The model that regenerates the kernel."),
    base_url: Optional[str] = BaseUrlOpt, api_key_env: Optional[str] = ApiKeyEnvOpt, prices: list[str] = PriceOpt,
    samples: int = typer.Option(1, "--samples", help="Regenerations per arm."),
    turns: int = typer.Option(1, "--turns", help="Turns per regeneration."),
    language: Optional[str] = LanguageOpt, device: str = DeviceOpt, workspace: Path = WorkspaceOpt,
    sets: list[str] = SetOpt, config_file: Optional[Path] = ConfigOpt,
) -> None:
    """Measure a library skill again on TASK (with vs without it); when it passes, its evidence grows in a new snapshot."""
    with Store(workspace) as store:
        skill = SkillLibrary(store).get(name)
        _print_verification(_verify(store, skill, task, model, base_url, api_key_env, prices, samples, turns, language,
                                    device, sets, config_file))


def _verify(store: Store, skill: Skill, task: str, model: Optional[str], base_url: Optional[str], api_key_env: Optional[str],
            prices: list[str], samples: int, turns: int, language: Optional[str], device: str, sets: list[str],
            config_file: Optional[Path]) -> Verification:
    config = new_config(None, {"target": task, "sets": sets, "device": device, "judge": judge_config(config_file),
                               "search.language": language, "search.skills.enabled": True, "search.skills.verify_samples": samples,
                               "search.skills.verify_turns": turns, **llm_flags(model, base_url, api_key_env, prices)})
    tasks = tasks_of(config)
    if len(tasks) != 1:
        raise UsageError(f"--task {task}: verification takes one task, this names {len(tasks)}")
    check_device(config.device)
    client = make_client(config.llm, cache_dir=store.workspace / "llm-cache")
    client.check()
    with open_executor(config.device, cache_dir=store.cache_dir, config=config.judge) as pool:
        optimizer = Optimizer(config, store, client, pool, pool.description)
        run_id = optimizer.start(tasks, kind=VERIFY_KIND)
        err.print(f"run {run_id}: verifying {skill.name} on {tasks[0].key} ({samples} x {turns} per arm)", highlight=False)
        return optimizer.verify_skill(run_id, tasks[0], skill)


def _print_verification(v: Verification) -> None:
    verdict = "admitted" if v.admitted else "rejected"
    where = f": snapshot {v.snapshot}" if v.snapshot is not None else ""
    out.print(f"{v.skill.name}: {verdict} ({v.reason}){where}", highlight=False)


@skills_app.command("remove")
def skills_remove(name: str = typer.Argument(...), workspace: Path = WorkspaceOpt) -> None:
    """Remove a skill from the library (a new snapshot; earlier snapshots keep it)."""
    with Store(workspace) as store:
        sid = SkillLibrary(store).remove(name)
    out.print(f"removed {name}: snapshot {sid}", highlight=False)


@skills_app.command("export")
def skills_export(file: Path = typer.Argument(..., help="The JSON file to write."), workspace: Path = WorkspaceOpt,
                  snapshot: Optional[int] = SnapshotOpt) -> None:
    """Write a snapshot's skills, with their evidence, as JSON."""
    with Store(workspace) as store:
        library = SkillLibrary(store)
        skills = library.skills(snapshot)
        sid = snapshot or library.current
    file.write_text(json.dumps({"snapshot": sid, "skills": [s.model_dump(mode="json") for s in skills]}, indent=1))
    out.print(f"{len(skills)} skills of snapshot {sid} written to {file}", highlight=False)


@skills_app.command("import")
def skills_import(file: Path = typer.Argument(..., help="A JSON export (or one Markdown skill)."), workspace: Path = WorkspaceOpt) -> None:
    """Add the skills of an export, with the evidence they carry, as one new snapshot."""
    skills = [s.model_copy(update={"origin": "imported"}) for s in read_skill_file(file)]
    if not skills:
        raise SkillFileError(f"{file}: no skills in it")
    with Store(workspace) as store:
        sid = SkillLibrary(store).put(skills, f"imported {len(skills)} skills from {file.name}")
    out.print(f"imported {len(skills)} skills: snapshot {sid}", highlight=False)


@skills_app.command("diff")
def skills_diff(a: int = typer.Argument(..., help="The older snapshot."), b: Optional[int] = typer.Argument(None, help="The newer (default: newest)."),
                workspace: Path = WorkspaceOpt, as_json: bool = JsonOpt) -> None:
    """What changed between two snapshots."""
    with Store(workspace) as store:
        library = SkillLibrary(store)
        d = library.diff(a, b or library.current)
        snaps = {s.id: s.reason for s in library.snapshots() if a < s.id <= (b or library.current)}
    if as_json:
        print(json.dumps({"added": d.added, "removed": d.removed, "changed": d.changed, "snapshots": snaps}, indent=1))
        return
    for sid, reason in snaps.items():
        out.print(f"snapshot {sid}: {reason}", highlight=False)
    for label, names in (("added", d.added), ("removed", d.removed), ("changed", d.changed)):
        out.print(f"{label}: {', '.join(names) if names else '-'}", highlight=False)
