"""The command line as a user meets it: real subprocesses, one-line errors, exit codes."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from .conftest import CANDIDATES, ROOT

FAST_TOML = """
[timing]
warmup_ms = 5.0
min_iters = 5
max_iters = 40
target_ms = 60.0
"""


def as_run_file(judge_toml: str) -> str:
    """Judge options (an `eval --config` file) as an optimize run file's [judge] tables."""
    return "[judge]\n" + re.sub(r"^\[(\w+)\]", r"[judge.\1]", judge_toml, flags=re.M)


FAST_RUN_TOML = as_run_file(FAST_TOML)  # an optimize run file with the fast judge options


def kc(*args: str, cwd: Path, cache: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "KERNELCRAFT_WORKSPACE": str(cwd / "ws"), **(env or {})}
    env.pop("KERNELCRAFT_DEBUG", None)
    if cache is not None:  # share the session's build cache: no C++ extension is built twice
        (cwd / "ws").mkdir(exist_ok=True)
        if not (cwd / "ws" / "cache").exists():
            (cwd / "ws" / "cache").symlink_to(cache)
    return subprocess.run([sys.executable, "-m", "kernelcraft.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


def one_line_error(p: subprocess.CompletedProcess, code: int = 2) -> str:
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr + p.stdout
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, p.stderr
    return lines[0]


def test_tasks_list_and_show(sample: Path, tmp_path: Path) -> None:
    p = kc("tasks", "list", str(sample), "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert len(json.loads(p.stdout)) == 9
    p = kc("tasks", "show", "softmax_rows", cwd=tmp_path)
    assert p.returncode == 0 and "class Model" in p.stdout


@pytest.mark.parametrize("args, words", [
    (["tasks", "list", "/no/such/dir"], "no such file or directory"),
    (["eval", "/no/such/task.py", "x.py", "--device", "cpu"], "no such task"),
    (["eval", "softmax_rows", "/no/such/candidate.py", "--device", "cpu"], "no such candidate"),
    (["eval", "softmax_rows", "cand.py", "--device", "cpu", "--set", "rows"], "expected NAME=VALUE"),
    (["eval", "notask.py", "cand.py", "--device", "cpu"], "missing Model"),
    (["eval-suite", "examples", "/no/such/solutions", "--device", "cpu"], "no such solutions directory"),
    (["eval", "softmax_rows", "cand.py", "--device", "tpu"], "unknown device"),
    (["eval", "softmax_rows", "cand.py", "--device", "cpu", "-w", "cand.py"], "a file, not a directory"),
    (["report", "r1", "-w", "badws"], "kernelcraft.db: file is not a database"),
    (["report", "r1", "-w", "typo"], "typo: no kernelcraft workspace here"),
    (["eval", "softmax_rows", "latin1.py", "--device", "cpu"], "latin1.py: not UTF-8 text"),
    (["eval", "softmax_rows", "cand.py", "--device", "cpu", "--config", "bad.toml"], "seeds = 'five': expected an integer"),
    (["eval", "softmax_rows", "cand.py", "--device", "cpu", "--atol", "nan"], "atol = nan: expected a finite number"),
    (["eval-suite", "examples", "adir", "--device", "cpu"], "adir: no solution for any of the"),
    (["optimize", "softmax_rows", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--device", "cpu", "--out", "cand.py"],
     "--out cand.py: a file, not a directory"),
    (["skills", "export", "adir"], "adir: Is a directory"),
    (["eval", "softmax_rows", "cand.py", "--device", "cpu", "--set", "Model=3"], "--set Model: not a module-level constant"),
    (["eval", "softmax_rows", "cand.py", "--device", "cpu", "--set", "N=0"], "--set N=0: must be a positive integer (a size)"),
    (["eval", "softmax_rows", "cand.py", "--device", "cpu", "--set", "N=2.5"], "--set N=2.5: must be an integer"),
    (["eval", "hgemm/64x64x32,32x32x32", "cand.py", "--device", "cpu"], "one shape names one task, not 2"),
    (["self-check", "examples", "--device", "cpu", "--gpus", "2", "-w", "ws"], "--gpus 2 with --device cpu"),
    (["profile", "softmax_rows", "/no/such/candidate.py", "--device", "cpu"], "no such candidate"),
    (["profile", "softmax_rows", "cand.py", "--device", "tpu"], "unknown device"),
    (["eval", "softmax_rows", "adir", "--device", "cpu"], "adir: a directory, not a candidate file"),
    (["eval", "adir", "cand.py", "--device", "cpu"], "adir: a directory, not a task file"),
    (["eval", "softmax_rows", "cand.py", "--device", "cpu", "--config", "adir"], "adir: a directory, not a config file"),
    # click's parse errors, in the tool's one line
    (["eval"], "missing argument 'task'; see "),
    (["eval", "softmax_rows", "cand.py", "--bogus"], "no such option: --bogus; see "),
    (["evl"], "no such command 'evl'"),
    (["eval", "softmax_rows", "cand.py", "--device", "cpu", "--seeds", "0"], "invalid value for '--seeds'"),
    # degenerate sizes
    (["eval", "softmax_rows", "cand.py", "--device", "cpu", "--set", "M=0"], "--set M=0: must be a positive integer (a size)"),
    (["optimize", "softmax_rows", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--device", "cpu", "--set", "N=-8"],
     "--set N=-8: must be a positive integer (a size)"),
    (["verdicts", "show", "1", "-w", "typo"], "typo: no kernelcraft workspace here"),
    (["verdicts", "list", "--status", "great"], "--status 'great': use one of"),
    (["gc", "-w", "typo"], "typo: no kernelcraft workspace here"),
])
def test_user_mistakes_are_one_line_errors(tmp_path: Path, args: list[str], words: str) -> None:
    (tmp_path / "cand.py").write_text("import torch\n")
    (tmp_path / "notask.py").write_text("import torch\ndef get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n")
    (tmp_path / "adir").mkdir()
    (tmp_path / "badws").mkdir()
    (tmp_path / "badws" / "kernelcraft.db").write_text("not a database\n")
    (tmp_path / "latin1.py").write_bytes(b"# caf\xe9\n")
    (tmp_path / "bad.toml").write_text('seeds = "five"\n')
    assert words in one_line_error(kc(*args, cwd=tmp_path))
    assert not (tmp_path / "typo").exists()  # a mistyped workspace is not made


@pytest.mark.parametrize("args", [["eval", "softmax_rows", "cand.py", "--device", "cpu", "--set", "M=0", "--json"],
                                  ["eval", "--json"], ["runs", "list", "--json", "-w", "typo"]])
def test_with_json_an_error_is_one_json_object_on_stdout(tmp_path: Path, args: list[str]) -> None:
    (tmp_path / "cand.py").write_text("import torch\n")
    p = kc(*args, cwd=tmp_path)
    assert p.returncode == 2 and p.stderr == "", p.stderr
    (line,) = p.stdout.splitlines()
    assert set(json.loads(line)) == {"error"}


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_no_cuda_device(tmp_path: Path) -> None:
    (tmp_path / "cand.py").write_text("import torch\n")
    assert "no CUDA device" in one_line_error(kc("eval", "softmax_rows", "cand.py", "--device", "cuda", cwd=tmp_path))


def test_task_that_fails_to_import_names_the_line(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("import torch\nclass Model(torch.nn.Module):\n    pass\nimport no_such_module\n"
                                   "def get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n")
    shutil.copy(CANDIDATES / "cpu" / "leaky_relu_clamp.py", tmp_path / "cand.py")
    line = one_line_error(kc("eval", "t.py", "cand.py", "--device", "cpu", cwd=tmp_path))
    assert "task.py:4" in line and "no_such_module" in line


def test_candidate_syntax_error_is_static_rejected_with_the_line(tmp_path: Path) -> None:
    (tmp_path / "cand.py").write_text("import torch\n\nclass ModelNew(torch.nn.Module:\n    pass\n")
    p = kc("eval", "softmax_rows", "cand.py", "--device", "cpu", "--json", cwd=tmp_path)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    v = json.loads(p.stdout)
    assert v["status"] == "static_rejected" and "line 3" in v["message"]


def test_eval_honest_candidate_is_correct_and_recorded(tmp_path: Path, cache_dir: Path) -> None:
    (tmp_path / "fast.toml").write_text(FAST_TOML)
    cand = CANDIDATES / "cpu" / "leaky_relu_clamp.py"
    # TTY_*: the live stage display draws as it would in a terminal
    p = kc("eval", "leaky_relu_clamp", str(cand), "--device", "cpu", "--config", "fast.toml", cwd=tmp_path, cache=cache_dir,
           env={"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1", "COLUMNS": "200"})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "status: correct" in p.stdout and "speedup" in p.stdout and "recorded" in p.stdout
    assert "leaky_relu_clamp.py: timing it against the reference" in p.stderr
    assert (tmp_path / "ws" / "kernelcraft.db").exists()


def test_vet_flags_the_degenerate_softmax_of_the_sample(sample: Path, tmp_path: Path) -> None:
    # The batch is shrunk for a CPU; the degeneracy (outputs ~1/393216) is in the row length, kept as is.
    p = kc("tasks", "vet", str(sample / "level1" / "23_Softmax.py"), "--device", "cpu", "--set", "batch_size=4",
           "--no-baseline", "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    (row,) = json.loads(p.stdout)
    assert row["degenerate"] is True
    assert {"zeros_pass", "input_independent"} <= {f["code"] for f in row["findings"] if f["distribution"] == "task"}


def test_vet_passes_fair_tasks_and_records_baselines(tmp_path: Path) -> None:
    p = kc("tasks", "vet", str(ROOT / "src" / "kernelcraft" / "tasks" / "examples" / "rms_norm.py"), "--device", "cpu",
           "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    (row,) = json.loads(p.stdout)
    assert row["degenerate"] is False and row["findings"] == []
    assert all(row["baseline_ms"][kind] > 0 for kind in ("eager", "eager_default", "compile_default"))
    assert "compile" not in row["baseline_ms"]  # the legacy kind (torch.compile under strict precision) is no more recorded


def test_vet_flags_nondeterministic_references(tmp_path: Path) -> None:
    (tmp_path / "drop.py").write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
        "        return torch.nn.functional.dropout(x, 0.5, training=True)\n"
        "def get_inputs():\n    return [torch.randn(64, 64)]\ndef get_init_inputs():\n    return []\n")
    p = kc("tasks", "vet", "drop.py", "--device", "cpu", "--no-baseline", "--json", cwd=tmp_path)
    (row,) = json.loads(p.stdout)
    assert row["degenerate"] and "nondeterministic" in {f["code"] for f in row["findings"]}


def test_eval_suite_reports_fast_p_per_level(tmp_path: Path, cache_dir: Path) -> None:
    suite = tmp_path / "suite" / "level1"
    suite.mkdir(parents=True)
    examples = ROOT / "src" / "kernelcraft" / "tasks" / "examples"
    shutil.copy(examples / "leaky_relu_clamp.py", suite / "1_leaky_relu_clamp.py")
    shutil.copy(examples / "rms_norm.py", suite / "2_rms_norm.py")
    sols = tmp_path / "solutions" / "level1"
    sols.mkdir(parents=True)
    shutil.copy(CANDIDATES / "cpu" / "leaky_relu_clamp.py", sols / "1_leaky_relu_clamp.py")
    (tmp_path / "fast.toml").write_text(FAST_TOML)
    p = kc("eval-suite", "suite", "solutions", "--device", "cpu", "--workers", "2", "--config", "fast.toml", "--json",
           cwd=tmp_path, cache=cache_dir)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    status = {r["task"]: r["status"] for r in out["results"]}
    assert status == {"level1/1_leaky_relu_clamp": "correct", "level1/2_rms_norm": "missing"}
    (summary,) = out["summary"]
    assert summary["total"] == 2 and summary["judged"] == 2 and summary["correct"] == 1 and summary["not_judged"] == {}
    assert [b["label"] for b in summary["baselines"]] == ["eager (strict)"]  # no other baseline timed (conftest)
    # baselines recorded for the correct task's device (as `baseline` would): the summary is given against each, and
    # --baselines finds nothing missing to time
    db = tmp_path / "ws" / "kernelcraft.db"
    with sqlite3.connect(db) as c:
        (device_name,) = c.execute("SELECT device_name FROM verdicts WHERE task_key='level1/1_leaky_relu_clamp'").fetchone()
        for kind, ms in (("eager", 2.0), ("eager_default", 1.6), ("compile_default", 0.5)):
            c.execute("INSERT INTO baselines (task_key, device, device_name, kind, median_ms, q1_ms, q3_ms, torch_version, "
                      "created_at) VALUES ('level1/1_leaky_relu_clamp', 'cpu', ?, ?, ?, ?, ?, '', 0)", (device_name, kind, ms, ms, ms))
    p = kc("eval-suite", "suite", "solutions", "--device", "cpu", "--config", "fast.toml", "--baselines", cwd=tmp_path,
           cache=cache_dir)
    assert p.returncode == 0, p.stderr
    for text in ("fast_1", "level 1", "eager (strict)", "eager (PyTorch defaults)", "torch.compile (PyTorch defaults)"):
        assert text in p.stdout, text
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT count(*) FROM baselines").fetchone()[0] == 3


def test_the_optimize_summary_gives_each_baseline_and_the_tasks_not_judged(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from kernelcraft.cli.optimize import print_optimize
    from kernelcraft.judge import TimingStats
    from kernelcraft.llm import Spend
    from kernelcraft.report import load_run
    from kernelcraft.search import RunResult, TaskResult, best_attempt
    from kernelcraft.store import Store
    from kernelcraft.tasks import resolve_task

    from .test_report_html import DISK_FULL, GELU, SOFTMAX, TRAJECTORY, build_run

    with Store(tmp_path) as store:
        for kind, ms in (("eager", 2.0), ("compile_default", 1.0)):
            store.record_baseline(SOFTMAX, "cpu", "cpu0", kind, TimingStats.of([ms]), "2.13")
        run_id = build_run(store, TRAJECTORY, judge_failed={GELU: 1})
        run = load_run(store, run_id)
        results = [TaskResult(resolve_task(t.key), best_attempt(store.attempts(run_id, t.key)), None, len(t.attempts), True)
                   for t in run.tasks]
    print_optimize(RunResult(run_id, results, None, Spend(), tmp_path), tmp_path / "report.html", run)
    text = capsys.readouterr().out
    for line in (f"not judged ({DISK_FULL})", "eager (strict)", "torch.compile (PyTorch defaults)",
                 f"not judged: 1 ({DISK_FULL})", f"evaluations not judged: 1 ({DISK_FULL})", f"best kernels: {tmp_path}"):
        assert line in text, line
    # a run whose folder of best kernels was never made (no correct kernel) does not name it
    print_optimize(RunResult(run_id, results, None, Spend(), tmp_path / "best"), tmp_path / "report.html", run)
    assert "best kernels: none (no correct kernel yet)" in capsys.readouterr().out


def _workers_under(path: Path) -> list[int]:
    """Live judge workers whose scratch directory lies under `path`."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if b"kernelcraft.judge.worker" in (proc / "cmdline").read_bytes() and str(path).encode() in (proc / "environ").read_bytes():
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def test_interrupted_suite_keeps_its_verdicts_and_leaves_no_workers(tmp_path: Path) -> None:
    import signal
    import sqlite3

    red = ROOT / "tests" / "redteam"
    (tmp_path / "suite" / "level1").mkdir(parents=True)
    (tmp_path / "solutions" / "level1").mkdir(parents=True)
    for i, (task, cand) in enumerate([("relu.py", "honest_relu_triton.py"), ("scale_add.py", "honest_scale_add_triton.py"),
                                      ("relu.py", "honest_relu_triton.py"), ("scale_add.py", "honest_scale_add_triton.py")], 1):
        shutil.copy(red / "tasks" / task, tmp_path / "suite" / "level1" / f"{i}_{task}")
        shutil.copy(red / "candidates" / cand, tmp_path / "solutions" / "level1" / f"{i}_{task}")
    (tmp_path / "fast.toml").write_text(FAST_TOML)
    env = {**os.environ, "KERNELCRAFT_WORKSPACE": str(tmp_path / "ws")}
    proc = subprocess.Popen([sys.executable, "-m", "kernelcraft.cli", "eval-suite", "suite", "solutions", "--device", "cpu",
                             "--workers", "1", "--config", "fast.toml"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            # a background job of a non-interactive shell inherits SIGINT ignored
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    db = tmp_path / "ws" / "kernelcraft.db"
    deadline = time.monotonic() + 300
    count = 0
    while time.monotonic() < deadline and proc.poll() is None:
        if db.exists():
            with sqlite3.connect(db) as c:
                # the file exists a moment before the store's first migration creates its tables
                if c.execute("SELECT count(*) FROM sqlite_master WHERE name = 'verdicts'").fetchone()[0]:
                    count = c.execute("SELECT count(*) FROM verdicts").fetchone()[0]
            if count >= 1:
                break
        time.sleep(0.5)
    assert count >= 1 and proc.poll() is None, "the suite finished or stalled before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out, err)
    assert "interrupted" in err and "Traceback" not in err
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT count(*) FROM verdicts").fetchone()[0] >= count
        assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    time.sleep(1)
    assert _workers_under(tmp_path) == []


def _processes_naming(path: Path) -> list[str]:
    """The command lines of live processes that name `path` (a compiler names its source and output files)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes() if proc.name.isdigit() else b""
        except OSError:
            continue
        if str(path).encode() in cmdline:
            found.append(cmdline.replace(b"\0", b" ").decode(errors="replace")[:200])
    return found


def test_ctrl_c_during_an_eval_build_leaves_no_compiler(tmp_path: Path) -> None:
    import signal
    # an extension name of its own: this workspace's build cache is empty, so the compiler runs
    source = (CANDIDATES / "cpu" / "leaky_relu_clamp.py").read_text().replace("kc_cpu_leaky_relu_clamp", "kc_cpu_interrupted")
    (tmp_path / "cand.py").write_text(source)
    env = {**os.environ, "KERNELCRAFT_WORKSPACE": str(tmp_path / "ws")}
    proc = subprocess.Popen([sys.executable, "-m", "kernelcraft.cli", "eval", "leaky_relu_clamp", "cand.py", "--device", "cpu"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    compiling = False
    while time.monotonic() < deadline and proc.poll() is None and not compiling:
        compiling = any("cc1plus" in c for c in _processes_naming(tmp_path))
        time.sleep(0.1)
    assert compiling and proc.poll() is None, "the eval ended before its compiler started"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err, err
    time.sleep(1)
    assert _processes_naming(tmp_path) == []  # no compiler, build tool or worker left behind
    assert list((tmp_path / "ws" / "cache" / "scratch").iterdir()) == []  # nor a partial build in the scratch


_UNSHARE = ["unshare", "--mount"] if os.geteuid() == 0 else ["unshare", "--user", "--map-root-user", "--mount"]


def _read_only(workspace: Path, *args: str) -> subprocess.CompletedProcess:
    """`kernelcraft ARGS` where `workspace` is mounted read-only (a mount namespace of its own: root included, nothing
    can be written there)."""
    script = 'mount --bind -o ro "$0" "$0" && exec "$@"'
    env = {k: v for k, v in os.environ.items() if k != "KERNELCRAFT_DEBUG"}
    return subprocess.run([*_UNSHARE, "sh", "-c", script, str(workspace), sys.executable, "-m", "kernelcraft.cli", *args,
                           "-w", str(workspace)], env=env, capture_output=True, text=True, timeout=300)


EAGER_LEAKY_RELU_CLAMP = """import torch
import torch.nn.functional as F


class ModelNew(torch.nn.Module):  # eager PyTorch: nothing to build, and a verdict at once (hack_detected: no kernel of its own)
    def __init__(self, slope, low, high):
        super().__init__()
        self.slope, self.low, self.high = slope, low, high

    def forward(self, x):
        return torch.clamp(F.leaky_relu(x, self.slope), self.low, self.high)
"""


def test_eval_leaves_no_scratch_and_its_verdict_is_listed_and_shown_even_read_only(tmp_path: Path, cache_dir: Path) -> None:
    (tmp_path / "fast.toml").write_text(FAST_TOML)
    (tmp_path / "cand.py").write_text(EAGER_LEAKY_RELU_CLAMP)
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "cache").symlink_to(cache_dir)
    env = {**os.environ, "KERNELCRAFT_WORKSPACE": str(tmp_path / "ws")}
    proc = subprocess.Popen([sys.executable, "-m", "kernelcraft.cli", "eval", "leaky_relu_clamp", "cand.py", "--device", "cpu",
                             "--set", "N=65536", "--config", "fast.toml"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 1 and "status: hack_detected" in out and "verdict 1 recorded" in out, out + err
    # the judge's scratch (its workers' and the task's trusted worker's) went with it; other tests' judges share the cache
    assert list((cache_dir / "scratch").glob(f"j{proc.pid}-*")) == []

    p = kc("verdicts", "list", "--json", cwd=tmp_path)
    (row,) = json.loads(p.stdout)
    assert row["id"] == 1 and row["run_id"] is None and row["origin"] == "cand.py" and row["status"] == "hack_detected"
    assert json.loads(kc("verdicts", "list", "--status", "correct", "--json", cwd=tmp_path).stdout) == []
    assert "1 verdict in" in kc("verdicts", "list", "--task", "leaky_relu_clamp", cwd=tmp_path).stdout
    p = kc("verdicts", "show", "1", "--source", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    for text in ("verdict 1: examples/leaky_relu_clamp", "by eval from cand.py", "status: hack_detected", "speedup",
                 "class ModelNew"):
        assert text in p.stdout, text
    assert out.split("verdict 1 recorded")[0] in p.stdout  # the verdict whole, as eval printed it
    shown = json.loads(kc("verdicts", "show", "1", "--json", cwd=tmp_path).stdout)
    assert shown["verdict_id"] == 1 and shown["status"] == "hack_detected" and shown["stages"]
    assert "no verdict 2" in one_line_error(kc("verdicts", "show", "2", cwd=tmp_path))

    if subprocess.run(_UNSHARE + ["true"], capture_output=True).returncode != 0:
        pytest.skip("no mount namespace here to make the workspace read-only")
    assert "read-only" in one_line_error(_read_only(tmp_path / "ws", "eval", "leaky_relu_clamp", str(tmp_path / "cand.py"),
                                                    "--device", "cpu"))
    p = _read_only(tmp_path / "ws", "verdicts", "list", "--json")
    assert p.returncode == 0 and [r["id"] for r in json.loads(p.stdout)] == [1], p.stderr
    p = _read_only(tmp_path / "ws", "runs", "list")
    assert p.returncode == 0 and "0 runs in" in p.stdout, p.stderr


def test_a_read_only_workspace_of_an_older_kernelcraft_is_named_so(tmp_path: Path) -> None:
    from kernelcraft.store import Store

    Store(tmp_path / "ws").close()
    with sqlite3.connect(tmp_path / "ws" / "kernelcraft.db") as c:
        c.execute("PRAGMA user_version = 1")  # as an older kernelcraft left it: it cannot be brought up to date here
    if subprocess.run(_UNSHARE + ["true"], capture_output=True).returncode != 0:
        pytest.skip("no mount namespace here to make the workspace read-only")
    assert "of an older kernelcraft, and read-only here" in one_line_error(_read_only(tmp_path / "ws", "runs", "list"))


def test_gc_reports_a_workspace_and_frees_only_what_no_judge_uses(tmp_path: Path) -> None:
    from kernelcraft.judge import precompiled
    from kernelcraft.store import Store

    from .test_scratch import judge_process

    ws, xdg = tmp_path / "ws", tmp_path / "xdg"
    Store(ws).close()
    cache = ws / "cache"
    live, kept = judge_process(cache, live=True, size=1 << 10)
    _, dead = judge_process(cache, live=False, size=1 << 20)  # a judge killed outright (after the live one: no sweep since)
    hours_ago = time.time() - 7200
    headers = {}
    for name, where in (("old", cache / "pch"), ("fresh", cache / "pch"), ("shared_old", xdg / "kernelcraft" / "pch")):
        headers[name] = where / f"{name}sig"
        (headers[name] / "torch").mkdir(parents=True)
        (headers[name] / "torch" / "extension.h.gch").write_bytes(bytes(1 << 16))
        if name != "fresh":
            os.utime(headers[name], (hours_ago, hours_ago))
    env = {"XDG_CACHE_HOME": str(xdg), "KERNELCRAFT_PCH_DIR": ""}  # the user's default: headers shared in their cache
    try:
        report = json.loads(kc("gc", "--dry-run", "--json", cwd=tmp_path, env=env).stdout)
        kinds = {h["kind"]: h for h in report["holdings"]}
        assert {"store", "runs", "logs", "replies", "builds", "pch", "scratch", "other"} <= set(kinds)
        assert kinds["store"]["bytes"] > 0 and kinds["scratch"]["bytes"] >= (1 << 20) + (1 << 10)
        assert kinds["scratch"]["freeable_bytes"] >= 1 << 20 and kinds["scratch"]["freeable_bytes"] < (1 << 20) + (1 << 10)
        assert kinds["pch"]["bytes"] == 2 << 16 and kinds["pch"]["freeable_bytes"] == 1 << 16
        assert report["freed_bytes"] == 0 and dead.exists()  # a dry run frees nothing
        if precompiled.gcc_version():  # headers are made only where GCC compiles
            assert kinds["pch (shared)"]["path"] == str(xdg / "kernelcraft" / "pch")
            assert kinds["pch (shared)"]["freeable_bytes"] == 0  # not without --shared-pch

        p = kc("gc", cwd=tmp_path, env=env)
        assert p.returncode == 0 and "freed" in p.stdout, p.stderr
        assert not dead.parent.exists() and not headers["old"].exists()
        assert (kept / "left").is_file() and headers["fresh"].exists() and headers["shared_old"].exists()
        if precompiled.gcc_version():
            freed = json.loads(kc("gc", "--shared-pch", "--json", cwd=tmp_path, env=env).stdout)["freed_bytes"]
            assert freed == 1 << 16 and not headers["shared_old"].exists()
    finally:
        live.kill()
        live.wait()


def test_version_short_help_and_python_dash_m(tmp_path: Path) -> None:
    from kernelcraft import __version__
    p = kc("--version", cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.strip() == f"kernelcraft {__version__}"
    p = subprocess.run([sys.executable, "-m", "kernelcraft", "eval", "-h"], cwd=tmp_path, capture_output=True, text=True)
    assert p.returncode == 0 and "Usage:" in p.stdout and "--device" in p.stdout
