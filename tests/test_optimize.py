"""`kernelcraft optimize` end to end on CPU: a real fake endpoint on loopback answering through the
openai SDK, the real judge, the store, best-kernel files and the report; resume after a budget
stop and after a kill; bad endpoints stop before any task starts."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kernelcraft.llm import Message
from kernelcraft.search import Exchange, best_attempt, module_name, trimmed_history
from kernelcraft.store import AttemptRow
from kernelcraft.tasks import TaskError, resolve_task, task_from_module

from .conftest import CANDIDATES
from .fake_openai import FakeOpenAI, Step
from .test_cli import FAST_RUN_TOML, kc, one_line_error

PROSE = "I would fuse these operations into one kernel, but I am not sure how yet."


def _fenced(source: str) -> str:
    return f"Here is a fused kernel.\n\n```python\n{source}```\n"


def _wrong(source: str, result: str) -> str:
    """A candidate that computes something else: the right kernels, the result scaled by 1.5."""
    assert f"return {result}" in source
    return source.replace(f"return {result}", f"return 1.5 * {result}")


def _turn(messages: list[dict[str, Any]]) -> int:
    return sum(1 for m in messages if m["role"] == "assistant")


def _task_of(messages: list[dict[str, Any]]) -> str:
    text = messages[1]["content"]
    for name in ("LeakyReLU", "Mean of squares", "Softmax over each row"):
        if name in text:
            return name
    raise AssertionError(f"unknown task in prompt: {text[:200]}")


LEAKY = (CANDIDATES / "cpu" / "leaky_relu_clamp.py").read_text()
ROWMS = (CANDIDATES / "cpu" / "row_mean_square.py").read_text()
SOFTMAX = (CANDIDATES / "cpu" / "softmax_rows.py").read_text()
BROKEN_CPP = LEAKY.replace("const float v = in[i];", "const float v = in[i]").replace("kc_cpu_leaky_relu_clamp", "kc_cpu_broken")
SCRIPT = {  # per task, the reply at each turn: does not compile / wrong / no code, then correct
    "LeakyReLU": [_fenced(BROKEN_CPP), _fenced(_wrong(LEAKY, "_ext.leaky_relu_clamp(")), _fenced(LEAKY)],
    "Mean of squares": [_fenced(_wrong(ROWMS, "out.view(")), _fenced(ROWMS), _fenced(ROWMS)],
    "Softmax over each row": [PROSE, _fenced(SOFTMAX), _fenced(SOFTMAX)],
}


def _scripted(messages: list[dict[str, Any]]) -> str:
    return SCRIPT[_task_of(messages)][_turn(messages)]


def _db(tmp_path: Path) -> sqlite3.Connection:
    return sqlite3.connect(tmp_path / "ws" / "kernelcraft.db")


def test_optimize_three_tasks_end_to_end(tmp_path: Path, cache_dir: Path) -> None:
    (tmp_path / "fast.toml").write_text(FAST_RUN_TOML)
    (tmp_path / "suite").mkdir()
    for name in ("leaky_relu_clamp", "row_mean_square", "softmax_rows"):
        (tmp_path / "suite" / f"{name}.py").write_text(resolve_task(name).source)
    with FakeOpenAI(models=["fake-coder"], responder=_scripted) as srv:
        p = kc("optimize", "suite", "--model", "fake-coder", "--base-url", srv.url, "--device", "cpu", "--samples", "1",
               "--turns", "3", "--price", "fake-*=1,2", "--config", "fast.toml", "--workers", "2", "--json",
               cwd=tmp_path, cache=cache_dir)
        requests = list(srv.requests)
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout)
    by_task = {t["task"]: t for t in out["tasks"]}
    assert set(by_task) == {"leaky_relu_clamp", "row_mean_square", "softmax_rows"}
    for t in by_task.values():  # every task ends with its correct kernel chosen, after three turns
        assert t["speedup"] is not None and t["attempts"] == 3 and t["finished"], t
    # the judge's feedback reaches the next turn: the compiler's error, then the mismatch
    leaky = sorted((r["messages"] for r in requests if _task_of(r["messages"]) == "LeakyReLU"), key=_turn)
    assert [_turn(m) for m in leaky] == [0, 1, 2]
    assert "build_failed" in leaky[1][-1]["content"] and "error" in leaky[1][-1]["content"]
    assert "incorrect" in leaky[2][-1]["content"] and leaky[2][1]["content"] == leaky[0][1]["content"]
    soft = sorted((r["messages"] for r in requests if _task_of(r["messages"]) == "Softmax over each row"), key=_turn)
    assert "could not be used" in soft[1][-1]["content"]
    # the best kernel is the correct one, written as an importable file
    best = Path(by_task["leaky_relu_clamp"]["file"])
    assert best.name == "leaky_relu_clamp.py" and best.read_text().endswith(LEAKY)
    assert best.read_text().startswith("# kernelcraft: the best kernel found for leaky_relu_clamp")
    # cost counted per call and in total
    assert out["spend"]["calls"] == 9 and out["spend"]["cost_usd"] > 0
    with _db(tmp_path) as c:
        costs = [r[0] for r in c.execute("SELECT cost_usd FROM llm_calls")]
        statuses = dict(c.execute("SELECT status, count(*) FROM attempts GROUP BY status").fetchall())
    assert len(costs) == 9 and all(x > 0 for x in costs)
    assert abs(sum(costs) - out["spend"]["cost_usd"]) < 1e-9
    assert statuses["build_failed"] == 1 and statuses["incorrect"] == 2 and statuses["parse_failed"] == 1
    # one verdict per distinct source: a repeated kernel is not judged twice
    with _db(tmp_path) as c:
        assert c.execute("SELECT count(*) FROM verdicts").fetchone()[0] == 6
    report = Path(out["report"])
    html = report.read_text()
    assert report.is_file() and all(k in html for k in by_task)


@pytest.mark.parametrize("signum, code, why", [(signal.SIGTERM, 3, "terminated (SIGTERM)"),
                                               (signal.SIGINT, 130, "interrupted (Ctrl-C)")])
def test_a_model_that_never_writes_code_is_stopped_then_resumed_by_the_command_it_prints(
        tmp_path: Path, signum: int, code: int, why: str) -> None:
    (tmp_path / "fast.toml").write_text(FAST_RUN_TOML)
    with FakeOpenAI(models=["fake-coder"]) as srv:
        srv.script = [Step(text=PROSE, delay_s=0.4) for _ in range(40)]
        env = {**os.environ, "KERNELCRAFT_WORKSPACE": str(tmp_path / "ws")}
        proc = subprocess.Popen([sys.executable, "-m", "kernelcraft.cli", "optimize", "row_mean_square", "--model", "fake-coder",
                                 "--base-url", srv.url, "--device", "cpu", "--samples", "2", "--turns", "3",
                                 "--config", "fast.toml"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                # a background job of a non-interactive shell inherits SIGINT ignored
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + 120
        count = 0
        while time.monotonic() < deadline and proc.poll() is None and count < 2:
            time.sleep(0.2)
            if (tmp_path / "ws" / "kernelcraft.db").exists():
                with _db(tmp_path) as c:
                    count = c.execute("SELECT count(*) FROM attempts").fetchone()[0] if _has_attempts(c) else 0
        assert count >= 2 and proc.poll() is None, "the run finished or stalled before it could be stopped"
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == code and "Traceback" not in err, err
        with _db(tmp_path) as c:
            (run_id,) = c.execute("SELECT id FROM runs").fetchone()
            before = c.execute("SELECT count(*) FROM attempts").fetchone()[0]
        assert before < 6
        last = err.strip().splitlines()[-1]
        command = f"kernelcraft optimize --resume {run_id}"  # $KERNELCRAFT_WORKSPACE is the default workspace: no -w
        assert last == f"{why}. Everything so far is recorded; continue with: {command}", err
        p = kc(*shlex.split(command)[1:], "--json", cwd=tmp_path)  # the command as printed
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout)
    (task,) = out["tasks"]
    assert task["speedup"] is None and task["attempts"] == 6 and task["finished"]
    with _db(tmp_path) as c:
        rows = c.execute("SELECT sample, turn, status FROM attempts ORDER BY sample, turn").fetchall()
    assert rows == [(s, t, "parse_failed") for s in (0, 1) for t in (0, 1, 2)]
    assert out["spend"]["calls"] == 6  # the run's total over both invocations: nothing was asked twice
    assert "no correct candidate" in Path(out["report"]).read_text()


# A candidate that builds nothing (library calls, which this task's rules reject as no kernel of its own): the test is
# about the endpoint, and each of its turns is judged in seconds.
LIBRARY_ROWMS = ("import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
                 "        return (x * x).mean(dim=-1)\n")


def test_a_dropped_endpoint_leaves_its_turns_pending_and_resume_asks_them(tmp_path: Path) -> None:
    (tmp_path / "fast.toml").write_text(FAST_RUN_TOML)
    args = ["optimize", "row_mean_square", "--model", "fake-coder", "--device", "cpu", "--samples", "1", "--turns", "3",
            "--concurrency", "1", "--config", "fast.toml", "--set", "llm.retries=1", "--set", "llm.backoff_s=0.05"]

    def dies_after_one(messages: list[dict[str, Any]]) -> str:  # answers turn 0, then the server goes away
        threading.Thread(target=srv.stop).start()
        return _fenced(LIBRARY_ROWMS)

    with FakeOpenAI(models=["fake-coder"], responder=dies_after_one) as srv:
        p = kc(*args, "--base-url", srv.url, "-w", "elsewhere", cwd=tmp_path)
    assert p.returncode == 3, p.stdout + p.stderr
    assert "1 model call got no reply (1x lost the connection" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert "continue with: kernelcraft optimize --resume" in p.stderr and "-w elsewhere" in p.stderr
    db = sqlite3.connect(tmp_path / "elsewhere" / "kernelcraft.db")
    (run_id,) = db.execute("SELECT id FROM runs").fetchone()
    assert db.execute("SELECT turn, status FROM attempts").fetchall() == [(0, "hack_detected")]  # the lost call is no turn
    assert db.execute("SELECT finished_at FROM runs").fetchone() == (None,)
    listed = kc("runs", "list", "-w", "elsewhere", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    (line,) = json.loads(listed.stdout)
    assert (line["id"], line["kind"], line["finished"], line["tasks"], line["tasks_done"], line["model"]) == \
        (run_id, "optimize", False, 1, 0, "fake-coder")
    assert "1 run in elsewhere" in kc("runs", "list", "-w", "elsewhere", cwd=tmp_path).stdout  # not "1 runs"

    with FakeOpenAI(models=["fake-coder"], responder=lambda m: _fenced(LIBRARY_ROWMS), port=srv.port) as again:
        p = kc("optimize", "--resume", run_id, "-w", "elsewhere", "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert [_turn(r["messages"]) for r in again.requests] == [1, 2]  # turn 1 asked again, then turn 2
    rows = db.execute("SELECT sample, turn, status FROM attempts ORDER BY turn").fetchall()
    assert rows == [(0, t, "hack_detected") for t in range(3)]  # as many judged turns as a run the endpoint never left


def test_a_model_that_repeats_one_kernel_spends_the_judge_budget_and_its_sample_ends(tmp_path: Path) -> None:
    (tmp_path / "fast.toml").write_text(FAST_RUN_TOML)
    args = ["optimize", "row_mean_square", "--model", "fake-coder", "--device", "cpu", "--samples", "1", "--turns", "5",
            "--config", "fast.toml", "--json"]
    with FakeOpenAI(models=["fake-coder"], responder=lambda m: _fenced(LIBRARY_ROWMS)) as srv:
        p = kc(*args, "--base-url", srv.url, "--budget-judge-calls", "2", cwd=tmp_path)
        assert p.returncode == 3, p.stdout + p.stderr
        assert "stopped: the judge budget is spent: 2 of 2 judge calls" in p.stderr, p.stderr
        run_id = json.loads(p.stdout)["run_id"]
        with _db(tmp_path) as c:  # the second turn reused the first's verdict, and still counted
            assert c.execute("SELECT count(*) FROM attempts").fetchone()[0] == 2
            assert c.execute("SELECT count(*) FROM verdicts").fetchone()[0] == 1
        p = kc("optimize", "--resume", run_id, "--budget-judge-calls", "10", "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    note = "sample 1 stopped after turn 3: the model gave the same answer 3 turns in a row"
    assert f"note: examples/row_mean_square: {note}" in p.stderr, p.stderr
    out = json.loads(p.stdout)
    (task,) = out["tasks"]
    assert task["attempts"] == 3 and task["finished"]
    assert len(srv.requests) == 3  # turns 4 and 5 were never asked (turn 3's reply, asked before the stop, was cached)
    assert note in Path(out["report"]).read_text()


def test_answers_equal_up_to_comments_and_layout_are_repeats() -> None:
    from kernelcraft.search.repeats import answer_key, repeating

    kernel, restyled = "def f(x):\n    return x + 1  # fused\n", "def f(x):\n\n    # one pass\n    return x+1\n"
    assert repeating([answer_key(kernel, "a"), answer_key(restyled, "b"), answer_key(kernel, "c")])
    assert not repeating([answer_key(kernel, None), answer_key(kernel, None)])  # two are not three
    assert repeating([answer_key(None, PROSE), answer_key(None, PROSE + "\n"), answer_key(None, " " + PROSE)])
    assert not repeating([answer_key(None, PROSE), answer_key(kernel, PROSE), answer_key(None, PROSE)])
    assert not repeating([answer_key(None, None)] * 3)  # calls that got no reply are no answers


def test_the_summary_says_why_a_task_has_no_result_and_no_cache_asks_again(tmp_path: Path) -> None:
    args = ["optimize", "row_mean_square", "--model", "fake-coder", "--device", "cpu", "--samples", "1", "--turns", "1"]
    with FakeOpenAI(models=["fake-coder"], responder=lambda m: PROSE) as srv:
        p = kc(*args, "--base-url", srv.url, cwd=tmp_path)
        assert p.returncode == 0, p.stdout + p.stderr
        # a second run asks the same: the workspace's cached reply, unless --no-cache
        assert kc(*args, "--base-url", srv.url, "--no-cache", cwd=tmp_path).returncode == 0
    assert len(srv.requests) == 2
    line = next(ln for ln in p.stdout.splitlines() if "row_mean_square" in ln)
    assert "no correct candidate" in line and "parse_failed: the reply holds no code block" in p.stdout, p.stdout
    report = next(ln.split("report: ", 1)[1] for ln in p.stdout.splitlines() if ln.startswith("report: "))
    assert "parse_failed: the reply holds no code block" in Path(report.strip()).read_text()


def _has_attempts(c: sqlite3.Connection) -> bool:
    return c.execute("SELECT count(*) FROM sqlite_master WHERE name='attempts'").fetchone()[0] == 1


def test_a_spent_budget_stops_the_run_and_resume_goes_on(tmp_path: Path) -> None:
    # prose that differs each turn: the same answer three times in a row would end the sample (search/repeats.py)
    with FakeOpenAI(models=["fake-coder"], responder=lambda m: f"{PROSE} (turn {_turn(m) + 1})") as srv:
        args = ["optimize", "row_mean_square", "--model", "fake-coder", "--base-url", srv.url, "--device", "cpu",
                "--samples", "1", "--turns", "4", "--concurrency", "1"]
        p = kc(*args, "--budget-tokens", "100", cwd=tmp_path)
        assert p.returncode == 3, p.stdout + p.stderr
        assert "budget is spent" in p.stderr and "--resume" in p.stderr and "Traceback" not in p.stderr
        assert "--budget-tokens N (N: --budget-tokens above 100; the run spent that budget)" in p.stderr, p.stderr
        assert " -w " not in p.stderr  # the default workspace
        with _db(tmp_path) as c:
            (run_id,) = c.execute("SELECT id FROM runs").fetchone()
            first = c.execute("SELECT count(*) FROM attempts").fetchone()[0]
        assert 1 <= first < 4
        last = p.stderr.strip().splitlines()[-1]
        assert last.startswith("stopped: the LLM budget is spent") and last.endswith(
            f". Everything so far is recorded; continue with: kernelcraft optimize --resume {run_id} --budget-tokens N "
            "(N: --budget-tokens above 100; the run spent that budget)"), last
        p = kc("optimize", "--resume", run_id, "--budget-tokens", "100000", "--json", cwd=tmp_path)
        assert p.returncode == 0, p.stdout + p.stderr
        assert json.loads(p.stdout)["tasks"][0]["attempts"] == 4
        assert len(srv.requests) == 4


def test_a_users_module_is_a_task(tmp_path: Path, cache_dir: Path) -> None:
    (tmp_path / "fast.toml").write_text(FAST_RUN_TOML)
    (tmp_path / "mymodel.py").write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Rectifier(nn.Module):\n    def forward(self, x):\n"
        "        return torch.relu(x)\n\n\ndef example_inputs():\n    return [torch.randn(512, 1024)]\n")
    relu = (Path(__file__).parent / "redteam" / "candidates" / "honest_relu_triton.py").read_text()
    with FakeOpenAI(models=["fake-coder"], responder=lambda m: _fenced(relu)) as srv:
        p = kc("optimize", "mymodel.py:Rectifier", "--inputs", "mymodel.py:example_inputs", "--model", "fake-coder",
               "--base-url", srv.url, "--device", "cpu", "--samples", "1", "--turns", "1", "--config", "fast.toml",
               "--out", "best", "--json", cwd=tmp_path, cache=cache_dir)
        prompt = srv.requests[0]["messages"][1]["content"]
    assert p.returncode == 0, p.stdout + p.stderr
    (task,) = json.loads(p.stdout)["tasks"]
    assert task["task"] == "user/mymodel.Rectifier" and task["speedup"] is not None
    assert "class Rectifier" in prompt and "Model = Rectifier" in prompt
    assert (tmp_path / "best" / "user_mymodel_Rectifier.py").is_file()


@pytest.mark.parametrize("extra, words", [
    (["--base-url", "http://127.0.0.1:9/v1"], "cannot reach"),
    (["--model", "other-model"], "other-model"),
])
def test_a_bad_endpoint_fails_before_any_task(tmp_path: Path, extra: list[str], words: str) -> None:
    with FakeOpenAI(models=["fake-coder"]) as srv:
        args = ["optimize", "softmax_rows", "--model", "fake-coder", "--base-url", srv.url, "--device", "cpu", *extra]
        line = one_line_error(kc(*args, cwd=tmp_path))
        assert srv.requests == []
    assert words in line.lower()
    with _db(tmp_path) as c:
        assert c.execute("SELECT count(*) FROM runs").fetchone()[0] == 0


@pytest.mark.parametrize("key, words", [
    ("wrong", "rejected the API key in $OPENAI_API_KEY"),
    ("", "answered 401 Unauthorized: it needs an API key, and $OPENAI_API_KEY is not set"),
])
def test_a_bad_or_missing_key_fails_before_any_task_naming_its_variable(tmp_path: Path, key: str, words: str) -> None:
    with FakeOpenAI(models=["fake-coder"], key="right") as srv:
        p = subprocess.run([sys.executable, "-m", "kernelcraft.cli", "optimize", "softmax_rows", "--model", "fake-coder",
                            "--base-url", srv.url, "--device", "cpu"], cwd=tmp_path, capture_output=True, text=True,
                           env={**os.environ, "KERNELCRAFT_WORKSPACE": str(tmp_path / "ws"), "OPENAI_API_KEY": key})
    assert one_line_error(p) == f"error: {srv.url} {words}"


def test_a_base_url_without_v1_fails_with_the_fix_even_in_a_warm_workspace(tmp_path: Path) -> None:
    args = ["optimize", "row_mean_square", "--model", "fake-coder", "--device", "cpu", "--samples", "1", "--turns", "1"]
    with FakeOpenAI(models=["fake-coder"], responder=lambda m: PROSE) as srv, \
            FakeOpenAI(models=["fake-coder"], responder=lambda m: PROSE) as other:
        assert kc(*args, "--base-url", srv.url, cwd=tmp_path).returncode == 0  # the workspace's cache holds the reply
        bare = f"http://127.0.0.1:{srv.port}"
        line = one_line_error(kc(*args, "--base-url", bare, cwd=tmp_path))
        assert line == f"error: {bare} answered 404 for /models and /chat/completions: is the base URL missing /v1? (try {bare}/v1)"
        assert kc(*args, "--base-url", other.url, cwd=tmp_path).returncode == 0
    assert (len(srv.requests), len(other.requests)) == (1, 1)  # another endpoint is asked, not answered from the cache
    with _db(tmp_path) as c:
        assert c.execute("SELECT count(*) FROM runs").fetchone()[0] == 2  # the wrong URL started no run


@pytest.mark.parametrize("args, words", [
    (["optimize", "softmax_rows"], "--model is required"),
    (["optimize", "--model", "m"], "give a target"),
    (["optimize", "softmax_rows", "--model", "m", "--strategy", "nope"], "unknown strategy"),
    (["optimize", "softmax_rows", "--model", "m", "--turns", "0"], "turns"),
    (["optimize", "softmax_rows", "--model", "m", "--device", "cuda", "--language", "cpp"], "does not run on --device cuda"),
    (["optimize", "softmax_rows", "--model", "m", "--max-tokens", "gpt-*=lots"], "--max-tokens 'gpt-*=lots': expected n or model=n"),
    (["optimize", "mymodel.py:Net", "--model", "m"], "--inputs"),
    (["optimize", "--resume", "nope"], "no kernelcraft workspace"),
    (["optimize", "--resume", "nope", "--strategy", "evolve", "--set", "M=4"], "keeps its own settings: drop --strategy, --set"),
    (["report", "nope"], "no kernelcraft workspace"),
    (["runs", "list"], "no kernelcraft workspace"),
])
def test_optimize_mistakes_are_one_line_errors(tmp_path: Path, args: list[str], words: str) -> None:
    (tmp_path / "mymodel.py").write_text("class Net:\n    pass\n")
    assert words in one_line_error(kc(*args, cwd=tmp_path)).lower()


def test_history_keeps_the_opening_and_the_latest_turns() -> None:
    opening = [Message("system", "rules"), Message("user", "task")]
    exchanges = [Exchange("a" * 4000, f"feedback {i}") for i in range(5)]
    messages = trimmed_history(opening, exchanges, budget_tokens=2500, omitted_note=lambda n: f"({n} left out)")
    assert messages[0] == opening[0] and messages[1].content == "task\n\n(3 left out)"
    assert [m.content for m in messages[2:] if m.role == "user"] == ["feedback 3", "feedback 4"]
    assert [m.role for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert trimmed_history(opening, exchanges[:1], budget_tokens=10, omitted_note=str)[-1].content == "feedback 0"


def _row(sample: int, turn: int, status: str, speedup: float | None) -> AttemptRow:
    return AttemptRow(0, "r", "t", sample, turn, None, None, status, speedup, "", 0.0)


def test_best_attempt_is_the_fastest_correct_then_the_earliest() -> None:
    rows = [_row(0, 0, "incorrect", None), _row(1, 2, "correct", 1.5), _row(0, 1, "correct", 1.5), _row(0, 2, "correct", 1.2)]
    assert best_attempt(rows) is rows[2]
    assert best_attempt([_row(0, 0, "parse_failed", None)]) is None


def test_module_targets_are_checked_and_named(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("import torch\n\nclass Net(torch.nn.Module):\n    pass\n\ndef get_inputs():\n    return []\n")
    task = task_from_module(f"{tmp_path}/m.py:Net", f"{tmp_path}/m.py:get_inputs")
    assert task.key == "user/m.Net" and "Model = Net" in task.source and "def get_init_inputs" in task.source
    assert task.source.count("def get_inputs") == 1 and module_name(task) == "user_m_Net"
    for model, inputs, words in [("m.py:Net", "m.py:get_inputs", "no such file"), (f"{tmp_path}/m.py:Nope", f"{tmp_path}/m.py:get_inputs", "no class"),
                                 (f"{tmp_path}/m.py:Net", f"{tmp_path}/m.py:nope", "no function"), (f"{tmp_path}/m.py", "x", "PATH.py:NAME")]:
        with pytest.raises(TaskError, match=words):
            task_from_module(model, inputs)


def _answer(requests: Path, skip: int = 0) -> None:
    """Write the replies (prose, no code) to a requests file's lines, but the first `skip`."""
    lines = [json.loads(line) for line in requests.read_text().splitlines()]
    assert all(q["url"] == "/v1/chat/completions" and q["body"]["model"] == "fake-coder" for q in lines)
    assert all(q["body"]["max_tokens"] == 1000 for q in lines)  # --max-tokens 'fake-*=1000'
    replies = [{"custom_id": q["custom_id"], "error": None, "response": {"status_code": 200, "body": {
        "object": "chat.completion", "model": "fake-coder", "choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": PROSE}}], "usage": {"prompt_tokens": 7, "completion_tokens": 3}}}}
        for q in lines[skip:]]
    requests.with_name(requests.name.replace("round-", "answers-").replace(".requests", "")).write_text(
        "".join(json.dumps(r) + "\n" for r in replies))


def test_batch_files_stop_the_run_until_the_replies_are_in(tmp_path: Path) -> None:
    batch = tmp_path / "batch"
    args = ["optimize", "row_mean_square", "--model", f"batch:{batch}:fake-coder", "--device", "cpu",
            "--samples", "2", "--turns", "2", "--max-tokens", "fake-*=1000"]
    p = kc(*args, cwd=tmp_path)
    assert p.returncode == 3 and "Traceback" not in p.stderr, p.stderr
    assert "2 model requests wait for batch replies (2 in round-0001.requests.jsonl (written now))" in p.stderr, p.stderr
    with _db(tmp_path) as c:
        (run_id,) = c.execute("SELECT id FROM runs").fetchone()
    assert p.stderr.strip().splitlines()[-1].endswith(f"continue with: kernelcraft optimize --resume {run_id}"), p.stderr
    # One of the two replies is in: that sample goes on to its next turn, the other still waits.
    _answer(batch / "round-0001.requests.jsonl", skip=1)
    p = kc("optimize", "--resume", run_id, cwd=tmp_path)
    assert p.returncode == 3, p.stderr
    assert (f"resuming: batch {batch}: 1 of 2 requests have replies, 1 still pending (1 in round-0001.requests.jsonl)"
            in p.stderr), p.stderr
    assert ("2 model requests wait for batch replies (1 in round-0001.requests.jsonl, 1 in round-0002.requests.jsonl "
            "(written now))") in p.stderr, p.stderr
    _answer(batch / "round-0001.requests.jsonl")
    _answer(batch / "round-0002.requests.jsonl")
    p = kc("optimize", "--resume", run_id, cwd=tmp_path)
    assert p.returncode == 3 and f"resuming: batch {batch}: 3 of 3 requests have replies, 0 still pending" in p.stderr, p.stderr
    assert "1 model requests wait for batch replies (1 in round-0003.requests.jsonl (written now))" in p.stderr, p.stderr
    _answer(batch / "round-0003.requests.jsonl")
    p = kc("optimize", "--resume", run_id, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    with _db(tmp_path) as c:
        assert c.execute("SELECT count(*) FROM attempts").fetchone()[0] == 4


def test_the_progress_view_has_a_line_per_task_under_way() -> None:
    from rich.progress import Progress

    from kernelcraft.cli.optimize import ProgressView
    from kernelcraft.llm import Spend
    from kernelcraft.search import SearchEvent

    bar, tasks = Progress(), Progress()
    view = ProgressView(bar, tasks, total=2, done=0, spend=Spend())
    view(SearchEvent("attempt", "a", 0, 0, "incorrect"))
    view(SearchEvent("attempt", "b", 0, 0, "correct", 1.5))
    view(SearchEvent("attempt", "a", 0, 1, "correct", 2.25))
    assert [t.description for t in tasks.tasks] == ["a: turn 2, 2 attempts, best 2.25x", "b: turn 1, 1 attempt, best 1.50x"]
    view(SearchEvent("task_done", "b"))
    assert [t.description for t in tasks.tasks] == ["a: turn 2, 2 attempts, best 2.25x"]
    assert bar.tasks[0].completed == 1 and "3 attempts, 2 correct, best 2.25x" in bar.tasks[0].fields["info"]
