"""`optimize --config run.toml --set KEY=VALUE`: a run file is the whole OptimizeConfig, flags and `--set` override
it, and every mistake in either is one line and exit code 2."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import kernelcraft.cli.optimize as optimize_cli
from kernelcraft.cli import app, main
from kernelcraft.judge import JudgeConfig
from kernelcraft.search import OptimizeConfig

from .conftest import ROOT
from .test_cli import kc, one_line_error


class _Captured(Exception):
    pass


def _config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *args: str) -> OptimizeConfig:
    """The configuration `optimize ARGS` would run with (it stops before resolving the tasks)."""
    seen: list[OptimizeConfig] = []

    def capture(config: OptimizeConfig) -> list:
        seen.append(config)
        raise _Captured

    monkeypatch.setattr(optimize_cli, "tasks_of", capture)
    result = CliRunner().invoke(app, ["optimize", *args, "--workspace", str(tmp_path / "ws")])
    assert isinstance(result.exception, _Captured), (result.output, result.exception)
    return seen[0]


def _toml(data: dict[str, Any], prefix: str = "") -> str:
    """Nested tables as TOML (None left out: TOML has no null, and every such field defaults to None)."""
    def key(k: str) -> str:
        return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)

    lines = [f"[{prefix}]"] if prefix else []
    lines += [f"{key(k)} = {json.dumps(v)}" for k, v in data.items() if v is not None and not isinstance(v, dict)]
    lines += [_toml(v, f"{prefix}.{key(k)}" if prefix else key(k)) for k, v in data.items() if isinstance(v, dict)]
    return "\n".join(lines) + "\n"


FLAGS = ["softmax_rows", "--model", "anthropic:claude-x", "--device", "cpu", "--workers", "2", "--strategy", "branch",
         "--turns", "4", "--width", "2", "--impls", "1", "--price", "claude-*=3,15", "--max-tokens", "4000",
         "--max-tokens", "gpt-4.1=100", "--budget-usd", "2.5", "--skills", "on", "--no-learn", "--set", "batch_size=4",
         "--set", "judge.seeds=2", "--set", "judge.timing.warmup_ms=5.0", "--set", "llm.temperature=0.5",
         "--set", "search.history_tokens=8000", "--set", "search.strategy=branch"]


def test_a_run_file_reproduces_the_configuration_of_the_flags(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    by_flags = _config(monkeypatch, tmp_path, *FLAGS)
    assert isinstance(by_flags.judge, JudgeConfig) and by_flags.judge.seeds == 2 and by_flags.judge.timing.warmup_ms == 5.0
    assert by_flags.llm.provider == "anthropic" and by_flags.llm.api_key_env == "ANTHROPIC_API_KEY"
    assert by_flags.llm.max_tokens == 4000 and by_flags.llm.max_tokens_per_model == {"gpt-4.1": 100}
    assert by_flags.search.branch.width == 2 and by_flags.search.history_tokens == 8000 and by_flags.sets == ["batch_size=4"]
    assert by_flags.search.skills.enabled and not by_flags.search.skills.learn
    (tmp_path / "run.toml").write_text(_toml(by_flags.model_dump(mode="json")))
    assert _config(monkeypatch, tmp_path, "--config", str(tmp_path / "run.toml")) == by_flags


def test_flags_override_the_run_file_and_set_overrides_both(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "run.toml").write_text('target = "softmax_rows"\ndevice = "cpu"\n[llm]\nmodel = "m"\n[search]\nturns = 5\n'
                                       'samples = 3\n[judge]\nseeds = 1\n')
    config = _config(monkeypatch, tmp_path, "--config", str(tmp_path / "run.toml"))
    assert (config.search.turns, config.search.samples, config.judge.seeds, config.llm.model) == (5, 3, 1, "m")
    config = _config(monkeypatch, tmp_path, "--config", str(tmp_path / "run.toml"), "--turns", "6", "--model", "other")
    assert (config.search.turns, config.search.samples, config.llm.model) == (6, 3, "other")
    config = _config(monkeypatch, tmp_path, "--config", str(tmp_path / "run.toml"), "--turns", "6", "--set", "search.turns=7")
    assert config.search.turns == 7 and config.judge == JudgeConfig(seeds=1)


@pytest.mark.parametrize("args, words", [
    (["--config", "no_such.toml"], "no_such.toml: no such config file"),
    (["--config", "bad.toml"], "bad.toml: Expected '=' after a key"),
    (["--config", "unknown.toml"], "unknown.toml: unknown setting search.turnz"),
    (["--config", "wrong.toml"], "--turns (search.turns): Input should be a valid integer"),
    (["--set", "search.turnz=4"], "--set 'search.turnz=4': unknown setting search.turnz"),
    (["--set", "nosuch.table.key=1"], "unknown setting nosuch"),
    (["--set", "search.turns=four"], "--turns (search.turns): Input should be a valid integer"),
    (["--set", "search.turns=0"], "--turns (search.turns) must be >= 1"),
    (["--budget-usd", "-1"], "--budget-usd (llm.budget_usd) must be > 0"),
    (["--set", "judge.seeds=0"], "judge: seeds = 0: expected a finite number above zero"),
    (["--set", "judge.nope=1"], "unknown judge option(s): nope"),
    (["--model", "foo:bar"], "--model 'foo:bar': unknown model prefix 'foo:'"),
    (["--set", "search..turns=4"], "expected KEY=VALUE, KEY a dotted path"),
    (["--set", "search.turns"], "expected KEY=VALUE"),
    (["--turns", str(10**23)], "--turns (search.turns) must be <= 50"),  # every count has an upper bound
    (["--samples", "65"], "--samples (search.samples) must be <= 64"),
    (["--strategy", "branch", "--width", "17"], "--width (search.branch.width) must be <= 16"),
    (["--strategy", "evolve", "--set", "search.evolve.generations=5000"], "--generations (search.evolve.generations) must be <= 1000"),
    (["--strategy", "template", "--configs", "5000"], "--configs (search.template.configs) must be <= 1024"),
    (["--width", "4"], "--width is an option of --strategy branch, not of refine: drop it, or give the strategy it is for"),
    (["--strategy", "evolve", "--turns", "3"], "--turns is an option of --strategy branch, contrastive or refine, not of evolve"),
    (["--set", "search.branch.width=4"], "--set search.branch.width is an option of --strategy branch, not of refine"),
    (["--strategy", "branch", "--samples", "2"], "--samples is an option of --strategy contrastive or refine, not of branch"),
])
def test_run_file_and_set_mistakes_are_one_line_errors(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                                       tmp_path: Path, args: list[str], words: str) -> None:
    (tmp_path / "bad.toml").write_text("[search]\nturns 4\n")
    (tmp_path / "unknown.toml").write_text("[search]\nturnz = 4\n")
    (tmp_path / "wrong.toml").write_text('[search]\nturns = "four"\n')
    monkeypatch.chdir(tmp_path)  # main() in this process: the entry point's rule without a process per case
    monkeypatch.setattr(sys, "argv", ["kernelcraft", "optimize", "softmax_rows", "--model", "m", "--device", "cpu", "-w", "ws", *args])
    with pytest.raises(SystemExit) as e:
        main()
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err, err
    (line,) = [line for line in err.splitlines() if line.strip()]
    assert line.startswith("error: ") and words in line


def test_a_bad_setting_is_one_line_from_the_command(tmp_path: Path) -> None:
    assert "unknown setting search.turnz" in one_line_error(kc("optimize", "softmax_rows", "--model", "m", "--set",
                                                               "search.turnz=4", cwd=tmp_path))


@pytest.mark.parametrize("budget, words", [
    (["--budget-tokens", "-5"], "--budget-tokens (llm.budget_tokens) must be >= 1"),
    (["--budget-usd", "0"], "--budget-usd (llm.budget_usd) must be > 0"),
])
def test_a_resumed_run_refuses_a_budget_below_its_bound(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                                        tmp_path: Path, budget: list[str], words: str) -> None:
    from kernelcraft.llm import LLMConfig
    from kernelcraft.store import Store
    with Store(tmp_path / "ws") as store:
        run_id = store.start_run("optimize", OptimizeConfig(target="softmax_rows", device="cpu",
                                                            llm=LLMConfig(model="m")).model_dump(mode="json"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["kernelcraft", "optimize", "--resume", run_id, "-w", "ws", *budget])
    with pytest.raises(SystemExit) as e:
        main()
    err = capsys.readouterr().err
    assert e.value.code == 2 and words in err and "Traceback" not in err, err


def test_a_model_name_with_a_colon_goes_to_its_own_endpoint_and_an_unset_key_variable_is_said(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KC_NO_SUCH_KEY", raising=False)
    config = _config(monkeypatch, tmp_path, "softmax_rows", "--model", "qwen2.5-coder:7b", "--base-url", "http://127.0.0.1:9/v1")
    assert (config.llm.provider, config.llm.model) == ("openai", "qwen2.5-coder:7b")
    assert _config(monkeypatch, tmp_path, "softmax_rows", "--model", "ft:gpt-4o-mini:org::abc").llm.model == "ft:gpt-4o-mini:org::abc"
    monkeypatch.setattr(optimize_cli, "tasks_of", lambda config: (_ for _ in ()).throw(_Captured()))
    result = CliRunner().invoke(app, ["optimize", "softmax_rows", "--model", "m", "--set", "llm.api_key_env='KC_NO_SUCH_KEY'",
                                      "--workspace", str(tmp_path / "ws")])
    assert isinstance(result.exception, _Captured)
    assert "KC_NO_SUCH_KEY (llm.api_key_env) is not set" in result.output


def test_every_option_of_every_command_has_help() -> None:
    import typer.main

    missing = []

    def walk(command: object, path: list[str]) -> None:
        for name, sub in (getattr(command, "commands", None) or {}).items():
            walk(sub, [*path, name])
        missing.extend(f"{' '.join(path)} {p.opts[0]}" for p in getattr(command, "params", [])
                       if p.param_type_name == "option" and not p.help)

    walk(typer.main.get_command(app), ["kernelcraft"])
    assert missing == []


def test_every_count_of_a_run_has_the_upper_bound_its_help_and_docs_cli_give() -> None:
    from pydantic import BaseModel

    from kernelcraft.cli.common import option_bound

    documented = (ROOT / "docs" / "cli.md").read_text()
    help_text = CliRunner().invoke(app, ["optimize", "--help"], env={"COLUMNS": "400"}).output
    bounded = []
    for path, flag in optimize_cli._OPTIONS.items():
        *tables, name = path.split(".")
        model: type[BaseModel] = OptimizeConfig
        for table in tables:
            model = model.model_fields[table].annotation  # type: ignore[assignment]
        bound = option_bound(model, name)
        if bound is None or model.model_fields[name].annotation not in (int, int | None):
            continue
        bounded.append(flag)
        assert f"| `{flag}` | {bound} |" in documented, flag
        assert re.search(rf"{flag}\s.*at most {bound}\)", help_text), flag
    assert {"--turns", "--samples", "--width", "--impls", "--generations", "--configs"} <= set(bounded)
