"""Class 29, judge state tampering, against the caches the judge shares between evaluations: the device
ceilings and the build cache. The attackers (29_*.py) run with static checks off, each in a judge of
its own cache, so a defence that fails harms no other test; what is checked is the next evaluation,
not the attacker's own verdict."""

from __future__ import annotations

import json
from pathlib import Path

from kernelcraft.judge import Judge, Status
from kernelcraft.judge.isolation import isolation
from kernelcraft.tasks import load_task_file

from ..conftest import FAST
from .cases import CANDIDATES_DIR, NO_STATIC, TASKS_DIR

RELU = TASKS_DIR / "relu.py"
UNCHECKED = FAST.with_overrides(NO_STATIC)


def _source(name: str) -> str:
    return (CANDIDATES_DIR / name).read_text()


def test_inflated_ceilings_do_not_switch_the_floor_off(tmp_path: Path) -> None:
    task = load_task_file(RELU)
    judge = Judge("cpu", cache_dir=tmp_path, config=FAST)
    true = judge.ceilings()["bandwidth_bytes_per_s"]
    judge.evaluate(task, _source("29_inflate_ceilings.py"), config=UNCHECKED)
    planted = json.loads((tmp_path / "ceilings.json").read_text())
    inflated = all(c["bandwidth_bytes_per_s"] == 1e30 for c in planted.values())
    # Under the sandbox the write never lands; without it, the judge's record of the file catches it.
    assert inflated is not isolation().complete, "the sandbox let the candidate write the ceilings" if inflated else \
        "the attack did not run"

    # The next judge of this cache (another run, another pytest-xdist process) measures again.
    after = Judge("cpu", cache_dir=tmp_path, config=FAST).evaluate(task, _source("honest_relu_triton.py"))
    assert after.status is Status.CORRECT, after.message
    assert after.stage("audit").details["ceilings"]["bandwidth_bytes_per_s"] < 1e3 * true
    # This judge's own second look (before a floor reject) ignores the planted file too.
    assert judge.ceilings(refresh=True)["bandwidth_bytes_per_s"] < 1e3 * true


def _planted(cache: Path) -> set[str]:
    return {p.parent.name for p in (cache / "builds").glob("kc_*/failed.log")
            if "planted by 29_plant_failed_build" in p.read_text(errors="replace")}


def test_a_planted_failed_build_does_not_poison_another_candidates_build(cpu_judge: Judge, cache_dir: Path) -> None:
    """In the session's cache, where the honest candidate's build may be published already (no C++
    build of its own on a CI machine): a planted failure must not take its place either way."""
    task = load_task_file(RELU)
    judge, tmp_path = cpu_judge, cache_dir
    judge.evaluate(task, _source("29_plant_failed_build.py"), config=UNCHECKED)
    planted = _planted(tmp_path)
    # Under the sandbox the write never lands; without it, the judge's record of the cache catches it.
    assert bool(planted) is not isolation().complete, "the sandbox let the candidate write the build cache" \
        if planted else "the attack did not run"

    # Planted before the honest candidate's first build: the judge builds it all the same.
    honest = judge.evaluate(task, _source("honest_relu_cpp.py"))
    assert honest.status is Status.CORRECT, honest.message
    if planted:
        assert {f"kc_{k}" for k in honest.stage("build").details["keys"]} == planted, "the attack missed its target"

    # Planted again into the published build: it is loaded from the cache, as the judge published it.
    judge.evaluate(task, _source("29_plant_failed_build.py"), config=UNCHECKED)
    assert all((tmp_path / "builds" / name / "failed.log").is_file() for name in planted)
    again = judge.evaluate(task, _source("honest_relu_cpp.py"))
    assert again.status is Status.CORRECT, again.message
