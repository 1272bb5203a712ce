"""The RL environment on the real CPU judge: coder turns judged, rewarded and fed back; the selector's
picks in the coder's prompt; the summarizer's turn when the trajectory improved, with its draft verified;
the token-level driver the engines use. The task's reference works row by row (hundreds of small eager
calls), so a one-launch Triton kernel beats it even in Triton's interpreter, and a many-launch one does not."""

from __future__ import annotations

import json
from typing import Any, Iterator

import pytest

from kernelcraft.agents import Coder
from kernelcraft.judge import Judge, JudgeConfig, Status, TaskRules, Verdict
from kernelcraft.skills import seed_skills
from kernelcraft.tasks import Task, task_from_source
from kernelcraft.train.advantages import AdvantageConfig, assign_advantages
from kernelcraft.train.config import EnvConfig
from kernelcraft.train.env import KernelEnv, chat_ids, play
from kernelcraft.train.verdicts import ReusedVerdicts
from kernelcraft.train.rewards import RewardConfig, coder_reward

from .conftest import FAST

TASK_SOURCE = '''
import torch
import torch.nn as nn

ROWS = 2048
COLS = 16


class Model(nn.Module):
    """Doubles the positive part, one row at a time: thousands of small operator calls in eager PyTorch."""

    def forward(self, x):
        return torch.stack([torch.relu(row) * 2.0 for row in x])


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
'''

KERNEL = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu2_kernel(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(o_ptr + offs, tl.maximum(x, 0.0) * SCALE, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        relu2_kernel[(triton.cdiv(n, BLOCKSIZE),)](x, out, n, BLOCK=BLOCKSIZE)
        return out
'''
FAST_KERNEL = KERNEL.replace("BLOCKSIZE", "32768").replace("SCALE", "2.0")  # one launch: several times the reference
SLOW_KERNEL = KERNEL.replace("BLOCKSIZE", "256").replace("SCALE", "2.0")  # 128 launches: several times slower than the reference
WRONG_KERNEL = KERNEL.replace("BLOCKSIZE", "32768").replace("SCALE", "3.0")
# Wins above 3x are re-timed by the judge before it believes them, and a reference slowed next to the
# candidate is a reject: not what these tests are about (the red-team cases test that rule). With every
# core busy a long call (the reference, ~15 ms) is preempted more than a short one (~3 ms): next to
# red-team tests on two cores the fast kernel measured 6.7x instead of ~3.6x, its reference flagged
# slowed_reference, close to the reject a CI run met.
JUDGE = FAST.with_overrides({"timing": {"remeasure_above": 100.0}, "slowed_reference_reject": 1000.0})
REWARD = RewardConfig(remeasure_above=100.0)


def fenced(source: str) -> str:
    return f"Here is the kernel.\n\n```python\n{source}```\n"


def rowwise_task() -> Task:
    return task_from_source(TASK_SOURCE, "rowwise_relu2")


@pytest.fixture(scope="module")
def verdicts(cache_dir: Any) -> Iterator[ReusedVerdicts]:
    """One judge for the module; each distinct kernel is judged once."""
    judge = Judge("cpu", cache_dir=cache_dir, config=JUDGE)
    yield ReusedVerdicts(judge)
    judge.close()


def env_config(**values: Any) -> EnvConfig:
    return EnvConfig(language="triton", device="cpu", reward=REWARD, **values)


def test_coder_turns_are_judged_rewarded_and_fed_back(verdicts: ReusedVerdicts) -> None:
    task = rowwise_task()
    env = KernelEnv(task, verdicts, env_config(max_turns=3))
    obs = env.reset()
    assert obs.role == "coder" and not obs.phase
    rules = TaskRules.of(JudgeConfig(), task, "cpu")
    assert obs.messages == [{"role": m.role, "content": m.content} for m in env.coder.opening(task, rules)]

    first = env.step("I would fuse the loop, but here is no code.")
    assert (first.role, first.reward, first.done, first.info["status"]) == ("coder", 0.0, False, "parse_failed")
    assert "could not be used" in first.observation.messages[-1]["content"]

    second = env.step(fenced(WRONG_KERNEL))
    assert (second.reward, second.done, second.info["status"]) == (0.0, False, "incorrect")
    assert second.observation.messages[-1]["content"] == Coder.feedback(second.info["verdict"]).content
    assert [m["role"] for m in second.observation.messages] == ["system", "user", "assistant", "user", "assistant", "user"]

    third = env.step(fenced(SLOW_KERNEL))
    verdict = third.info["verdict"]
    assert verdict.correct and third.done and third.observation is None  # no summary: the first turn was not correct
    assert third.reward == pytest.approx(coder_reward(verdict, REWARD).value) and third.reward > REWARD.correct_weight
    with pytest.raises(RuntimeError):
        env.step(fenced(FAST_KERNEL))

    episode = env.episode()
    assert [t.role for t in episode.trajectories] == ["coder"] and episode.group == task.key
    steps = episode.trajectory("coder").steps
    assert [s.status for s in steps] == ["parse_failed", "incorrect", "correct"]
    assert [s.reward for s in steps] == [0.0, 0.0, third.reward] and steps[2].speedup == verdict.effective_speedup
    assert steps[1].prompt == second.observation.messages[:4]


def test_an_improving_trajectory_gets_a_summary_whose_draft_is_verified(verdicts: ReusedVerdicts) -> None:
    env = KernelEnv(rowwise_task(), verdicts, env_config(max_turns=2))
    env.reset()
    slow = env.step(fenced(SLOW_KERNEL))
    fast = env.step(fenced(FAST_KERNEL))
    assert fast.info["status"] == "correct", fast.info["verdict"].message
    assert slow.info["speedup"] <= 1.0 and fast.info["speedup"] > 1.5 * max(slow.info["speedup"], 1.0)
    obs = fast.observation
    assert obs.role == "summarizer" and "You distil reusable" in obs.messages[0]["content"]
    assert SLOW_KERNEL.strip() in obs.messages[1]["content"] and FAST_KERNEL.strip() in obs.messages[1]["content"]

    draft = {"name": "One launch for small rows", "description": "Process the whole tensor in one program.",
             "scope": "row-wise elementwise work", "tags": ["elementwise"], "content": "Flatten the rows; one launch."}
    summary = env.step(f"```json\n{json.dumps({'skills': [draft]})}\n```")
    assert summary.role == "summarizer" and not summary.done
    verify = summary.observation
    assert (verify.role, verify.phase) == ("coder", "verify") and "### one-launch-for-small-rows" in verify.messages[0]["content"]

    end = env.step(fenced(FAST_KERNEL))  # the kernel regenerated with the draft in the prompt
    assert end.done and end.info["admitted"] is True
    episode = env.episode()
    assert [t.role for t in episode.trajectories] == ["coder", "summarizer"]
    assert len(episode.trajectory("coder").steps) == 2  # the verification turn is no coder sample
    step = episode.trajectory("summarizer").steps[0]
    gain = min(fast.info["speedup"] / slow.info["speedup"], REWARD.speedup_cap)
    assert step.reward == pytest.approx(REWARD.admitted_weight + REWARD.gain_weight * gain) == end.info["summarizer_reward"]
    assert step.info["skill"]["name"] == "one-launch-for-small-rows"


def test_the_selectors_picks_reach_the_coders_prompt_and_its_reward_is_the_coders_return(verdicts: ReusedVerdicts) -> None:
    task = rowwise_task()
    episodes = []
    for sample, pick in enumerate(("fuse-elementwise-epilogue", "no-such-skill")):
        env = KernelEnv(task, verdicts, env_config(max_turns=1), skills=seed_skills(), sample=sample)
        obs = env.reset()
        assert obs.role == "selector" and "You choose which optimization techniques" in obs.messages[0]["content"]
        assert "fuse-elementwise-epilogue" in obs.messages[1]["content"]  # recalled by BM25 for an elementwise task
        picked = env.step(json.dumps({"skills": [{"name": pick, "reason": "it is elementwise"}]}))
        chosen = [pick] if pick != "no-such-skill" else []
        assert picked.role == "selector" and picked.info["skills"] == chosen
        assert ("### fuse-elementwise-epilogue" in picked.observation.messages[0]["content"]) == bool(chosen)
        coded = env.step(fenced(FAST_KERNEL if chosen else WRONG_KERNEL))
        assert coded.info["status"] == ("correct" if chosen else "incorrect"), coded.info["verdict"].message
        episodes.append(env.episode())
    with_skill, without = episodes
    coder = with_skill.trajectory("coder")
    assert coder.total_reward > 0 and with_skill.trajectory("selector").steps[0].reward == pytest.approx(coder.total_reward)
    assert without.trajectory("selector").steps[0].reward == 0.0
    assert coder.group == f"{task.key}#fuse-elementwise-epilogue" and without.trajectory("coder").group == f"{task.key}#none"

    assign_advantages(episodes, AdvantageConfig())  # the selector's samples share the task's group
    assert with_skill.trajectory("selector").steps[0].advantage == pytest.approx(coder.total_reward)


class JudgeDown:
    """An evaluator that fails on its own side (a full disk): every verdict a judge_error."""

    def __init__(self) -> None:
        self.asked = 0

    def evaluate(self, task: Task, source: str) -> Verdict:
        self.asked += 1
        return Verdict(status=Status.JUDGE_ERROR, task=task.key, device="cpu", message="no space left on device")


def test_turns_the_judge_failed_on_are_rejected_and_so_is_a_selection_it_never_judged() -> None:
    judge = JudgeDown()
    env = KernelEnv(rowwise_task(), judge, env_config(max_turns=2), skills=seed_skills())
    assert env.reset().role == "selector"
    env.step(json.dumps({"skills": [{"name": "fuse-elementwise-epilogue", "reason": "it is elementwise"}]}))
    first = env.step(fenced(FAST_KERNEL))
    assert (first.info["status"], first.info["reason"], first.reward) == ("judge_error", "judge_error", 0.0)
    last = env.step(fenced(FAST_KERNEL))
    assert last.done and judge.asked == 2
    episode = env.episode()
    coder, selector = episode.trajectory("coder"), episode.trajectory("selector")
    assert [(s.status, s.rejected) for s in coder.steps] == [("judge_error", True)] * 2
    assert selector.steps[0].rejected  # no kernel of its selection was judged: no evidence either way
    assign_advantages([episode], AdvantageConfig())
    assert all(s.advantage == 0.0 for t in episode.trajectories for s in t.steps)
    # a judge_error is no verdict to hand out again: the same candidate is judged anew
    reused = ReusedVerdicts(judge)
    for _ in range(2):
        assert reused.evaluate(rowwise_task(), FAST_KERNEL).status is Status.JUDGE_ERROR
    assert judge.asked == 4 and reused.evaluations == 2


class WordTokenizer:
    """A chat template over whitespace words, enough to check the token bookkeeping of `play`."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {"<end>": 0}

    def ids(self, text: str) -> list[int]:
        return [self.vocab.setdefault(w, len(self.vocab)) for w in text.split()]

    def apply_chat_template(self, conversation: list[dict[str, str]], add_generation_prompt: bool = False,
                            tokenize: bool = True) -> list[int]:
        text = " ".join(f"<{m['role']}> {m['content']} <end>" for m in conversation)
        return self.ids(text + (" <assistant>" if add_generation_prompt else ""))

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        words = {i: w for w, i in self.vocab.items()}
        return " ".join(words[i] for i in ids)


def test_play_records_the_trained_roles_tokens_with_the_feedback_masked(verdicts: ReusedVerdicts) -> None:
    tokenizer = WordTokenizer()
    replies = iter(["no code at all", "still nothing"])

    def generate(batch: list[list[int]]) -> list[list[int]]:
        return [tokenizer.ids(next(replies)) for _ in batch]

    env = KernelEnv(rowwise_task(), verdicts, env_config(max_turns=2))
    [sample] = play([env], "coder", generate, tokenizer, end_id=0)
    first, second = tokenizer.ids("no code at all"), tokenizer.ids("still nothing")
    assert sample.prompt_ids == chat_ids(tokenizer, env.episode().trajectory("coder").steps[0].prompt, True)
    feedback = sample.completion_ids[len(first):-len(second)]
    assert sample.completion_ids[:len(first)] == first and sample.completion_ids[-len(second):] == second
    assert sample.mask == [1] * len(first) + [0] * len(feedback) + [1] * len(second)
    assert "could not be used" in tokenizer.decode(feedback) and tokenizer.decode(feedback).endswith("<assistant>")
    assert sample.reward == 0.0 and [s.status for s in sample.episode.trajectory("coder").steps] == ["parse_failed"] * 2


def test_repeated_candidates_are_judged_once_and_outsized_wins_measured_again(verdicts: ReusedVerdicts) -> None:
    counted = ReusedVerdicts(verdicts)  # counts what reaches the module's judge through it
    # Any speedup counts as outsized here: on a busy host the fast kernel's ~3.6x has been measured within
    # noise (1.0x) or, with its reference flagged slowed_reference, at 1.1x or less over the reference
    # alone (two CI runs), and below the threshold there is nothing to measure again.
    cfg = env_config(max_turns=1).model_copy(update={"reward": RewardConfig(remeasure_above=1e-6)})
    for note in ("first", "second"):
        env = KernelEnv(rowwise_task(), counted, cfg)
        result = env.step(fenced(f"# {note} try\n" + FAST_KERNEL.replace("    def forward", "    def forward  ", 1)))
        assert result.info["status"] == "correct", result.info["verdict"].message
        assert result.info["reason"] == "remeasured"
    assert counted.evaluations == 2  # one verdict and one re-measurement, both reused by the second episode
