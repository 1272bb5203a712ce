"""Scratch directories are gone on every way out (judge/scratch.py): a worker or a header compiler killed at its
timeout, a judge that exits, and a judge killed outright, whose directory the next judge (or `kernelcraft gc`)
removes while a live judge's stays. Every judge here is a real process; a dead one died with its lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kernelcraft.judge.precompiled as precompiled
from kernelcraft.judge import Judge, Status
from kernelcraft.judge import builds
from kernelcraft.judge.builds import BuildService
from kernelcraft.judge.scratch import ROOT, make_scratch, stale
from kernelcraft.tasks import resolve_task

from .conftest import FAST, ROOT as REPO

HUNG = ("import torch\nclass ModelNew(torch.nn.Module):\n    def __init__(self, *args):\n        super().__init__()\n"
        "    def forward(self, x):\n        while True:\n            pass\n")


def own_dirs(cache: Path) -> list[Path]:
    """This process's scratch directories in `cache`."""
    return list((cache / ROOT).glob(f"j{os.getpid()}-*"))


def judge_process(cache: Path, *, live: bool, size: int = 0) -> tuple[subprocess.Popen, Path]:
    """A process that takes scratch in `cache` as a judge does and writes `size` bytes there; then it waits (live)
    or is killed by SIGKILL, its lock going with it. Returns it and its untrusted process's directory."""
    code = ("import os, sys\nfrom pathlib import Path\nfrom kernelcraft.judge.scratch import make_scratch\n"
            f"p = make_scratch(Path({str(cache)!r}), 'w-')\n(p / 'left').write_bytes(bytes({size}))\n"
            "print(p, flush=True)\n" + ("sys.stdin.read()\n" if live else "os.kill(os.getpid(), 9)\n"))
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    path = Path(proc.stdout.readline().strip())
    if not live:
        proc.wait(timeout=60)
    return proc, path


def test_a_timed_out_worker_and_a_closed_judge_leave_no_scratch(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    task = resolve_task("leaky_relu_clamp").with_sizes("cpu", {"N": 4096})
    with Judge("cpu", cache_dir=cache, config=FAST.with_overrides({"timeouts": {"floor": 3.0}})) as judge:
        v = judge.evaluate(task, HUNG)
        assert v.status is Status.TIMEOUT and "correctness" in v.message
        (own,) = own_dirs(cache)
        # the hung worker's directory went with it; the task's trusted worker, kept for the next candidate, holds its own
        assert len(list(own.iterdir())) == 1
    assert [list(d.iterdir()) for d in own_dirs(cache)] == [[]]  # closed: the trusted worker's went too


@pytest.mark.skipif(not precompiled.gcc_version(), reason="no GCC: no precompiled headers")
def test_a_header_compiler_killed_at_its_timeout_leaves_no_scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setattr(builds, "_HEADER_TIMEOUT_S", 1.0)  # a header takes a minute of a core to make
    service = BuildService(cache, "cpu", 0, 1, "")
    made = tmp_path / "extension.h.gch"
    assert service._make_header({"cpp_sources": ["int x;"], "extra_cflags": ["-O3"]}, made) is False
    assert not made.exists()
    (own,) = own_dirs(cache)
    assert list(own.iterdir()) == []  # no partial .gch left


def test_a_killed_judges_scratch_goes_to_the_next_judge_and_a_live_ones_stays(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _, dead = judge_process(cache, live=False, size=1 << 20)
    assert stale(cache) == [dead.parent]
    live, kept = judge_process(cache, live=True)  # the next judge to open the cache
    try:
        assert not dead.parent.exists()
        assert stale(cache) == []
        make_scratch(cache, "w-")  # another judge beside it
        assert (kept / "left").is_file()
    finally:
        live.kill()
        live.wait()
    assert stale(cache) == [kept.parent]  # its judge is gone now


def test_the_old_layouts_scratch_goes_once_no_process_works_in_it(tmp_path: Path) -> None:
    root = tmp_path / "cache" / ROOT
    idle, busy, young = root / "w-idle", root / "b-busy", root / "h-young"
    for d in (idle, busy, young):
        d.mkdir(parents=True)
    hours_ago = time.time() - 7200
    for d in (idle, busy):
        os.utime(d, (hours_ago, hours_ago))
    builder = subprocess.Popen(["sleep", "600"], cwd=busy)  # a builder of an older judge, still at work
    try:
        assert stale(tmp_path / "cache") == [idle]
    finally:
        builder.kill()
        builder.wait()


def test_a_judge_interrupted_while_it_builds_leaves_no_scratch(tmp_path: Path) -> None:
    """SIGTERM reaches a judge through the CLI as Ctrl-C does (test_cli.py sends SIGINT): its builder and compiler die,
    and every scratch directory with them."""
    source = (REPO / "examples" / "candidates" / "cpu" / "leaky_relu_clamp.py").read_text()
    (tmp_path / "cand.py").write_text(source.replace("kc_cpu_leaky_relu_clamp", "kc_cpu_terminated"))
    env = {**os.environ, "KERNELCRAFT_WORKSPACE": str(tmp_path / "ws")}
    proc = subprocess.Popen([sys.executable, "-m", "kernelcraft.cli", "eval", "leaky_relu_clamp", "cand.py", "--device", "cpu"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    scratch = tmp_path / "ws" / "cache" / ROOT
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None and not list(scratch.glob("j*/b-*/build")):
        time.sleep(0.1)
    assert proc.poll() is None, "the eval ended before its builder started"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "Traceback" not in err, err
    assert list(scratch.iterdir()) == []
