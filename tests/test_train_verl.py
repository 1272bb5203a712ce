"""The verl adapter without verl: the role rows that give per-agent groups, the files and command of a
launch, and the custom reward function against a real judge service on loopback. The agent loop class
itself needs verl (skipped where it is not installed)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

pytest.importorskip("datasets")

from datasets import Dataset  # noqa: E402

from kernelcraft.skills import seed_skills  # noqa: E402
from kernelcraft.tasks import resolve_task  # noqa: E402
from kernelcraft.train.config import RLConfig, RLConfigError  # noqa: E402
from kernelcraft.judge import Status, Verdict  # noqa: E402
from kernelcraft.train import verl_adapter  # noqa: E402
from kernelcraft.train.env import RoleSample  # noqa: E402
from kernelcraft.train.episode import Episode  # noqa: E402
from kernelcraft.train.verl_adapter import (AGENT_NAME, JudgeFailed, _row_task, compute_score, loop_reward, prepare_verl,  # noqa: E402
                                            role_rows)

from .test_cli import kc, one_line_error  # noqa: E402
from .test_reward_service import TOKEN, TOKEN_ENV, Service  # noqa: E402
from .test_train_env import REWARD, SLOW_KERNEL, TASK_SOURCE, WRONG_KERNEL, fenced  # noqa: E402


def config(tmp_path: Path, advantages: dict[str, object] | None = None, **verl: object) -> RLConfig:
    task_file = tmp_path / "rowwise_relu2.py"
    task_file.write_text(TASK_SOURCE)
    return RLConfig.model_validate({
        "model": "/models/Qwen3-8B", "tasks": [str(task_file), "leaky_relu_clamp"], "sizes": {"N": 4096}, "device": "cpu",
        "output_dir": str(tmp_path / "ckpt"), "env": {"language": "triton", "reward": REWARD.model_dump()},
        "advantages": advantages or {}, "verl": {"roles": ["selector", "coder", "summarizer"], **verl},
    })


def test_every_row_is_one_task_and_one_role(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    tasks = [resolve_task(spec).with_sizes("cpu", cfg.sizes) for spec in cfg.tasks]
    rows = role_rows(tasks, cfg.verl.roles, cfg, seed_skills())
    assert len(rows) == 6 and {r["agent_name"] for r in rows} == {AGENT_NAME}
    groups = [r["extra_info"]["group"] for r in rows]
    assert len(set(groups)) == 6  # verl's uid is per row: no group mixes tasks or roles
    assert [(r["extra_info"]["role"], r["extra_info"]["weight"]) for r in rows[:3]] == [
        ("selector", 0.3), ("coder", 1.0), ("summarizer", 0.5)]
    for row, task in zip(rows[::3], tasks):
        again = _row_task(row["extra_info"])  # what a node rebuilds, without the task's file
        assert (again.key, again.source, again.sizes_for("cpu")) == (task.key, task.source, task.sizes_for("cpu"))
        assert "You choose which optimization techniques" in row["prompt"][0]["content"]  # skills on: the selector first
    assert rows[3]["extra_info"]["sizes"] == json.dumps({"N": 4096})


def test_prepare_writes_what_verl_reads(tmp_path: Path) -> None:
    cfg = config(tmp_path, ray_address="http://head:8265", nnodes=2, gpus_per_node=8, overrides=["trainer.save_freq=10"])
    launch = prepare_verl(cfg, tmp_path / "verl")
    data = Dataset.from_parquet(str(launch.data))
    assert len(data) == 6 and {"prompt", "agent_name", "extra_info", "data_source", "reward_model"} <= set(data.column_names)
    [entry] = json.loads(launch.agent_loops.read_text())
    assert entry == {"name": AGENT_NAME, "_target_": "kernelcraft.train.verl_adapter.KernelAgentLoop"}
    # verl imports the reward file by path, outside any package
    spec = importlib.util.spec_from_file_location("custom_module", launch.reward)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.compute_score is compute_score
    script = launch.script.read_text()
    assert subprocess.run(["bash", "-n", str(launch.script)]).returncode == 0
    assert "ray job submit --address=http://head:8265" in script and "${KERNELCRAFT_JUDGE_TOKEN:?" in script
    for override in ("algorithm.adv_estimator=rloo", "trainer.nnodes=2", "trainer.n_gpus_per_node=8",
                     f"actor_rollout_ref.model.path={cfg.model}", "actor_rollout_ref.rollout.mode=async",
                     f"actor_rollout_ref.rollout.agent.agent_loop_config_path={launch.agent_loops}",
                     f"custom_reward_function.path={launch.reward}", "trainer.save_freq=10"):
        assert override in launch.overrides and override in script


def test_an_estimator_that_undoes_role_weights_is_refused(tmp_path: Path) -> None:
    cfg = config(tmp_path, advantages={"roles": {"coder": {"estimator": "grpo", "weight": 1.0}}})
    with pytest.raises(RLConfigError, match="role weights"):
        prepare_verl(cfg, tmp_path / "verl")


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Iterator[Service]:
    with Service(tmp_path_factory.mktemp("svc") / "ws", cache_dir, workers=2) as s:
        yield s
        s.stop()


def test_compute_score_judges_through_the_service(service: Service, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    cfg = config(tmp_path, judge_url=service.url)
    task = resolve_task(cfg.tasks[0])
    [row] = role_rows([task], ["coder"], cfg)
    info = row["extra_info"]
    assert compute_score("kernelcraft", "no code here", "", info) == 0.0  # nothing to judge
    assert compute_score("kernelcraft", fenced(WRONG_KERNEL), "", info) == 0.0
    slow = compute_score("kernelcraft", fenced(SLOW_KERNEL), "", info)
    # correct, with its own kernels doing the work: more than correctness alone, less than a speedup would earn
    ceiling = REWARD.correct_weight + REWARD.coverage_weight + REWARD.speedup_weight
    assert REWARD.correct_weight + REWARD.coverage_weight * 0.9 < slow < ceiling


class ScriptedClient:
    """A judge service client answering each evaluation with the next verdict of a script, by hand."""

    def __init__(self, *verdicts: Verdict) -> None:
        self.verdicts, self.fresh = list(verdicts), []

    def evaluate(self, task: str | None, source: str, *, fresh: bool, **submit: object) -> Verdict:
        self.fresh.append(fresh)
        return self.verdicts.pop(0)


LOST = Verdict(status=Status.JUDGE_ERROR, task="t", device="cpu", message="the trusted process ran out of memory")
GOOD = Verdict(status=Status.CORRECT, task="t", device="cpu", speedup=2.0, significant=True, coverage=0.9)


def test_compute_score_asks_again_after_a_judge_error_and_never_scores_one(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = config(tmp_path, judge_url="http://judge:1")
    [row] = role_rows([resolve_task(cfg.tasks[0])], ["coder"], cfg)
    info = row["extra_info"]
    client = ScriptedClient(LOST, GOOD)
    monkeypatch.setattr(verl_adapter, "_client", lambda url, token_env: client)
    assert compute_score("kernelcraft", fenced(SLOW_KERNEL), "", info) == pytest.approx(0.5 + 0.5 * 2.0 + 0.5 * 0.9)
    assert client.fresh == [False, True]  # the second time judged anew, not the stored judge_error handed back
    client = ScriptedClient(LOST, LOST)
    with pytest.raises(JudgeFailed, match="the judge failed on its side twice .*ran out of memory"):
        compute_score("kernelcraft", fenced(SLOW_KERNEL), "", info)


def test_a_sample_without_a_reward_is_masked_out_of_verls_loss() -> None:
    episode = Episode("t", "t|coder", 0, [])
    rewarded = RoleSample("coder", [1], [2, 3, 4], [1, 0, 1], 2.0, episode)
    assert loop_reward(rewarded, 0.5) == ([1, 0, 1], 1.0)
    # every turn rejected (judge errors): no gradient, and its 0 is only the others' baseline
    unrewarded = RoleSample("coder", [1], [2, 3, 4], [1, 0, 1], None, episode)
    assert loop_reward(unrewarded, 0.5) == ([0, 0, 0], 0.0)


def test_the_agent_loop_registers_with_verl() -> None:
    pytest.importorskip("verl")
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry

    assert _agent_loop_registry[AGENT_NAME] == {"_target_": "kernelcraft.train.verl_adapter.KernelAgentLoop"}


def test_train_rl_with_verl_writes_the_launch_or_names_the_extra(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    (tmp_path / "rl.toml").write_text(f'model = "{cfg.model}"\ntasks = ["leaky_relu_clamp"]\noutput_dir = "out"\n')
    p = kc("train", "rl", "--engine", "verl", "--config", "rl.toml", cwd=tmp_path)
    if importlib.util.find_spec("verl") is None:
        assert "pip install 'kernelcraft[verl]'" in one_line_error(p)
    else:
        assert p.returncode == 0, p.stderr
        assert (tmp_path / "out" / "verl" / "launch.sh").is_file()
