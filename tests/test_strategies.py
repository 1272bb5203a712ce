"""Each search strategy end to end on CPU: a scripted model on a loopback endpoint, the real judge,
the store; what each strategy shows the model, how it records its decisions, and resume."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path
from typing import Any

from kernelcraft.search import Outcome
from kernelcraft.search.contrastive import pick_exemplars, score_buckets
from kernelcraft.search.evolve import Member, Population
from kernelcraft.search.features import archive_cell

from .fake_openai import FakeOpenAI
from .scripted import FAST, SLOW, WRONG, fenced, restyled, role
from .test_cli import FAST_RUN_TOML, kc

TASK = "leaky_relu_clamp"


def _setup(tmp_path: Path) -> list[str]:
    (tmp_path / "fast.toml").write_text(FAST_RUN_TOML)
    return [TASK, "--model", "fake-coder", "--device", "cpu", "--config", "fast.toml", "--json"]


def _attempts(tmp_path: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(tmp_path / "ws" / "kernelcraft.db") as c:
        c.row_factory = sqlite3.Row
        return [dict(r) | {"meta": json.loads(r["meta_json"])} for r in c.execute("SELECT * FROM attempts ORDER BY sample, turn")]


def _verdict_count(tmp_path: Path) -> int:
    with sqlite3.connect(tmp_path / "ws" / "kernelcraft.db") as c:
        return c.execute("SELECT count(*) FROM verdicts").fetchone()[0]


IDEAS = ["Fuse the activation and the clamp into one pass", "Scale the output by 1.5 for better rounding"]


def _branch_model(messages: list[dict[str, Any]]) -> str:
    if role(messages) == "planner":
        return 'My plan:\n```json\n{"ideas": ["%s", "%s"]}\n```' % tuple(IDEAS)
    task = messages[1]["content"]
    if IDEAS[1] in task:
        return fenced(WRONG)
    return fenced(restyled(FAST, "round two" if "Start from this kernel" in task else "round one"))


def test_branch_plans_ideas_implements_them_and_resumes(tmp_path: Path, cache_dir: Path) -> None:
    args = ["optimize", *_setup(tmp_path), "--strategy", "branch", "--turns", "2", "--width", "2", "--impls", "1"]
    with FakeOpenAI(models=["fake-coder"], responder=_branch_model) as srv:
        # one evaluation allowed: the run stops inside round one, recorded, resumable
        p = kc(*args, "--base-url", srv.url, "--budget-judge-calls", "1", cwd=tmp_path, cache=cache_dir)
        assert p.returncode == 3, p.stdout + p.stderr
        assert "judge budget is spent" in p.stderr and "--resume" in p.stderr
        run_id = json.loads(p.stdout)["run_id"]
        planned_first = sum(1 for r in srv.requests if role(r["messages"]) == "planner")
        p = kc("optimize", "--resume", run_id, "--budget-judge-calls", "10", "--json", cwd=tmp_path, cache=cache_dir)
        assert p.returncode == 0, p.stdout + p.stderr
        requests = list(srv.requests)
    (task,) = json.loads(p.stdout)["tasks"]
    assert task["speedup"] is not None and task["attempts"] == 4
    planner = [r["messages"] for r in requests if role(r["messages"]) == "planner"]
    assert planned_first == 1 and len(planner) == 2  # round one's ideas were saved, not asked for again
    second = planner[1][1]["content"]  # round two is told what each idea reached
    assert f"- {IDEAS[0]} → " in second and "x" in second.split(IDEAS[0])[1].splitlines()[0]
    assert f"- {IDEAS[1]} → no correct kernel (incorrect)" in second and "The best kernels so far" in second
    rows = _attempts(tmp_path)
    assert [(r["sample"], r["turn"], r["status"]) for r in rows] == [
        (0, 0, "correct"), (0, 1, "correct"), (1, 0, "incorrect"), (1, 1, "incorrect")]
    assert rows[0]["meta"]["idea"] == IDEAS[0] and rows[1]["meta"]["seed_speedup"] is not None
    assert _verdict_count(tmp_path) == 2  # restyled copies of one kernel are judged once


CONTRASTIVE_ANSWER = ("## Performance analysis\nThe faster one is built with optimization.\n## Algorithm design\n"
                      "Keep the fused loop, vectorized.\n## Code\n" + fenced(restyled(FAST, "contrastive"), ""))


def _contrastive_model(plain: list[int]) -> Any:
    """Round one: the fast kernel, then slow ones; a contrastive prompt gets the three-part answer."""
    def model(messages: list[dict[str, Any]]) -> str:
        if "code 1 (" in messages[1]["content"]:
            return CONTRASTIVE_ANSWER
        plain.append(1)
        return fenced(FAST if len(plain) == 1 else SLOW)
    return model


def _evolve_model(fresh: list[int]) -> Any:
    """One island starts wrong, the other slow. Children of the model's parents: a repaired wrong kernel
    is the fast one; a mutation or a crossover of correct kernels is the fast one restyled."""
    def model(messages: list[dict[str, Any]]) -> str:
        task = messages[1]["content"]
        if "Combine the strengths" in task:
            return fenced(restyled(FAST, "crossover"))
        if "Improve this kernel" in task:
            return fenced(FAST if "1.5 *" in task else restyled(FAST, "mutation"))
        fresh.append(1)
        return fenced(WRONG if len(fresh) == 1 else SLOW)
    return model


def _stop_then_resume(tmp_path: Path, cache_dir: Path, args: list[str], model: Any, judge_calls: int) -> tuple[list[Any], dict[str, Any]]:
    """Run with a judge budget that stops the search part way, resume it with room to finish: the
    model requests of both invocations, in order, and the resumed run's JSON."""
    with FakeOpenAI(models=["fake-coder"], responder=model) as srv:
        p = kc(*args, "--base-url", srv.url, "--budget-judge-calls", str(judge_calls), cwd=tmp_path, cache=cache_dir)
        assert p.returncode == 3 and "judge budget is spent" in p.stderr, p.stdout + p.stderr
        run_id = json.loads(p.stdout)["run_id"]
        p = kc("optimize", "--resume", run_id, "--budget-judge-calls", "50", "--json", cwd=tmp_path, cache=cache_dir)
        assert p.returncode == 0, p.stdout + p.stderr
        return [r["messages"] for r in srv.requests], json.loads(p.stdout)


def test_contrastive_shows_two_scored_exemplars_asks_for_three_parts_and_resumes(tmp_path: Path, cache_dir: Path) -> None:
    plain: list[int] = []
    args = ["optimize", *_setup(tmp_path), "--strategy", "contrastive", "--turns", "2", "--samples", "2"]
    requests, _ = _stop_then_resume(tmp_path, cache_dir, args, _contrastive_model(plain), judge_calls=1)
    contrast = [m[1]["content"] for m in requests if "code 1 (" in m[1]["content"]]
    assert len(contrast) == 2  # round two: both samples see the two kernels of round one, slower first
    first, second = (float(contrast[0].split(f"code {i} (")[1].split("x)")[0]) for i in (1, 2))
    assert first < second and "## Performance analysis" in contrast[0] and "## Algorithm design" in contrast[0]
    rows = _attempts(tmp_path)
    assert [(r["sample"], r["turn"]) for r in rows] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert len(plain) <= 3  # the slot judged before the stop is replayed, not asked again
    round_two = [r for r in rows if r["turn"] == 1]
    assert all(r["meta"]["sections"] == ["performance analysis", "algorithm design", "code"] for r in round_two)
    assert all(len(r["meta"]["exemplars"]) == 2 for r in round_two)  # the exemplars include the pre-stop kernel


def test_evolve_islands_mutate_repair_migrate_and_resume(tmp_path: Path, cache_dir: Path) -> None:
    fresh: list[int] = []
    args = ["optimize", *_setup(tmp_path), "--strategy", "evolve", "--generations", "6", "--islands", "2",
            "--parallel", "1", "--migrate-every", "4", "--crossover", "0.5"]
    _, out = _stop_then_resume(tmp_path, cache_dir, args, _evolve_model(fresh), judge_calls=2)
    (task,) = out["tasks"]
    assert task["speedup"] is not None and task["attempts"] == 6
    rows = _attempts(tmp_path)
    assert len(rows) == 6 and len(fresh) == 2  # both islands' founders were rebuilt from the store, not asked again
    ops = [r["meta"]["op"] for r in rows]
    assert ops[:2] == ["fresh", "fresh"] and ops.count("fresh") == 2 and "repair" in ops
    assert {"mutation", "crossover"} & set(ops)
    assert {r["meta"]["island"] for r in rows} == {0, 1}
    assert all(r["meta"]["parents"] for r in rows if r["meta"]["op"] != "fresh")


def _outcome(speedup: float, vid: int) -> Outcome:
    return Outcome("correct", speedup, "", f"src{vid}", vid)


def test_exemplars_come_from_two_buckets_weighted_by_score() -> None:
    kernels = [_outcome(s, i) for i, s in enumerate([0.5, 0.6, 1.0, 1.1, 2.0, 2.2, 4.0, 4.4])]
    groups = score_buckets(kernels, 4)
    assert [len(g) for g in groups] == [2, 2, 2, 2] and groups[0][0].speedup == 0.5
    rng = random.Random(0)
    picks = [pick_exemplars(kernels, 4, 0.5, rng) for _ in range(400)]
    assert all(a.speedup < b.speedup for a, b in picks)
    bucket = {o.verdict_id: i for i, g in enumerate(groups) for o in g}
    assert all(bucket[a.verdict_id] != bucket[b.verdict_id] for a, b in picks)
    top = sum(1 for _, b in picks if bucket[b.verdict_id] == 3)
    low = sum(1 for a, _ in picks if bucket[a.verdict_id] == 0)
    assert top > 300 and low < top  # a low temperature favours the fast buckets
    assert pick_exemplars(kernels[:1], 4, 1.0, rng) is None


def test_the_archive_keeps_one_kernel_per_cell_and_migration_moves_the_best() -> None:
    pop = Population([[], []])
    pop.add(Member(0, 0, _outcome(1.1, 1)), migrate_every=100)
    pop.add(Member(1, 0, _outcome(1.3, 2)), migrate_every=100)  # same cell (band 1-1.5x): the better stays
    assert len(pop.archive) == 1 and next(iter(pop.archive.values())).outcome.verdict_id == 2
    shared = Outcome("correct", 2.0, "", "x = __shared__", 3)
    pop.add(Member(2, 0, shared), migrate_every=3)  # a new cell; the third child triggers migration
    assert len(pop.archive) == 2 and archive_cell(shared.source, 2.0)[1] == ("shared-memory",)
    assert [m.outcome.verdict_id for m in pop.islands[1]] == [3]
