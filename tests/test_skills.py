"""The skill library: the seed skills, BM25 recall, snapshots, admission rules, the `skills`
commands; and the skill path end to end on CPU with a scripted model that writes the fast kernel
only when a given skill is in its prompt."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from kernelcraft.skills import AdmissionPolicy, Evidence, Skill, SkillLibrary, decide, recall, seed_skills
from kernelcraft.store import Store
from kernelcraft.tasks import resolve_task

from .fake_openai import FakeOpenAI
from .scripted import FAST, SLOW, fenced, role, turn
from .test_cli import FAST_RUN_TOML, kc, one_line_error

TRIGGERS = ("### fuse-elementwise-epilogue", "### single-pass-fused-loop")
GOOD = {"name": "single-pass-fused-loop", "description": "Fuse an activation chain into one loop.", "scope": "elementwise chains",
        "tags": ["elementwise", "fusion"], "content": "Read each element once, apply every operation, write once."}
BOGUS = {"name": "unroll-by-hand", "description": "Unroll loops manually.", "scope": "loops", "tags": ["loops"],
         "content": "Unroll the inner loop four times by hand."}


def test_the_seed_library_has_the_common_techniques() -> None:
    skills = seed_skills()
    names = {s.name for s in skills}
    assert len(skills) >= 15 and len(names) == len(skills)
    for name in ("online-softmax", "welford-statistics", "fuse-elementwise-epilogue", "split-k-for-skinny-gemm",
                 "fp32-without-tf32", "cuda-graphs-for-launch-bound", "warp-reductions", "shared-memory-tiling"):
        assert name in names
    assert all(s.origin == "seed" and s.description and s.scope and s.tags and len(s.content) > 200 for s in skills)


@pytest.mark.parametrize("task, expected", [
    ("softmax_rows", "online-softmax"), ("rms_norm", "welford-statistics"), ("scale_bias_gelu", "fuse-elementwise-epilogue")])
def test_recall_finds_the_technique_a_task_needs(task: str, expected: str) -> None:
    t = resolve_task(task)
    top = [s.name for s in recall(seed_skills(), f"{t.name} {t.meta.description} {t.source}", k=5)]
    assert expected in top, top


def test_snapshots_version_every_change(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        lib = SkillLibrary(store)
        first = lib.current
        seeds = len(lib.skills())
        second = lib.put([Skill(**GOOD)], "add")
        third = lib.put([Skill(**{**GOOD, "content": "A better wording."})], "reword")
        fourth = lib.remove("online-softmax")
        assert (first, second, third, fourth) == (1, 2, 3, 4)
        assert len(lib.skills(first)) == seeds and len(lib.skills(second)) == seeds + 1
        assert lib.get(GOOD["name"]).version == 2 and lib.get(GOOD["name"], second).version == 1
        d = lib.diff(first, fourth)
        assert d.added == [GOOD["name"]] and d.removed == ["online-softmax"] and d.changed == []
        assert lib.diff(second, third).changed == [GOOD["name"]]
    with Store(tmp_path) as store:  # reopened: the library is the database's, not the process's
        assert SkillLibrary(store).current == 4


@pytest.mark.parametrize("with_, without, admitted", [
    (2.0, 1.0, True), (1.3, None, True), (1.3, 1.2, False), (1.1, 0.5, False), (None, 1.0, False)])
def test_admission_needs_relative_and_absolute_gain(with_: float | None, without: float | None, admitted: bool) -> None:
    ev = Evidence(task="t", device="d", speedup_with=with_, speedup_without=without)
    assert decide(AdmissionPolicy(), ev).admitted is admitted


def test_skills_commands(tmp_path: Path) -> None:
    p = kc("skills", "list", "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    listed = json.loads(p.stdout)
    assert listed["snapshot"] == 1 and len(listed["skills"]) >= 15
    p = kc("skills", "show", "online-softmax", cwd=tmp_path)
    assert p.returncode == 0 and "online-softmax" in p.stdout
    (tmp_path / "mine.md").write_text("+++\nname = \"my-trick\"\ndescription = \"d\"\nscope = \"s\"\ntags = [\"x\"]\n+++\nDo the trick.\n")
    p = kc("skills", "add", "mine.md", "--trusted", cwd=tmp_path)
    assert p.returncode == 0 and "snapshot 2" in p.stdout, p.stderr
    assert kc("skills", "remove", "online-softmax", cwd=tmp_path).returncode == 0
    p = kc("skills", "diff", "1", "--json", cwd=tmp_path)
    d = json.loads(p.stdout)
    assert d["added"] == ["my-trick"] and d["removed"] == ["online-softmax"]
    assert kc("skills", "export", "lib.json", cwd=tmp_path).returncode == 0
    other = tmp_path / "other"
    other.mkdir()
    p = kc("skills", "import", str(tmp_path / "lib.json"), cwd=other)
    assert p.returncode == 0, p.stderr
    names = {s["name"]: s for s in json.loads(kc("skills", "list", "--json", cwd=other).stdout)["skills"]}
    assert "my-trick" in names and names["my-trick"]["origin"] == "imported"


@pytest.mark.parametrize("args, words", [
    (["skills", "show", "nope"], "no skill 'nope'"),
    (["skills", "list", "--snapshot", "99"], "no skill snapshot 99"),
    (["skills", "add", "missing.md", "--trusted"], "no such file"),
    (["skills", "add", "bad.md", "--trusted"], "toml header"),
    (["skills", "add", "badname.md", "--trusted"], "lowercase"),
    (["skills", "add", "good.md"], "--task"),
    (["skills", "remove", "nope"], "no skill 'nope'"),
    (["optimize", "softmax_rows", "--model", "m", "--skills", "maybe"], "--skills"),
])
def test_skills_mistakes_are_one_line_errors(tmp_path: Path, args: list[str], words: str) -> None:
    (tmp_path / "bad.md").write_text("no header here\n")
    (tmp_path / "badname.md").write_text("+++\nname = \"Bad Name\"\n+++\ntext\n")
    (tmp_path / "good.md").write_text("+++\nname = \"ok\"\n+++\ntext\n")
    assert words.lower() in one_line_error(kc(*args, cwd=tmp_path)).lower()


def _skill_model(messages: list[dict[str, Any]]) -> str:
    """Fast only when a triggering skill is in the system prompt; without one, slow at first and fast
    once refined (so a trajectory improves and is summarized)."""
    r = role(messages)
    if r == "selector":
        listed = "- fuse-elementwise-epilogue:" in messages[1]["content"]
        picks = [{"name": "fuse-elementwise-epilogue", "reason": "a chain of elementwise ops"}] if listed else []
        return "```json\n" + json.dumps({"skills": picks}) + "\n```"
    if r == "summarizer":
        return "```json\n" + json.dumps({"skills": [GOOD, BOGUS]}) + "\n```"
    system = messages[0]["content"]
    if any(t in system for t in TRIGGERS):
        return fenced(FAST)
    return fenced(SLOW if turn(messages) == 0 else FAST)


def test_the_skill_path_end_to_end(tmp_path: Path, cache_dir: Path) -> None:
    (tmp_path / "fast.toml").write_text(FAST_RUN_TOML)
    base = ["optimize", "leaky_relu_clamp", "--model", "fake-coder", "--device", "cpu", "--config", "fast.toml", "--json",
            "--samples", "2"]
    with FakeOpenAI(models=["fake-coder"], responder=_skill_model) as srv:
        url = ["--base-url", srv.url]
        # without the library, one turn each: no speedup
        p = kc(*base, *url, "--turns", "1", "--skills", "off", cwd=tmp_path, cache=cache_dir)
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["tasks"][0]["speedup"] <= 1.0  # slower, or inside the noise band: no speedup
        # with it, the selector picks the skill for one scheme, and that sample is fast at once
        p = kc(*base, *url, "--turns", "1", "--skills", "on", "--no-learn", cwd=tmp_path, cache=cache_dir)
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["tasks"][0]["speedup"] > 1.2
        # two turns, learning on: the no-skill sample improves, is summarized into two candidates,
        # and only the one that reproduces the gain is admitted
        p = kc(*base, *url, "--turns", "2", "--skills", "on", cwd=tmp_path, cache=cache_dir)
        assert p.returncode == 0, p.stderr
        learned = json.loads(p.stdout)
        requests = list(srv.requests)
    summaries = [r for r in requests if role(r["messages"]) == "summarizer"]
    assert len(summaries) == 1 and "The faster kernel" in summaries[0]["messages"][1]["content"]
    with sqlite3.connect(tmp_path / "ws" / "kernelcraft.db") as c:
        decisions = dict(c.execute("SELECT json_extract(skill_json, '$.name'), status FROM skill_candidates").fetchall())
        reasons = dict(c.execute("SELECT json_extract(skill_json, '$.name'), reason FROM skill_candidates").fetchall())
    assert decisions == {"single-pass-fused-loop": "admitted", "unroll-by-hand": "rejected"}, reasons
    assert "less than 1.20x better" in reasons["unroll-by-hand"] or "floor" in reasons["unroll-by-hand"]
    listed = json.loads(kc("skills", "list", "--json", cwd=tmp_path).stdout)
    admitted = {s["name"]: s for s in listed["skills"]}["single-pass-fused-loop"]
    ev = admitted["evidence"][0]
    assert admitted["origin"] == "summarized" and ev["speedup_with"] > 1.2 and ev["speedup_without"] <= 1.0
    assert "unroll-by-hand" not in {s["name"] for s in listed["skills"]}
    html = Path(learned["report"]).read_text()
    assert "single-pass-fused-loop" in html and "unroll-by-hand" in html and "admitted" in html and "rejected" in html
    # the run recorded its snapshot, and the admission made a newer one
    with sqlite3.connect(tmp_path / "ws" / "kernelcraft.db") as c:
        args = json.loads(c.execute("SELECT args_json FROM runs ORDER BY started_at DESC LIMIT 1").fetchone()[0])
    assert args["search"]["skills"]["snapshot"] == 1 and listed["snapshot"] == 2


def test_recall_does_not_bring_jax_onto_the_gpu() -> None:
    # an import hook that fails the test if anything tries to import JAX (bm25s would, where it is installed)
    code = ("import sys\n"
            "sys.meta_path.insert(0, type('F', (), {'find_spec': staticmethod(lambda n, *a: (_ for _ in ()).throw("
            "AssertionError('imported ' + n)) if n.split('.')[0] == 'jax' else None)})())\n"
            "from kernelcraft.skills import recall, seed_skills\n"
            "assert recall(seed_skills(), 'softmax over rows', k=3)\n"
            "assert 'jax' not in sys.modules\n")
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
