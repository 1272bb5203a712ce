"""`kernelcraft bench` end to end on the CPU: five arms (refine, branch, contrastive, evolve, refine with skills) over
two example tasks at two judge calls per task, the real judge, each arm in its own workspace. Through a loopback
OpenAI-compatible endpoint the bench finishes in one invocation; through batch files it goes round by round, one
request file per round across all arms, answered here as a helper would, the workspace moved to another path between
rounds. Every arm stays within its budget; the table, the page and the plot are written; bad arms are one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kernelcraft.bench import COMPILED, DEFAULTS, ArmError, check_arms, gather, load_spec, load_state, parse_arm
from kernelcraft.report import EAGER
from kernelcraft.search import SearchConfig
from kernelcraft.tasks import resolve_target
from kernelcraft.judge import TimingStats
from kernelcraft.store import Store

from .bench_model import TASKS, answer, answer_round, suite
from .fake_openai import FakeOpenAI
from .test_cli import FAST_RUN_TOML, kc, one_line_error

ARMS = ["refine", "branch", "contrastive", "evolve", "refine+skills"]
BUDGET = 2
PNG = b"\x89PNG\r\n\x1a\n"
# The fast judge, with one correctness seed and no second shape: the tests check the bench, not the kernels.
BENCH_TOML = FAST_RUN_TOML.replace("[judge]\n", "[judge]\nseeds = 1\nsecond_shape = false\n", 1)


def _setup(tmp_path: Path, arms: list[str]) -> list[str]:
    """The suite and the fast judge's run file in `tmp_path`; the bench's arguments."""
    (tmp_path / "fast.toml").write_text(BENCH_TOML)
    suite(tmp_path / "suite")
    return ["bench", "suite", *(w for arm in arms for w in ("--arm", arm)), "--task-judge-calls", str(BUDGET), "--device",
            "cpu", "--config", "fast.toml", "--workers", "2", "--json"]


def _check_finished(out: dict, workspace: Path, arms: list[str]) -> None:
    """Every arm finished both tasks within its budget, each with verdicts of its own; the page and plot are written."""
    assert [a["arm"] for a in out["arms"]] == arms and all(a["finished"] for a in out["arms"]), out["arms"]
    rows = {r["arm"]: r for r in out["rows"]}
    assert set(rows) == set(arms) and all(r["level"] == "all" for r in out["rows"])
    for arm, row in rows.items():
        assert row["summary"]["total"] == len(TASKS) and 1 <= row["most_judge_calls"] <= BUDGET, (arm, row)
        with Store(workspace / "arms" / arm) as store:
            (run,) = store.runs()
            assert all(store.judge_calls(run.id, key) <= BUDGET for key in TASKS)
            assert store.judge_calls(run.id) == row["judge_calls"] > 0
    page = workspace.parent / out["page"]  # as -w gave it: relative to where the bench ran, or absolute
    assert page.resolve() == (workspace / "results" / "bench.md").resolve() and (page.parent / "fast1-per-judge-call.png").read_bytes()[:8] == PNG
    text = page.read_text()
    assert all(f"| {arm} | all |" in text for arm in arms) and "fast_1 against eager (strict) per judge call" in text
    assert json.loads((page.parent / "bench.json").read_text())["judge_calls"] == BUDGET
    # no baselines timed here (conftest: KERNELCRAFT_BASELINES=0): those columns say why
    assert "not timed" in out["missing"][COMPILED] and "not timed" in out["missing"][DEFAULTS]


def test_arms_on_a_loopback_model_finish_in_one_invocation_within_their_budget(tmp_path: Path, cache_dir: Path) -> None:
    arms = ["refine", "evolve"]  # the batch test below runs all five; here, what a live endpoint adds
    args = _setup(tmp_path, arms)
    with FakeOpenAI(models=["fake-coder"], responder=answer) as srv:
        p = kc(*args, "--model", "fake-coder", "--base-url", srv.url, "--price", "fake-*=1,2", "-w", "ws", cwd=tmp_path,
               cache=cache_dir)
        assert p.returncode == 0, p.stdout + p.stderr
        out = json.loads(p.stdout)
        _check_finished(out, tmp_path / "ws", arms)
        assert all(r["tokens"] > 0 and r["cost_usd"] > 0 for r in out["rows"])
        asked = len(srv.requests)
        # the same command again: the same bench, finished, so nothing more is asked
        again = kc(*args, "--model", "fake-coder", "--base-url", srv.url, "--price", "fake-*=1,2", "-w", "ws", cwd=tmp_path)
        assert again.returncode == 0 and len(srv.requests) == asked, again.stderr
    assert "holds another bench" in one_line_error(kc(*args[:-1], "--arm", "long=refine:turns=4", "--model", "fake-coder",
                                                      "--base-url", "http://127.0.0.1:9/v1", "-w", "ws", cwd=tmp_path))


def test_five_arms_on_batch_files_go_round_by_round_from_a_moved_workspace(tmp_path: Path, cache_dir: Path) -> None:
    args = _setup(tmp_path, ARMS)
    workspace = tmp_path / "ws"
    p = kc(*args, "--model", f"batch:{workspace / 'batch'}:frontier", "-w", "ws", cwd=tmp_path, cache=cache_dir)
    rounds = []
    while p.returncode == 3:
        assert len(rounds) < 8, p.stderr
        files = sorted((workspace / "batch").glob("round-*.requests.jsonl"))
        assert len(files) == len(rounds) + 1, p.stderr  # each stop wrote one round, across every arm
        assert f"in {files[-1].name} (written now)" in p.stderr and "kernelcraft bench --resume -w" in p.stderr
        lines = [json.loads(line) for line in files[-1].read_text().splitlines()]
        rounds.append({line["custom_id"].split("/")[0] for line in lines})
        answer_round(files[-1])
        moved = tmp_path / f"moved-{len(rounds)}" / "ws"  # carried to another machine and path
        moved.parent.mkdir()
        shutil.move(workspace, moved)
        workspace = moved
        p = kc("bench", "--resume", "-w", str(workspace), "--json", cwd=tmp_path)
        assert "resuming: batch" in p.stderr, p.stderr
    assert p.returncode == 0, p.stdout + p.stderr
    assert rounds[0] == set(ARMS)  # every arm asked in the first round: planner, selector, coders
    assert 2 <= len(rounds) <= 4, rounds
    out = json.loads(p.stdout)
    _check_finished(out, workspace, ARMS)
    assert all(r["tokens"] > 0 and r["cost_usd"] is None for r in out["rows"])  # no --price: no dollars

    # Baselines as a GPU would record them (torch.compile on this CPU is slow): torch.compile twice eager's time, so a
    # kernel beats it when it is above 0.5x of eager (strict).
    device_name = load_state(workspace).device_name
    with Store(workspace) as store:
        for key in TASKS:
            for kind, ms in ((EAGER, 1.0), (DEFAULTS, 1.5), (COMPILED, 2.0)):
                store.record_baseline(key, "cpu", device_name, kind, TimingStats.of([ms]), "")
    results = gather(workspace, load_spec(workspace), load_state(workspace))
    assert not results.missing and results.plotted == COMPILED
    for arm in ARMS:
        row = results.row(arm)
        assert row is not None and row.fast_1(COMPILED) == row.summary.eager.fast_p[0.5]
        if row.summary.correct:
            assert row.geomean(COMPILED) == pytest.approx(2.0 * row.geomean(EAGER))
        curve = results.curve(arm, COMPILED)
        assert curve is not None and len(curve.fast_1) == BUDGET and curve.fast_1[-1] == row.fast_1(COMPILED)
        assert curve.fast_1 == sorted(curve.fast_1)  # the best so far never gets worse


@pytest.mark.parametrize("arm, words", [
    ("refinee", "--arm 'refinee': unknown strategy 'refinee': use one of branch, contrastive, evolve, refine, template"),
    ("refine:width=2", "--arm 'refine:width=2': refine takes no option 'width' (it takes turns, samples, start, seed"),
    ("branch:width=0", "--arm 'branch:width=0': width (branch.width) must be >= 1"),
    ("evolve:crossover=lots", "--arm 'evolve:crossover=lots': crossover (evolve.crossover): Input should be a valid number"),
    ("refine:start=middle", "--arm 'refine:start=middle': start: Input should be 'scratch' or 'best'"),
    ("refine:skills=maybe", "--arm 'refine:skills=maybe': skills='maybe': use on or off"),
    ("refine:turns", "--arm 'refine:turns': 'turns' is no KEY=VALUE"),
    ("refine+tools", "--arm 'refine+tools': after '+' only 'skills'"),
    ("a/b=refine", "an arm's name is letters, digits and . _ + - (it names a directory), not 'a/b'"),
    ("template", "--arm 'template': leaky_relu_clamp is not a GEMM task"),
])
def test_a_bad_arm_is_one_line(tmp_path: Path, arm: str, words: str) -> None:
    tasks = resolve_target(str(suite(tmp_path / "suite")))
    with pytest.raises(ArmError) as caught:
        check_arms([parse_arm(arm)], tasks)
        parse_arm(arm).search(SearchConfig(), BUDGET, None)
    assert words in str(caught.value) and "\n" not in str(caught.value), caught.value


def test_arms_read_their_options_and_are_sized_to_their_budget() -> None:
    arm = parse_arm("wide=branch:width=2,impls=2,skills=on,skills.learn=false")
    assert (arm.name, arm.strategy, arm.skills) == ("wide", "branch", True)
    search = arm.search(SearchConfig(), 5, 1000)
    assert (search.branch.width, search.branch.impls, search.skills.enabled, search.skills.learn) == (2, 2, True, False)
    assert (search.task_judge_calls, search.task_tokens) == (5, 1000)
    assert search.turns == 2 * 2  # two rounds of 4 implementations spend 5 calls: twice that
    assert parse_arm("refine+skills").name == "refine+skills"
    assert parse_arm("evolve").search(SearchConfig(), 5, None).evolve.generations == 10
    assert parse_arm("refine:turns=7").search(SearchConfig(), 5, None).turns == 7  # given: kept
    with pytest.raises(ArmError, match="two arms are named 'refine'"):
        check_arms([parse_arm("refine"), parse_arm("refine:turns=4")], [])
    with pytest.raises(ArmError, match="at least one --arm"):
        check_arms([], [])


@pytest.mark.parametrize("args, words", [
    (["--arm", "refine", "--arm", "refine:width=2"], "error: --arm 'refine:width=2': refine takes no option 'width'"),
    (["--arm", "refine", "--task-judge-calls", "0"], "error: --task-judge-calls and --task-tokens must be at least 1"),
    (["--arm", "refine", "--resume"], "error: a resumed bench keeps its own settings: drop TARGET, --arm, --model"),
])
def test_bench_mistakes_are_one_line_errors_and_leave_no_workspace(tmp_path: Path, args: list[str], words: str) -> None:
    suite(tmp_path / "suite")
    line = one_line_error(kc("bench", "suite", *args, "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--device",
                             "cpu", "-w", "bws", cwd=tmp_path))
    assert line.startswith(words), line
    assert not (tmp_path / "bws").exists()


def test_a_bench_needs_a_target_and_a_resume_needs_a_bench(tmp_path: Path) -> None:
    assert "give a TARGET" in one_line_error(kc("bench", "--arm", "refine", "--model", "m", cwd=tmp_path))
    assert "elsewhere: no bench here (no bench.json)" in one_line_error(kc("bench", "--resume", "-w", "elsewhere", cwd=tmp_path))
    assert not (tmp_path / "elsewhere").exists()


def test_an_arm_restarted_after_a_fix_starts_a_new_run_and_keeps_its_batch_replies(tmp_path: Path) -> None:
    # The first real bench (2026-11-29) found contrastive asking one prompt again and again; once it was fixed, its arm
    # had to start over in the same bench, its first round answered by the replies it already had.
    args = _setup(tmp_path, ["refine", "contrastive"])
    workspace = tmp_path / "ws"
    p = kc(*args, "--model", f"batch:{workspace / 'batch'}:frontier", "-w", "ws", cwd=tmp_path)
    assert p.returncode == 3, p.stderr
    with Store(workspace / "arms" / "contrastive") as store:
        (before,) = store.runs()
    assert "--restart-arm goes with --resume" in one_line_error(kc("bench", "--restart-arm", "contrastive", "-w", "ws", cwd=tmp_path))
    assert "the bench's arms are refine, contrastive" in one_line_error(
        kc("bench", "--resume", "--restart-arm", "branch", "-w", "ws", cwd=tmp_path))
    p = kc("bench", "--resume", "--restart-arm", "contrastive", "-w", "ws", "--json", cwd=tmp_path)
    assert p.returncode == 3, p.stderr
    with Store(workspace / "arms" / "contrastive") as store:
        (after,) = store.runs()
    assert after.id != before.id and load_state(workspace).restarted_arms == ["contrastive"]
    # the restarted arm asked the same requests: still the first round's, no new round written for them
    assert sorted(p.name for p in (workspace / "batch").glob("round-*.requests.jsonl")) == ["round-0001.requests.jsonl"]
    assert "0 requests" not in p.stderr and "contrastive: 4 model replies are not in yet" in p.stderr, p.stderr
