"""What the CLI's commands share: the consoles, the one-line usage error, the common options, reading the files a
user names, the judge's options, progress bars and the verdict's printout."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn, Optional, TypeVar

import annotated_types
import typer
from pydantic import BaseModel
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from ..agents.languages import LANGUAGES
from ..judge import JudgeConfig, Verdict
from ..report import roofline_table, verdict_lines, verdict_table
from ..llm import LLMConfig
from ..settings import SettingsError, read_toml
from ..store import DB_NAME
from ..tasks import Task, resolve_target
from ..user_config import BUILT_IN, built_in_settings, user_settings

# Wide enough that task keys and messages are not cut when output goes to a file or a pipe.
out = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True)
T = TypeVar("T")


class UsageError(Exception):
    """A mistake in what the user asked for; printed as one line."""


class Terminated(KeyboardInterrupt):
    """A kill (SIGTERM): it ends a command as Ctrl-C does, and a run it stops says how to continue with exit code 3."""


class RunInterrupted(Exception):
    """Ctrl-C or a kill stopped a run that can be continued: `message` says how (its resume command), `code` is the
    exit code (130 for Ctrl-C, 3 for a kill, as for every other stop of a resumable run)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def fail(message: str, code: int = 2, *, label: str = "error") -> NoReturn:
    """End the command on an error: one line on stderr, `label: message`; with --json, where a machine reads the
    command's answer, one JSON object on stdout instead, {"error": message}. Exit `code`."""
    if "--json" in sys.argv[1:]:
        print(json.dumps({"error": message if label == "error" else f"{label}: {message}"}))
    else:
        print(f"{label}: {message}", file=sys.stderr)
    sys.exit(code)


def click_message(e: Exception) -> str:
    """A parse error of click's (a missing argument, an unknown option, a bad value) as the tool's one line, with
    where the command's help is, in place of click's usage block."""
    text = " ".join(line.strip() for line in e.format_message().splitlines() if line.strip()).rstrip(".")  # type: ignore[attr-defined]
    if text[1:2].islower():  # "Missing argument", not "NAME"
        text = text[0].lower() + text[1:]
    ctx = getattr(e, "ctx", None)
    return f"{text}; see {ctx.command_path} -h" if ctx is not None else text


# The config files' defaults (user_config.py), read as the CLI loads: a file that cannot be read is reported by
# main() as one line, before any command runs.
try:
    USER, USER_ERROR = user_settings(), None
except SettingsError as e:
    USER, USER_ERROR = built_in_settings(), str(e)
DEFAULT_WORKSPACE = Path(str(USER["workspace"].value))
WorkspaceOpt = typer.Option(DEFAULT_WORKSPACE, "--workspace", "-w",
                            help="Workspace directory (database, build cache, artifacts).")
DeviceOpt = typer.Option(USER["device"].value, "--device", "-d", help="cuda or cpu (the default may come from a config file: "
                                                                         "kernelcraft config show).")
JsonOpt = typer.Option(False, "--json", help="Print JSON for machines.")
GpusOpt = typer.Option(None, "--gpus", help="The GPUs to judge on: all (default: every visible GPU) or indices such as "
                                             "0,1 (--workers each).")
RayOpt = typer.Option(None, "--ray", help="Judge on a Ray cluster instead: auto (the cluster `ray start` made), local "
                                          "(a Ray instance of this run's own) or the cluster's address (--workers per GPU).")
BaseUrlOpt = typer.Option(None, "--base-url", help="The endpoint, e.g. http://localhost:8000/v1.")
ApiKeyEnvOpt = typer.Option(None, "--api-key-env", help="The environment variable that holds the API key "
                                                        "(default OPENAI_API_KEY, or ANTHROPIC_API_KEY for anthropic:NAME).")
PriceOpt = typer.Option([], "--price", help="MODEL=IN,OUT dollars per million tokens (repeatable; globs).")
LanguageOpt = typer.Option(None, "--language", help="The kernel language: " + "; ".join(
    f"{lang.key} ({lang.name}, on {' or '.join(lang.devices)})" for lang in LANGUAGES.values())
    + ". Default: the device's own, cuda on a GPU, cpp with --device cpu.")
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


def option_default(model: type[BaseModel], field: str) -> Any:
    """A flag's default is its configuration model's: one source of truth."""
    return model.model_fields[field].default


def option_bound(model: type[BaseModel], field: str) -> Any:
    """A flag's upper bound (its field's `le=`), or None: one source of truth, as for its default."""
    return next((m.le for m in model.model_fields[field].metadata if isinstance(m, annotated_types.Le)), None)


def user_run_settings() -> dict[str, Any]:
    """The config files' defaults as a new run's settings: its lowest layer, under a run file, the flags and --set."""
    given = {key: s.value for key, s in USER.items() if s.source not in (BUILT_IN, "$KERNELCRAFT_WORKSPACE")}
    layer: dict[str, Any] = {"device": given["device"]} if "device" in given else {}
    llm = {key: given[key] for key in ("base_url", "api_key_env") if key in given}
    if "model" in given:
        try:
            spec = LLMConfig.from_spec(str(given["model"]))
        except ValueError as e:
            raise UsageError(f"{USER['model'].source}: model {given['model']!r}: {e}") from None
        llm.update(model=spec.model, provider=spec.provider, path=spec.path)
    return {**layer, "llm": llm} if llm else layer


def existing_workspace(workspace: Path) -> Path:
    """`workspace`, which must already be one (a run to resume or report): a mistyped -w must not leave a new, empty
    workspace behind."""
    if not (workspace / DB_NAME).is_file():
        raise UsageError(f"{workspace}: no kernelcraft workspace here (no {DB_NAME}): give -w the run's workspace")
    return workspace


def read_text(path: Path) -> str:
    """A file the user named, as text."""
    try:
        return path.read_text()
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text") from None


def candidate_source(path: Path) -> str:
    """A candidate file's source."""
    if path.is_dir():
        raise UsageError(f"{path}: a directory, not a candidate file (eval-suite takes a directory of solutions)")
    if not path.is_file():
        raise UsageError(f"{path}: no such candidate file")
    return read_text(path)


def judge_config(path: Optional[Path], seeds: Optional[int] = None, atol: Optional[float] = None,
                 rtol: Optional[float] = None) -> JudgeConfig:
    """The judge's options: a TOML file's (keys of JudgeConfig), then the flags given."""
    try:
        data = read_toml(path) if path is not None else {}
    except SettingsError as e:
        raise UsageError(str(e)) from None
    for key, value in (("seeds", seeds), ("atol", atol), ("rtol", rtol)):
        if value is not None:
            data[key] = value
    try:
        return JudgeConfig().with_overrides(data)
    except (TypeError, ValueError) as e:
        raise UsageError(f"judge config: {e}") from None


def target_tasks(target: str, device: str, sets: list[str], sample: Optional[int] = None, shapes: Optional[str] = None,
                 from_model: Optional[str] = None, inputs: Optional[str] = None, init_inputs: Optional[str] = None) -> list[Task]:
    """The tasks of a target from the common options (`--shapes` as typed: MxNxK,...)."""
    return resolve_target(target, device=device, sets=sets, sample=sample, shapes=None if shapes is None else [shapes],
                          from_model=from_model, inputs=inputs, init_inputs=init_inputs)


def progress(items: list[T], what: str) -> Iterator[T]:
    """The items, with a progress bar on stderr while they are walked."""
    with Progress(TextColumn(f"{what}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                  transient=True) as bar:
        yield from bar.track(items)


_STAGE_WORDS = {"setup": "starting a sandboxed worker", "load": "loading the candidate", "build": "building its extension",
                "correctness": "checking correctness on secret seeds", "timing": "timing it against the reference",
                "profile": "measuring its kernels' coverage", "audit": "auditing the speedup"}


@contextmanager
def stages(what: str) -> Iterator[Callable[[str], None]]:
    """A spinner on stderr with the judge's current stage and the time elapsed; yields the judge's `on_stage`."""
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err, transient=True) as bar:
        line = bar.add_task(f"{what}: checking the source", total=None)
        yield lambda stage: bar.update(line, description=f"{what}: {_STAGE_WORDS.get(stage, stage)}")


def print_verdict(v: Verdict) -> None:
    """A verdict's table, its roofline and its lines."""
    out.print(verdict_table(v))
    if v.roofline is not None:
        out.print(roofline_table(v.roofline))
    for line in verdict_lines(v):
        out.print(line, highlight=False)
