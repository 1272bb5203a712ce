"""A new user's first hour, as one test: the installed `kernelcraft` command, the README's quick start run as written
in a fresh directory, `optimize` against a real OpenAI-compatible server on loopback, and the run's report opened in
Chromium (a full-page screenshot kept where KERNELCRAFT_SCREENSHOT_DIR says, to be looked at)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from .conftest import CANDIDATES, ROOT
from .fake_openai import FakeOpenAI
from .test_report_browser import _check_png, _full_page_png, _severe, browser  # noqa: F401  (the browser fixture)

KERNELCRAFT = Path(sys.executable).parent / "kernelcraft"  # the console script `pip install` put beside python


def _quick_start() -> list[list[str]]:
    """The commands of the README's first quick-start block."""
    section = (ROOT / "README.md").read_text().split("## Quick start", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.S)
    assert block is not None
    return [shlex.split(line) for line in block.group(1).splitlines() if line.strip()]


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("KERNELCRAFT_WORKSPACE", "KERNELCRAFT_DEBUG")}
    return subprocess.run([str(KERNELCRAFT), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def test_a_new_users_path_from_the_quick_start_to_the_report_in_a_browser(browser: Any, tmp_path: Path,  # noqa: F811
                                                                           cache_dir: Path) -> None:
    from selenium.webdriver.common.by import By

    assert KERNELCRAFT.is_file(), "the install made no kernelcraft command"
    (tmp_path / "examples").symlink_to(ROOT / "examples")  # the quick start's paths are the checkout's
    (tmp_path / "kernelcraft-workspace").mkdir()
    (tmp_path / "kernelcraft-workspace" / "cache").symlink_to(cache_dir)  # the session's builds
    listing, evaluation = _quick_start()
    assert listing[0] == evaluation[0] == "kernelcraft"
    p = _run(listing[1:], tmp_path)
    assert p.returncode == 0 and "leaky_relu_clamp" in p.stdout, p.stderr
    p = _run(evaluation[1:], tmp_path)
    assert p.returncode == 0 and "status: correct" in p.stdout, p.stdout + p.stderr
    verdict = re.search(r"verdict (\d+) recorded", p.stdout)
    assert verdict is not None
    shown = _run(["verdicts", "show", verdict.group(1)], tmp_path)  # what eval recorded, read back as the README says
    assert shown.returncode == 0 and "status: correct" in shown.stdout, shown.stdout + shown.stderr

    honest = (CANDIDATES / "cpu" / "leaky_relu_clamp.py").read_text()
    with FakeOpenAI(models=["fake-coder"], responder=lambda m: f"Fused:\n\n```python\n{honest}```\n") as srv:
        p = _run(["optimize", "leaky_relu_clamp", "--model", "fake-coder", "--base-url", srv.url, "--device", "cpu",
                  "--samples", "1", "--turns", "1"], tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    report = Path(next(line.split("report: ", 1)[1] for line in p.stdout.splitlines() if line.startswith("report: ")).strip())
    assert report.is_file()

    browser.get(report.resolve().as_uri())
    assert _severe(browser) == []
    task = browser.find_element(By.CSS_SELECTOR, "article.task")
    assert task.get_attribute("id") == "task-examples-leaky_relu_clamp" and "best" in task.text
    assert "kc_cpu_leaky_relu_clamp" in task.find_element(By.CSS_SELECTOR, "pre code").text
    assert "kernelcraft optimize --config run.toml" in browser.find_element(By.CSS_SELECTOR, "#run").text
    _check_png(_full_page_png(browser), tmp_path, "new-user-report.png")
