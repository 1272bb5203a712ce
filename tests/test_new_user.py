"""A new user's first hour, as one test: the installed `kernelcraft` command, the README's quick start run as written
in a fresh directory (its `optimize` against a real OpenAI-compatible server on loopback, where the README's local
server would be), the workspace it leaves under 100 MB, and the run's report opened in Chromium (a full-page
screenshot kept where KERNELCRAFT_SCREENSHOT_DIR says, to be looked at)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from .conftest import CANDIDATES, ROOT
from .fake_openai import FakeOpenAI
from .test_report_browser import _check_png, _full_page_png, _severe, browser  # noqa: F401  (the browser fixture)

KERNELCRAFT = Path(sys.executable).parent / "kernelcraft"  # the console script `pip install` put beside python
# What the quick start runs besides kernelcraft: the model server's own setup, which the fake server stands in for.
SERVER_SETUP = "ollama"
WORKSPACE_LIMIT = 100 * 2**20  # issue 47: a fresh workspace after the quick start holds under 100 MB


def quick_start() -> list[list[str]]:
    """Every command of the README's quick start, in order: the lines of its bash blocks, comments dropped, less
    the model server's setup."""
    section = (ROOT / "README.md").read_text().split("\n## Quick start", 1)[1].split("\n## ", 1)[0]
    lines = [line for block in re.findall(r"```bash\n(.*?)```", section, flags=re.S) for line in block.splitlines()]
    commands = [words for words in (shlex.split(line, comments=True) for line in lines) if words]
    assert {words[0] for words in commands} == {"kernelcraft", SERVER_SETUP}, commands
    return [words for words in commands if words[0] == "kernelcraft"]


def _option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("KERNELCRAFT_WORKSPACE", "KERNELCRAFT_DEBUG")}
    return subprocess.run([str(KERNELCRAFT), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def _serve(base_url: str, model: str, reply: str) -> FakeOpenAI:
    """The model server on the README's port, or, where that port is taken (a real server, another test run), on
    a free one."""
    try:
        return FakeOpenAI(models=[model], responder=lambda messages: reply, port=urlsplit(base_url).port or 80)
    except OSError:
        return FakeOpenAI(models=[model], responder=lambda messages: reply)


def _disk_bytes(path: Path) -> int:
    """What a directory holds on disk, as `du` counts it (links not followed)."""
    out = subprocess.run(["du", "-s", "--block-size=1", str(path)], capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def test_the_quick_start_is_a_newcomers_whole_path() -> None:
    """The README's quick start goes from a listing to a verdict, its record, a run against a local server, the
    run's report and a look at the workspace, in that order."""
    assert [words[1:3] if words[1] in ("tasks", "verdicts") else words[1:2] for words in quick_start()] == [
        ["tasks", "list"], ["eval"], ["verdicts", "list"], ["verdicts", "show"], ["optimize"], ["runs"], ["report"], ["gc"]]
    optimize = next(words for words in quick_start() if words[1] == "optimize")
    assert _option(optimize, "--device") == "cpu" and urlsplit(_option(optimize, "--base-url")).hostname == "localhost"
    assert _option(optimize, "--base-url").endswith("/v1")  # the rule the README states


@pytest.mark.slow
def test_a_new_users_path_from_the_quick_start_to_the_report_in_a_browser(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    assert KERNELCRAFT.is_file(), "the install made no kernelcraft command"
    (tmp_path / "examples").symlink_to(ROOT / "examples")  # the quick start's paths are the clone's
    honest = (CANDIDATES / "cpu" / "leaky_relu_clamp.py").read_text()
    commands = quick_start()
    optimize = next(words for words in commands if words[1] == "optimize")
    base_url = _option(optimize, "--base-url")
    run_id = ""
    # A fresh workspace and build cache, as on a new machine: what it holds afterwards is the quick start's own.
    with _serve(base_url, _option(optimize, "--model"), f"Fused:\n\n```python\n{honest}```\n") as srv:
        served = base_url.replace(f":{urlsplit(base_url).port}/", f":{srv.port}/")
        for words in commands:
            args = [served if w == base_url else run_id if w == "RUN" else w for w in words[1:]]
            p = _run(args, tmp_path)
            said = p.stdout + p.stderr
            assert p.returncode == 0, f"{shlex.join(words)}:\n{said}"
            if args[0] == "eval":
                assert "status: correct" in p.stdout and "verdict 1 recorded" in p.stdout, said
            elif args[:2] == ["verdicts", "list"]:
                assert "leaky_relu_clamp" in p.stdout, said
            elif args[:2] == ["verdicts", "show"]:
                assert "status: correct" in p.stdout, said
            elif args[0] == "optimize":
                assert srv.requests, "optimize asked the model nothing"
                title = re.search(r"^run (\S+)", p.stdout, flags=re.M)  # its table's
                assert title is not None and "report: " in p.stdout, said
                run_id = title.group(1)
                assert (tmp_path / "kernelcraft-workspace" / "runs" / run_id / "report.html").is_file()
            elif args[0] == "runs":
                assert run_id in p.stdout, said
            elif args[0] == "gc":
                assert "builds" in p.stdout, said
    workspace = tmp_path / "kernelcraft-workspace"
    assert _disk_bytes(workspace) < WORKSPACE_LIMIT, subprocess.run(["du", "-ah", "-d", "3", str(workspace)],
                                                                    capture_output=True, text=True).stdout
    report = tmp_path / _option(next(words for words in commands if words[1] == "report"), "--out")
    assert report.is_file()

    browser.get(report.resolve().as_uri())
    assert _severe(browser) == []
    task = browser.find_element(By.CSS_SELECTOR, "article.task")
    assert task.get_attribute("id") == "task-examples-leaky_relu_clamp" and "best" in task.text
    assert "kc_cpu_leaky_relu_clamp" in task.find_element(By.CSS_SELECTOR, "pre code").text
    assert "kernelcraft optimize --config run.toml" in browser.find_element(By.CSS_SELECTOR, "#run").text
    _check_png(_full_page_png(browser), tmp_path, "new-user-report.png")
