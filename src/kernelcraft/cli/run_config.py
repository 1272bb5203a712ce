"""An optimize run's configuration from what the user gives: a run file (`--config run.toml`, any field of
OptimizeConfig), then the flags given, then `--set KEY=VALUE` overrides; or a stopped run's own settings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

from pydantic import ValidationError

from ..llm import LLMConfig, Price
from ..search import RUN_KIND, OptimizeConfig, SearchConfig, others_settings
from ..settings import SettingsError, one_line, option_error, parse_assignment, read_toml, unknown_keys, with_value
from ..store import Store
from ..tasks import select_shapes
from .common import UsageError, err, user_run_settings

MODEL_SPEC = "NAME (OpenAI-compatible), anthropic:NAME, replay:FILE or batch:DIR[:NAME]"


def parse_prices(items: Sequence[str]) -> dict[str, Price]:
    """`--price MODEL=INPUT,OUTPUT` in dollars per million tokens, by model name or glob."""
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


def parse_max_tokens(items: Sequence[str]) -> dict[str, Any]:
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


def model_settings(spec: str) -> dict[str, Any]:
    """The llm table's model, provider and path that `--model SPEC` names."""
    try:
        llm = LLMConfig.from_spec(spec)
    except ValueError as e:
        raise UsageError(one_line(e) if isinstance(e, ValidationError) else str(e)) from None
    return {"model": llm.model, "provider": llm.provider, "path": llm.path}


def llm_flags(model: Optional[str], base_url: Optional[str], api_key_env: Optional[str], prices: Sequence[str],
              max_tokens: Sequence[str] = ()) -> dict[str, Any]:
    """The llm settings the model and endpoint flags give, by dotted path (None: not given)."""
    flags: dict[str, Any] = {f"llm.{k}": v for k, v in (model_settings(model) if model is not None else {}).items()}
    flags.update({"llm.base_url": base_url, "llm.api_key_env": api_key_env})
    if prices:  # the flags' prices (and replies by model) replace the run file's table
        flags["llm.prices"] = parse_prices(prices)
    flags.update({f"llm.{key}": value for key, value in parse_max_tokens(max_tokens).items()})
    return flags


def new_config(run_file: Optional[Path], flags: Mapping[str, Any], sets: Sequence[str] = (),
               options: Mapping[str, str] = {}) -> OptimizeConfig:
    """A new run's configuration: the config files' defaults (kernelcraft config show), the run file's settings, then
    `flags` (dotted paths to the values given; None is not given), then each `--set`: a dotted path or a field of
    OptimizeConfig, else a task's size constant. A bad value is named by its option where it has one (`options`:
    dotted path to option)."""
    data: dict[str, Any] = user_run_settings()
    if run_file is not None:
        try:
            given = read_toml(run_file)
        except SettingsError as e:
            raise UsageError(str(e)) from None
        _known(given, str(run_file))
        data = _over(data, given)
    given: dict[str, str] = {}  # the settings given on the command line, by dotted path: the option that gave each
    for key, value in flags.items():
        if value is not None:
            data = with_value(data, key.split("."), value)
            given[key] = options.get(key, key)
    for item in sets:
        try:
            path, value = parse_assignment(item)
        except SettingsError as e:
            raise UsageError(str(e)) from None
        if len(path) == 1 and path[0] not in OptimizeConfig.model_fields:
            sizes = data.get("sets")
            data = {**data, "sets": [*(sizes if isinstance(sizes, list) else []), item]}
        else:
            _known(with_value({}, path, value), f"--set {item!r}")
            data = with_value(data, path, value)
            given[".".join(path)] = f"--set {'.'.join(path)}"
    config = _validated(data, options)
    _own_options(config.search.strategy, given)
    return config


def _own_options(strategy: str, given: Mapping[str, str]) -> None:
    """Refuse an option given on the command line for another strategy than the run's (`--width` with refine): it
    would be ignored without a word. A run file may hold every strategy's tables (a report's run file does)."""
    paths = {path.removeprefix("search."): option for path, option in given.items() if path.startswith("search.")}
    foreign = others_settings(strategy, paths)
    if foreign:
        path, readers = foreign[0]
        names = ", ".join(readers[:-1]) + " or " + readers[-1] if len(readers) > 1 else readers[0]
        raise UsageError(f"{paths[path]} is an option of --strategy {names}, not of {strategy}: drop it, or give the "
                         "strategy it is for")


def _over(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """`top`'s settings over `base`'s, table by table."""
    merged = dict(base)
    for key, value in top.items():
        merged[key] = _over(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict) else value
    return merged


def _known(data: dict[str, Any], where: str) -> None:
    unknown = unknown_keys(OptimizeConfig, data)
    if unknown:
        raise UsageError(f"{where}: unknown setting {unknown[0]} (see OptimizeConfig in kernelcraft/search/config.py)")


def _validated(data: dict[str, Any], flags: Mapping[str, str]) -> OptimizeConfig:
    if data.get("target") is None:
        raise UsageError("give a TARGET (task file, suite directory or path/model.py:Class), or --resume RUN")
    try:
        search = SearchConfig.model_validate(data.get("search", {}))
    except ValidationError as e:
        raise UsageError(option_error(e, flags, prefix="search.")) from None
    llm = data.get("llm", {})
    if not isinstance(llm, dict) or "model" not in llm:
        if search.needs_model:
            hint = "" if search.skills.enabled else " (--strategy template without --skills on needs none)"
            raise UsageError(f"--model is required: {MODEL_SPEC}{hint}")
        data = {**data, "llm": {**(llm if isinstance(llm, dict) else {}),
                                **LLMConfig.no_model().model_dump(include={"model", "provider"})}}
    try:
        config = OptimizeConfig.model_validate(data)
    except ValidationError as e:
        raise UsageError(option_error(e, flags)) from None
    reason = config.llm.unknown_prefix()
    if reason is not None:
        raise UsageError(reason)
    if "api_key_env" in config.llm.model_fields_set and config.llm.api_key() is None:
        err.print(f"warning: {config.llm.api_key_env} (llm.api_key_env) is not set: requests go without a key",
                  highlight=False, markup=False)
    listed = select_shapes(config.target, sample=config.sample, shapes=config.shapes, from_model=config.from_model,
                           inputs=config.inputs, init_inputs=config.init_inputs, sets=config.sets)
    return config if listed is None else config.model_copy(update={"shapes": [str(s) for s in listed]})


def resumed_config(store: Store, run_id: str, target: Optional[str], budgets: Mapping[str, Any],
                   out_dir: Optional[Path], flags: Mapping[str, str] = {}) -> OptimizeConfig:
    """A stopped run's own configuration, with the budgets given (dotted paths) and a new `--out`; a bad budget is
    named by its option (`flags`: dotted path to option)."""
    if target is not None:
        raise UsageError("give either a TARGET or --resume RUN, not both (a resumed run keeps its own target)")
    try:
        run = store.run(run_id)
    except KeyError as e:
        raise UsageError(str(e.args[0])) from None
    if run.kind != RUN_KIND:
        raise UsageError(f"run {run_id} is a {run.kind} run, not an optimize run")
    # a larger budget is the usual reason to resume, a new --out another; every other setting stays the run's own
    data = dict(run.args)
    for key, value in budgets.items():
        if value is not None:
            data = with_value(data, key.split("."), value)
    if out_dir is not None:
        data["out"] = str(out_dir)
    try:
        return OptimizeConfig.model_validate(data)
    except ValidationError as e:
        raise UsageError(option_error(e, flags)) from None
