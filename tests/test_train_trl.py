"""GRPO through TRL on the CPU with rewards from the real judge: a tiny randomly initialised Llama, and a
tokenizer built here whose vocabulary holds whole candidates (tokens that decode to a complete fast kernel
in a ```python block, one to a wrong kernel) beside plain words, so a random model's answers get different
verdicts and GRPO's advantages are not all zero. Nothing is downloaded."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("trl")

import torch  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

from kernelcraft.judge import Judge  # noqa: E402
from kernelcraft.train.config import RLConfig, RLConfigError  # noqa: E402
from kernelcraft.train.verdicts import ReusedVerdicts  # noqa: E402
from kernelcraft.train.tiny_model import tiny_model  # noqa: E402
from kernelcraft.judge import Status, TimingStats, Verdict  # noqa: E402
from kernelcraft.tasks import Task  # noqa: E402
from kernelcraft.train.trl_adapter import JudgeReward, grpo_settings, train_grpo  # noqa: E402

from .conftest import ROOT  # noqa: E402
from .test_cli import kc, one_line_error  # noqa: E402
from .test_train_env import FAST_KERNEL, JUDGE, REWARD, TASK_SOURCE, WRONG_KERNEL, env_config, fenced, rowwise_task  # noqa: E402


def checkpoint_with(path: Path) -> Path:
    """The tiny local model; its vocabulary: three spellings of the fast kernel (judged once: they differ
    only in a comment) and one wrong kernel, each a single token."""
    return tiny_model(path, [f"# variant {i}\n{FAST_KERNEL}" for i in range(3)] + [WRONG_KERNEL], hidden=32)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return checkpoint_with(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="module")
def verdicts(cache_dir: Any) -> Iterator[ReusedVerdicts]:
    judge = Judge("cpu", cache_dir=cache_dir, config=JUDGE)
    yield ReusedVerdicts(judge)
    judge.close()


def rl_config(checkpoint: Path, tmp_path: Path, multi_turn: bool) -> RLConfig:
    task_file = tmp_path / "rowwise_relu2.py"
    task_file.write_text(TASK_SOURCE)
    return RLConfig.model_validate({
        "model": str(checkpoint), "tasks": [str(task_file)], "device": "cpu", "output_dir": str(tmp_path / "out"),
        "env": {"language": "triton", "max_turns": 2, "reward": REWARD.model_dump()},
        "trl": {"steps": 2, "num_generations": 8, "batch_size": 8, "learning_rate": 1e-2, "max_completion_length": 4,
                "multi_turn": multi_turn, "use_cpu": True, "bf16": False, "seed": 1},
    })


def weights(path: Path) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in AutoModelForCausalLM.from_pretrained(path).state_dict().items()}


@pytest.mark.parametrize("multi_turn", [True, False], ids=["episodes", "single-turn"])
def test_grpo_steps_on_judge_rewards_move_the_weights(checkpoint: Path, tmp_path: Path, verdicts: ReusedVerdicts,
                                                      multi_turn: bool) -> None:
    cfg = rl_config(checkpoint, tmp_path, multi_turn)
    result = train_grpo(cfg, judge=verdicts)
    assert result.steps == 2 and len(result.losses) == 2 and all(math.isfinite(x) for x in result.losses)
    # the judge was in the loop and disagreed between samples: that is what gives GRPO a gradient
    statuses = {s.status for e in result.episodes for s in e.trajectory("coder").steps}
    assert "correct" in statuses and statuses - {"correct"}
    assert len(result.episodes) == 2 * 8 and {len(e.trajectory("coder").steps) for e in result.episodes} == (
        {2} if multi_turn else {1})
    before, after = weights(checkpoint), weights(result.output_dir)
    assert all(torch.isfinite(v).all() for v in after.values())
    assert any(not torch.equal(before[k], after[k]) for k in before)


class HalfDown:
    """An evaluator that fails on its own side on the fast kernel and passes the others, by hand."""

    def evaluate(self, task: Task, source: str) -> Verdict:
        if source.strip() == FAST_KERNEL.strip():
            return Verdict(status=Status.JUDGE_ERROR, task=task.key, device="cpu", message="a lost device")
        return Verdict(status=Status.CORRECT, task=task.key, device="cpu", speedup=2.0, speedup_band=(1.9, 2.1),
                       significant=True, reference=TimingStats.of([2.0]), candidate=TimingStats.of([1.0]), coverage=0.9)


def test_a_judge_error_is_a_none_reward_that_trl_leaves_out() -> None:
    task = rowwise_task()
    reward = JudgeReward({task.key: task}, HalfDown(), env_config(), workers=1)
    logged: dict[str, float] = {}
    scores = reward(["p", "p"], [fenced(FAST_KERNEL), fenced(WRONG_KERNEL)], [task.key, task.key],
                    log_metric=lambda name, value: logged.__setitem__(name, value))
    assert scores[0] is None and scores[1] > 0  # TRL excludes None from the group's baseline, advantage 0
    assert logged["kernelcraft/correct"] == 1.0  # of the turns the judge judged


def test_estimators_map_to_trls_advantages() -> None:
    assert grpo_settings("rloo", 4) == {"scale_rewards": "none", "reward_weights": [4 / 3]}
    assert grpo_settings("drgrpo", 4)["loss_type"] == "dr_grpo" and grpo_settings("grpo", 4)["scale_rewards"] == "group"
    with pytest.raises(RLConfigError, match="reinforce"):
        grpo_settings("reinforce", 4)


def test_train_rl_runs_grpo_from_a_toml_file(checkpoint: Path, tmp_path: Path, cache_dir: Path) -> None:
    (tmp_path / "rowwise_relu2.py").write_text(TASK_SOURCE)
    timing = "".join(f"{k} = {json.dumps(v)}\n" for k, v in JUDGE.to_dict()["timing"].items())
    (tmp_path / "rl.toml").write_text(f"""
model = "{checkpoint}"
tasks = ["rowwise_relu2.py"]
device = "cpu"
workspace = "ws"
output_dir = "out"

[judge.timing]
{timing}
[env]
language = "triton"
max_turns = 2

[env.reward]
remeasure_above = 100.0

[trl]
steps = 1
num_generations = 8
batch_size = 8
max_completion_length = 4
use_cpu = true
bf16 = false
""")
    p = kc("train", "rl", "--engine", "trl", "--config", "rl.toml", "--json", cwd=tmp_path, cache=cache_dir)
    assert p.returncode == 0, p.stderr[-3000:]
    summary = json.loads(p.stdout)
    assert (summary["steps"], summary["episodes"], summary["judge_evaluations"] > 0) == (1, 8, True)
    assert all(math.isfinite(x) for x in summary["losses"]) and (tmp_path / "out" / "config.json").is_file()


@pytest.mark.parametrize("toml, message", [
    (None, "no such config file"),
    ('model = "m"\ntasks = []\n', "tasks: List should have at least 1 item"),
    ('model = "m"\ntasks = ["softmax_rows"]\n[trl]\nnum_generations = 4\nbatch_size = 6\n', "must be a multiple of"),
    ('model = "m"\ntasks = ["softmax_rows"]\n[judge.timing]\nwarmup = 1\n', "judge: "),
    ('model = "m"\ntasks = ["softmax_rows"\n', "rl.toml: "),
    ('model = "/no/such/model"\ntasks = ["softmax_rows"]\ndevice = "cpu"\n', "no such checkpoint directory"),
    ('model = "m"\ntasks = ["softmax_rows"]\n[trl]\nstepz = 3\n', "trl.stepz: Extra inputs are not permitted"),
    ('model = "m"\ntasks = ["softmax_rows"]\n[judge]\nseeds = 0\n', "seeds = 0: expected a finite number above zero"),
])
def test_train_rl_config_mistakes_are_one_line(tmp_path: Path, toml: str | None, message: str) -> None:
    if toml is not None:
        (tmp_path / "rl.toml").write_text(toml)
    line = one_line_error(kc("train", "rl", "--engine", "trl", "--config", "rl.toml", cwd=tmp_path))
    assert message in line


def test_train_rl_names_the_engines(tmp_path: Path) -> None:
    line = one_line_error(kc("train", "rl", "--engine", "openrlhf", "--config", "rl.toml", cwd=tmp_path))
    assert "use trl or verl" in line


def test_the_example_configs_are_valid() -> None:
    examples = sorted((ROOT / "examples" / "train").glob("*.toml"))
    assert len(examples) >= 3
    for path in examples:
        RLConfig.from_toml(path)
