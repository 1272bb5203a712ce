"""Exploit class 29 aimed at the kernel profile's pass (docs/judge.md, "Where candidate code runs"): a
candidate honest in the judge's workers that acts only in the process profiling it after its verdict,
through the real CLI: `kernelcraft eval`, then `kernelcraft profile`, in one workspace. The sandbox alone
answers it (static checks are off): the stored verdicts stay as judged, no file appears outside the pass's
scratch, and the judge's secret goes nowhere. The CPU case runs in CI; the cuda one (ncu, or its fallback,
in the same sandbox) is `-m gpu`."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Iterator

import pytest

from kernelcraft.judge.isolation import isolation

from ..test_cli import FAST_TOML, kc
from .cases import CANDIDATES_DIR, TASKS_DIR

SECRET = "sk-kc-redteam-profile-4711"
MARKER = "kc_redteam_profile_marker"  # the name of every file the candidate writes (29_profile_pass.py)
SHARED_DIRS = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))


def _shared_markers() -> list[Path]:
    return [d / MARKER for d in SHARED_DIRS if (d / MARKER).exists()]


@pytest.fixture
def no_markers() -> Iterator[None]:
    """No marker of an earlier run misleads this one, and none this one leaves (if the sandbox fails) stays."""
    for p in _shared_markers():
        p.unlink()
    yield
    for p in _shared_markers():
        p.unlink()


def _files(root: Path) -> Iterator[Path]:
    """Every file under `root`, not following links (the workspace's cache is the session's, linked)."""
    for where, _, names in os.walk(root):
        for name in names:
            yield Path(where) / name


def attack_the_profile_pass(device: str, tmp_path: Path, cache: Path) -> str:
    """Judge the candidate (eval), then judge and profile it (profile) in one workspace, with a secret in the
    judge's environment and a home of its own; check that nothing the candidate did in the profile pass got
    out of its sandbox. Returns the profile's note (the candidate's report of what it tried)."""
    iso = isolation()
    if not (iso.landlock_abi >= 1 and iso.namespaces):
        pytest.skip(f"the profile pass is confined as a worker is, and this machine lacks: {'; '.join(iso.problems)}")
    (tmp_path / "judge.toml").write_text("static_checks = false\n" + FAST_TOML)
    home = tmp_path / "home"
    home.mkdir()
    env = {"OPENAI_API_KEY": SECRET, "HOME": str(home), "KC_REDTEAM_TARGET": "1"}  # the candidate looks at these processes only
    args = [str(TASKS_DIR / "relu.py"), str(CANDIDATES_DIR / "29_profile_pass.py"), "--device", device, "--config", "judge.toml",
            "-w", str(tmp_path / "ws"), "--json"]
    judged = kc("eval", *args, cwd=tmp_path, cache=cache, env=env)
    assert judged.returncode == 0, judged.stdout + judged.stderr  # honest in the judge's workers
    profiled = kc("profile", *args, cwd=tmp_path, cache=cache, env=env)
    assert profiled.returncode == 0, profiled.stdout + profiled.stderr
    verdicts = [json.loads(judged.stdout), json.loads(profiled.stdout)]
    note = verdicts[1]["kernels"]["note"]
    print(f"[{device}] the profile's note: {note}")
    # The attack ran, in the profile pass only: the candidate failed it on purpose, reporting what it reached.
    assert "kc-redteam-profile-pass" in note, note
    report = json.loads(note.rsplit("kc-redteam-profile-pass ", 1)[1])  # the last pass's: the note ends with it
    # all it wrote: its own scratch (its home), and the /dev/shm of its own mount namespace (the machine's is checked below)
    scratch = f"{cache.resolve()}/scratch/"
    assert report["stores"] == 0 and report["secret"] == "", note
    assert all(p.startswith(scratch) or p == f"/dev/shm/{MARKER}" for p in report["files"]), note
    # (a) the stored verdicts are the judge's, and no trigger waits for the next one
    with sqlite3.connect(tmp_path / "ws" / "kernelcraft.db") as con:
        stored = con.execute("SELECT id, status, speedup, verdict_json FROM verdicts ORDER BY id").fetchall()
        triggers = con.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall()
    assert [(i, s, x) for i, s, x, _ in stored] == [(v["verdict_id"], "correct", v["speedup"]) for v in verdicts], stored
    assert all(json.loads(j)["speedup"] == x != 42.0 for _, _, x, j in stored), stored
    assert triggers == []
    # (b) no file outside the pass's scratch (the workspace, the judge's home and cwd, the shared temporary directories)
    assert [p for p in _files(tmp_path) if p.name == MARKER] == [] and _shared_markers() == []
    # (c) the secret: not in anything the judge printed or kept
    assert SECRET not in judged.stdout + judged.stderr + profiled.stdout + profiled.stderr
    assert [p for p in _files(tmp_path) if SECRET.encode() in p.read_bytes()] == []
    return note


def test_a_candidate_acting_only_in_the_profile_pass_reaches_nothing_of_the_judges(tmp_path: Path, cache_dir: Path,
                                                                                  no_markers: None) -> None:
    note = attack_the_profile_pass("cpu", tmp_path, cache_dir)
    assert note.startswith("ncu profiles CUDA devices only; the profiler's run failed too (exit code 1): RuntimeError")


@pytest.mark.gpu
def test_on_the_gpu_a_candidate_acting_only_in_the_profile_pass_reaches_nothing_of_the_judges(tmp_path: Path, cache_dir: Path,
                                                                                             no_markers: None) -> None:
    """ncu (where installed and not refused) runs the candidate first, in the same sandbox, then the profiler's
    fallback does: the attack runs in both, and the note keeps the fallback's report."""
    note = attack_the_profile_pass("cuda", tmp_path, cache_dir)
    assert "the profiler's run failed too (exit code 1): RuntimeError" in note
