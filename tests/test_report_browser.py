"""The HTML run report in a real browser: Debian's chromium, headless, driven by selenium through chromedriver.

Skipped where chromium or chromedriver is missing, except under CI (env var CI set), where that is a failure:
`.ci/run` installs both, so CI always runs this test."""

from __future__ import annotations

import functools
import http.server
import io
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kernelcraft.report import write_report
from kernelcraft.store import Store

from .test_report_html import LEAKY, RMS, build_run

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
PLOTS = ("plot-fast-p", "plot-distribution", "plot-turns")
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--window-size=1400,1000")


def _require_browser(paths: tuple[Path, ...] = (CHROMIUM, CHROMEDRIVER)) -> None:
    missing = [str(p) for p in paths if not p.exists()]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("the selenium package")
    if not missing:
        return
    why = f"{', '.join(missing)} missing (apt-get install chromium chromium-driver; pip install selenium)"
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the browser test: {why}")
    pytest.skip(why)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Silent: request lines would clutter the test output."""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A real HTTP server on 127.0.0.1 serving a directory of reports: (base URL, directory)."""
    root = tmp_path_factory.mktemp("site")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", root
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    _require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def _open(browser: Any, site: tuple[str, Path], name: str, trajectory: list[tuple] | None = None) -> str:
    """Write a synthetic run's report into the site as `name` and load it; the run id."""
    base, root = site
    with Store(root / name) as store:
        run_id = build_run(store, **({"trajectory": trajectory} if trajectory else {}))
        write_report(store, run_id, root / f"{name}.html")
    browser.get(f"{base}/{name}.html")
    return run_id


def _severe(browser: Any) -> list[dict[str, Any]]:
    return [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]


def _full_page_png(browser: Any) -> bytes:
    """The whole page, not just the window: chromium's DevTools capture beyond the viewport."""
    import base64

    size = browser.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    shot = browser.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}})
    return base64.b64decode(shot["data"])


def _check_png(png: bytes, tmp_path: Path, name: str = "report.png") -> Path:
    from PIL import Image

    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG" and image.width >= 1000 and image.height >= 1000, (image.format, image.size)
    colours = image.convert("RGB").getcolors(maxcolors=1 << 24)
    assert colours is not None and len(colours) > 500, "the screenshot is (nearly) blank"
    path = tmp_path / name
    path.write_bytes(png)
    if os.environ.get("KERNELCRAFT_SCREENSHOT_DIR"):
        keep = Path(os.environ["KERNELCRAFT_SCREENSHOT_DIR"])
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, keep / name)
    return path


def test_the_report_loads_cleanly_and_shows_its_plots_and_tasks(browser: Any, site: tuple[str, Path],
                                                                tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    run_id = _open(browser, site, "run")
    assert run_id in browser.title
    assert _severe(browser) == []
    # self-contained: the page itself is the only thing the browser fetched
    assert browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)") == []
    for plot in PLOTS:
        svg = browser.find_element(By.CSS_SELECTOR, f"#{plot} svg")
        assert svg.is_displayed(), plot
        assert svg.size["width"] > 100 and svg.size["height"] > 100, (plot, svg.size)
        # glyphs and lines drawn through <use> references resolve inside the page
        assert browser.execute_script("return arguments[0].getBBox().width", svg) > 100, plot
    sections = browser.find_elements(By.CSS_SELECTOR, "article.task")
    assert [s.get_attribute("id") for s in sections] == ["task-examples-softmax_rows", "task-examples-rms_norm",
                                                        "task-examples-leaky_relu_clamp"]
    assert "no correct candidate" in sections[1].text.lower()
    assert "softmax v3" in sections[0].find_element(By.CSS_SELECTOR, "pre code").text
    _check_png(_full_page_png(browser), tmp_path)
    assert _severe(browser) == []


def test_a_run_with_no_correct_kernel_renders_without_errors(browser: Any, site: tuple[str, Path]) -> None:
    from selenium.webdriver.common.by import By

    _open(browser, site, "failing", [(RMS, 0, "build_failed", None, 900, 100), (LEAKY, 0, "incorrect", None, 800, 50)])
    assert _severe(browser) == []
    for plot in PLOTS:
        svg = browser.find_element(By.CSS_SELECTOR, f"#{plot} svg")
        assert svg.is_displayed() and svg.size["width"] > 100 and svg.size["height"] > 100, plot
    assert browser.find_element(By.CSS_SELECTOR, "#tasks table").text.lower().count("no correct candidate") == 2


def test_a_missing_browser_skips_here_and_fails_under_ci(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    paths = (tmp_path / "no-chromium", CHROMEDRIVER)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no-chromium"):
        _require_browser(paths)
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match="CI must run the browser test"):
        _require_browser(paths)
