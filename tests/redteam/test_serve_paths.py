"""The reward service as a token holder would probe it (issue 45): a real `kernelcraft serve-judge` on loopback,
asked for files outside its task roots, for sizes the CLI refuses, and given a task by its source whose module
code acts. A path outside the roots is refused before anything is read, alike whether the file exists or not,
quoting nothing of it; a task's own code runs only in the judge's sandboxed trusted worker.

The CPU service runs in CI; the same tests on a `--device cuda` service are `-m gpu` (CUDA's trusted worker is
confined without a PID namespace of its own: the inline task's attempt is worth repeating there)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from kernelcraft.tasks import resolve_task  # noqa: E402

from ..test_reward_service import SIZES, TASK, TOKEN, Service  # noqa: E402
from ..test_judge_cpu import triton_candidate  # noqa: E402

SECRET = "kc-redteam-secret-4711"  # in every file outside the roots, and in the root's broken task
REFUSED = "not a task this service serves"
TASK_SOURCE = resolve_task(TASK).source


def _write_tree(base: Path) -> tuple[Path, Path]:
    """The service's task root and a directory beside it, outside: a valid task there (so that reading it would
    succeed), a file whose syntax error line quotes the secret, and symlinks from the root to both and to nothing."""
    root, outside = base / "tasks", base / "outside"
    (root / "level1").mkdir(parents=True)
    outside.mkdir()
    (root / "level1" / "1_leaky.py").write_text(TASK_SOURCE)
    (root / "broken.py").write_text(f"{SECRET} = (\n")
    (outside / "task.py").write_text(f"# {SECRET}\n{TASK_SOURCE}")
    (outside / "broken.py").write_text(f"{SECRET} = (\n")
    (root / "escape.py").symlink_to(outside / "task.py")
    (root / "escape_broken.py").symlink_to(outside / "broken.py")
    (root / "escape_nowhere.py").symlink_to(outside / "no_such.py")
    (root / "escape_dir").symlink_to(outside, target_is_directory=True)
    return root, outside


@pytest.fixture(scope="module", params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
           cache_dir: Path) -> Iterator[tuple[Service, Path, Path]]:
    base = tmp_path_factory.mktemp(f"probe-{request.param}")
    root, outside = _write_tree(base)
    with Service(base / "ws", cache_dir, workers=1, device=request.param, task_roots=[root]) as s:
        yield s, root, outside
        assert s.stop() == 0


def _post(service: Service, body: dict[str, Any]) -> httpx.Response:
    with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http:
        return http.post("/v1/jobs", json={"source": triton_candidate(), **body})


def _jobs(service: Service) -> int:
    with httpx.Client(base_url=service.url) as http:
        health = http.get("/v1/health").json()
    return sum(health[status] for status in ("queued", "running", "done", "failed"))


def test_paths_outside_the_roots_are_refused_alike_and_quote_nothing(served: tuple[Service, Path, Path]) -> None:
    service, root, outside = served
    probes = {  # (the path a client sends, whether a file is there)
        "/etc/passwd": True, "/etc/kc-no-such-file": False,
        str(outside / "task.py"): True, str(outside / "no_such.py"): False,  # absolute paths to Python files outside
        "../outside/task.py": True, "../outside/no_such.py": False,  # `..` out of the root
        "level1/../../outside/broken.py": True, f"{root}/../outside/task.py": True,
        "escape.py": True, "escape_broken.py": True, "escape_nowhere.py": False,  # symlinks out of the root
        "escape_dir/task.py": True, "escape_dir/no_such.py": False,
        "level1": True, "": False,  # a directory, and the root itself
    }
    before = _jobs(service)
    answers = {}
    for probe in probes:
        r = _post(service, {"task": probe})
        assert r.status_code == 400, (probe, r.text)
        assert SECRET not in r.text and "root:" not in r.text, (probe, r.text)
        detail = r.json()["detail"]
        assert REFUSED in detail and "\n" not in detail, detail
        answers[probe] = detail.replace(probe, "PROBE", 1)
    # one answer whatever the path: it tells nothing of whether a file is there, or of what it holds
    assert len(set(answers.values())) == 1, answers
    assert _jobs(service) == before  # nothing was queued


def test_a_broken_task_under_a_root_is_named_without_its_content(served: tuple[Service, Path, Path]) -> None:
    service, _, _ = served
    r = _post(service, {"task": "broken.py"})
    assert r.status_code == 400 and r.json()["detail"] == "broken.py: not valid Python", r.text
    r = _post(service, {"task": "level1/no_such.py"})
    assert r.status_code == 400 and r.json()["detail"] == "level1/no_such.py: no such task file", r.text


@pytest.mark.parametrize("task", [TASK, "level1/1_leaky.py"])
@pytest.mark.parametrize("sizes, words", [
    ({"N": -5}, "sizes N=-5: must be a positive integer"),
    ({"N": 0}, "sizes N=0: must be a positive integer"),
    ({"N": 4.5}, "sizes N=4.5: must be an integer"),
    ({"N": "4096"}, "sizes N='4096': must be an integer"),
    ({"SLOPE": [1]}, "sizes SLOPE=[1]: must be a finite number"),
    ({"NO_SUCH": 3}, "sizes NO_SUCH: not a module-level constant"),
])
def test_sizes_the_cli_refuses_are_refused_at_submit(served: tuple[Service, Path, Path], task: str,
                                                     sizes: dict[str, Any], words: str) -> None:
    service, _, _ = served
    before = _jobs(service)
    for body in ({"task": task}, {"task_source": TASK_SOURCE, "task_name": "remote/leaky"}):
        r = _post(service, {**body, "sizes": sizes})
        assert r.status_code == 400 and words in r.json()["detail"] and "\n" not in r.json()["detail"], (body, r.text)
        if "task" in body:  # a file on the server: its constants are not listed
            assert "its constants" not in r.text, r.text
    assert _jobs(service) == before


def test_tasks_under_the_root_and_inline_task_source_are_judged(served: tuple[Service, Path, Path], tmp_path: Path) -> None:
    """A task by its path under the root, relative and absolute, and by its source: each judged correct. The
    source's module code tries to write a file here; it runs only in the sandboxed trusted worker, which cannot,
    so the file must not appear (in the service's own process, or a worker left unconfined, it would)."""
    service, root, _ = served
    marker = tmp_path / "task-code-ran-unconfined"
    acting = (f"{TASK_SOURCE}\n\ntry:\n    open({str(marker)!r}, 'w').write('ran')\nexcept OSError:\n    pass\n")
    bodies = [{"task": "level1/1_leaky.py"}, {"task": str(root / "level1" / "1_leaky.py")},
              {"task_source": acting, "task_name": "remote/acting"}]
    with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http:
        ids = []
        for body in bodies:
            r = http.post("/v1/jobs", json={"source": triton_candidate(), "sizes": SIZES, **body})
            assert r.status_code == 201, r.text
            ids.append(r.json()["job_id"])
    from kernelcraft.service import JudgeClient

    with JudgeClient(service.url, TOKEN) as judge:
        verdicts = [judge.wait(i, poll_s=0.2, timeout_s=600) for i in ids]  # a bound on a hang, not on speed
    assert [v.task for v in verdicts] == ["level1/1_leaky", "level1/1_leaky", "remote/acting"]
    assert all(v.correct for v in verdicts), [v.message for v in verdicts]
    assert not marker.exists()
