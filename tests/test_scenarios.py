"""The timing scenarios: offline (calls back to back), server (an untimed random pause before every call) and
sustained (back to back on a device heated until its clock settled), for candidates and for the recorded
baselines; TunableOp's baseline on the GPU."""

from __future__ import annotations

import random
import sqlite3
import time
from pathlib import Path

import pytest
import torch

from kernelcraft.judge import Judge, LocalPool, baseline_kind
from kernelcraft.judge.config import TimingConfig
from kernelcraft.judge.worker.timing import Clock, clock_settled, heat, server_pause
from kernelcraft.store import baselines_job
from kernelcraft.tasks import load_task_file

from .conftest import FAST
from .redteam.cases import CANDIDATES_DIR, TASKS_DIR
from .test_cli import kc, one_line_error

SERVER = FAST.with_overrides({"timing": {"server": True, "server_qps": 500.0, "server_max_iters": 6}})
SUSTAINED = FAST.with_overrides({"timing": {"sustained": True, "sustained_min_heat_s": 0.3, "sustained_heat_s": 2.0}})


def test_server_pauses_are_exponential_with_mean_one_over_qps() -> None:
    rng = random.Random(3)
    pause = server_pause(50.0, rng)
    t0 = time.perf_counter()
    for _ in range(50):
        pause()
    mean = (time.perf_counter() - t0) / 50
    assert 0.012 < mean < 0.032  # 1/50 s = 20 ms; 50 draws of an exponential stay within this


def test_the_pause_is_not_timed() -> None:
    cfg = TimingConfig(cpu_flush_bytes=1 << 16)
    slow = Clock(torch.device("cpu"), cfg, pause=lambda: time.sleep(0.05))
    ms, _ = slow.time_call(lambda: None, [])
    assert ms < 5.0


def test_a_verdict_reports_the_server_scenario_next_to_offline(cpu_judge: Judge) -> None:
    task = load_task_file(TASKS_DIR / "relu.py")
    v = cpu_judge.evaluate(task, (CANDIDATES_DIR / "honest_relu_cpp.py").read_text(), config=SERVER)
    assert v.correct, v.message
    server = v.scenarios["server"]
    assert server["qps"] == 500.0 and server["speedup"] > 0
    assert 5 <= len(server["candidate"]["samples_ms"]) <= 6  # the server scenario's own cap on iterations
    assert not cpu_judge.evaluate(task, (CANDIDATES_DIR / "honest_relu_cpp.py").read_text(), config=FAST).scenarios


def test_heating_runs_at_least_its_minimum_and_stops_by_its_maximum() -> None:
    t0 = time.perf_counter()
    found = heat(torch.device("cpu"), 0.3, 1.0)
    took = time.perf_counter() - t0
    assert 0.3 <= found["heat_s"] <= took and took < 1.0 + 1.0  # one batch of matmuls may run past the maximum
    assert "clock_mhz" in found and isinstance(found["settled"], bool)  # None where the clock cannot be read


def test_a_clock_at_its_power_limit_has_settled_though_it_never_holds_still() -> None:
    # An H100 under the heating matmul (measured): every reading between 1,290 and 1,410 MHz, none within 2% of
    # the last for long. Its level holds; a clock still falling from its boost, or read for one window only, has
    # not settled.
    wander = [(i / 60, 1290 + 120 * ((i * 7) % 11) / 10) for i in range(180)]
    assert clock_settled(wander, 3.0)
    falling = [(i / 60, 1980 - 230 * i / 60) for i in range(180)]
    assert not clock_settled(falling, 3.0)
    assert not clock_settled([(1.0 + i / 60, 1305.0) for i in range(60)], 2.0)
    assert not clock_settled([], 2.0)


def test_a_verdict_reports_the_sustained_scenario_and_its_clock(cpu_judge: Judge) -> None:
    task = load_task_file(TASKS_DIR / "relu.py")
    v = cpu_judge.evaluate(task, (CANDIDATES_DIR / "honest_relu_cpp.py").read_text(), config=SUSTAINED)
    assert v.correct, v.message
    sustained = v.scenarios["sustained"]
    assert sustained["speedup"] > 0 and len(sustained["candidate"]["samples_ms"]) >= 5
    settled = sustained["clocks"]["settled"]
    assert 0.3 <= settled["heat_s"] < 5.0 and "clock_mhz" in settled
    assert "server" not in v.scenarios and "settled" not in v.env["clocks"]  # offline, the headline, is not heated


def test_baselines_are_recorded_per_scenario(tmp_path: Path, cache_dir: Path) -> None:
    (tmp_path / "relu.py").write_text((TASKS_DIR / "relu.py").read_text())
    p = kc("baseline", "relu.py", "--device", "cpu", "--no-compile", "--scenario", "both", cwd=tmp_path, cache=cache_dir)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "eager (strict) @server" in p.stdout and "eager (PyTorch defaults) @server" in p.stdout
    with sqlite3.connect(tmp_path / "ws" / "kernelcraft.db") as c:
        kinds = {r[0] for r in c.execute("SELECT kind FROM baselines")}
    assert kinds == {"eager", "eager@server", "eager_default", "eager_default@server"}
    one_line_error(kc("baseline", "relu.py", "--device", "cpu", "--tunableop", cwd=tmp_path, cache=cache_dir))
    assert "sustained" in one_line_error(kc("baseline", "relu.py", "--device", "cpu", "--scenario", "busy", cwd=tmp_path,
                                            cache=cache_dir))


def test_a_baselines_job_times_only_what_it_asks_for_in_each_scenario(cache_dir: Path) -> None:
    """The head-to-head's baselines: eager (strict) in two scenarios, not eager at PyTorch's defaults."""
    task = load_task_file(TASKS_DIR / "relu.py")
    with LocalPool("cpu", cache_dir=cache_dir, config=FAST, workers=1) as pool:
        result = pool.submit(baselines_job(task, compiled=False, scenarios=("offline", "server"), defaults=False)).result()
    assert result.error is None and set(result.baselines or {}) == {"eager", "eager@server"}


@pytest.mark.gpu
def test_tunableop_is_a_baseline_of_its_own_on_the_gpu(cache_dir: Path) -> None:
    task = load_task_file(TASKS_DIR / "hgemm.py")
    judge = Judge("cuda", cache_dir=cache_dir, config=FAST)
    stats = judge.baseline(task, compiled=False, tunableop=True)
    assert set(stats) == {"reference", "reference_default", "tunableop"} and all(s.median_ms > 0 for s in stats.values())
    assert baseline_kind("tunableop", "server") == "tunableop@server"
