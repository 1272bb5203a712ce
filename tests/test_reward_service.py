"""The judge as a reward service: a real `kernelcraft serve-judge` subprocess on loopback, real clients,
the real judge on the CPU, the real store."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator, Sequence

import pytest

# The train extra: absent on a bare GPU machine, where these CPU tests are skipped.
httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from kernelcraft.judge import DeviceDescription, Judge, Status, Verdict  # noqa: E402
from kernelcraft.store import Store  # noqa: E402
from kernelcraft.tasks import resolve_task  # noqa: E402
from kernelcraft.train.rewards import RewardConfig, coder_reward  # noqa: E402
from kernelcraft.service import Health, JobView, JudgeClient, ServiceError  # noqa: E402

from .conftest import FAST  # noqa: E402
from .test_cli import kc, one_line_error  # noqa: E402
from .test_judge_cpu import triton_candidate  # noqa: E402

TOKEN = "s3cret-token"
TOKEN_ENV = "KERNELCRAFT_JUDGE_TOKEN"
# The judge settings the tests' own cpu_judge uses (conftest.FAST), as the service's --config file.
FAST_TOML = "[timing]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in FAST.to_dict()["timing"].items())
TASK = "leaky_relu_clamp"
SIZES = {"N": 4096}  # one Triton program per call: each evaluation takes seconds, not minutes
CANDIDATES = {
    "correct": triton_candidate(),
    "incorrect": triton_candidate(slope="0.2"),
    "runtime_error": triton_candidate(forward="x = x.view(-1, 7, 3)"),
    "static_rejected": "import subprocess\n" + triton_candidate(),
}
# Flags that come from the clocks (noise, a slowed reference) may differ between two honest measurements.
TIMING_FLAGS = {"noisy_timing", "slowed_reference", "clock_drift", "low_coverage"}


class Service:
    """`kernelcraft serve-judge` in a subprocess, on a loopback port, with the session's build cache."""

    def __init__(self, workspace: Path, cache: Path, workers: int, device: str = "cpu",
                 task_roots: Sequence[Path] = ()) -> None:
        self.workspace, self.workers, self.port = workspace, workers, 0
        self.device, self.task_roots = device, task_roots
        workspace.mkdir(parents=True, exist_ok=True)
        if not (workspace / "cache").exists():
            (workspace / "cache").symlink_to(cache)
        (workspace.parent / "fast.toml").write_text(FAST_TOML)
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "Service":
        log = self.workspace.parent / "service.log"
        env = {**os.environ, TOKEN_ENV: TOKEN}
        env.pop("KERNELCRAFT_DEBUG", None)
        with open(log, "w") as stderr:  # a file, not a pipe: nobody has to keep reading it
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kernelcraft.cli", "serve-judge", "-w", str(self.workspace), "--device", self.device,
                 "--port", str(self.port), "--workers", str(self.workers), "--config", str(self.workspace.parent / "fast.toml"),
                 *(arg for root in self.task_roots for arg in ("--task-root", str(root)))],
                env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        deadline = time.monotonic() + 120
        while not (m := re.search(r"http://127\.0\.0\.1:(\d+)", log.read_text())):
            assert self.proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        self.port = int(m.group(1))  # a restart binds the same port again
        with JudgeClient(self.url, TOKEN) as client:
            while True:
                try:
                    client.health()
                    return self
                except ServiceError:
                    assert self.proc.poll() is None and time.monotonic() < deadline, log.read_text()
                    time.sleep(0.2)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()  # SIGKILL: no shutdown code runs
        self.proc.wait()

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)

    def __enter__(self) -> "Service":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:  # a test that failed half-way
            self.kill()


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Iterator[Service]:
    with Service(tmp_path_factory.mktemp("svc") / "ws", cache_dir, workers=2) as s:
        yield s
        assert s.stop() == 0
    with Store(s.workspace) as store:
        assert not store.jobs("running")  # what was in flight went back to the queue


def test_hundreds_of_concurrent_submissions_each_judged_once(service: Service, cpu_judge: Judge) -> None:
    task = resolve_task(TASK).with_sizes("cpu", SIZES)
    kinds = list(CANDIDATES)

    def client(n: int) -> list[tuple[int, str, Verdict]]:
        """25 submissions, then each one's verdict."""
        with JudgeClient(service.url, TOKEN) as judge:
            mine = []
            for i in range(25):
                kind = kinds[(n + i) % len(kinds)]
                mine.append((judge.submit(TASK, CANDIDATES[kind], sizes=SIZES, client_key=f"c{n}-{i}"), kind))
            again = judge.submit(TASK, CANDIDATES[mine[0][1]], sizes=SIZES, client_key=f"c{n}-0")
            assert again == mine[0][0]  # the same idempotency key is the same job
            return [(jid, kind, judge.wait(jid, poll_s=0.2, timeout_s=120)) for jid, kind in mine]

    with ThreadPoolExecutor(9) as pool:
        judging = pool.submit(lambda: {k: cpu_judge.evaluate(task, s) for k, s in CANDIDATES.items()})
        results = [r for f in [pool.submit(client, n) for n in range(8)] for r in f.result()]
        direct = judging.result()

    ids = [jid for jid, _, _ in results]
    assert len(ids) == 200 and len(set(ids)) == 200
    with Store(service.workspace) as store:
        jobs = store.jobs()
        assert len(jobs) == 200 and {j.id for j in jobs} == set(ids)
        assert all(j.status == "done" and j.claims == 1 and j.verdict_id is not None for j in jobs)
        # equal candidates are judged once: one stored verdict per distinct candidate
        assert len(store.verdicts(task_key=task.key)) == len(CANDIDATES)
        assert Counter(j.reused for j in jobs)[False] == len(CANDIDATES)
    for _, kind, v in results:
        d = direct[kind]
        assert v.status is d.status, (kind, v.message, d.message)
        assert {f.code for f in v.flags} - TIMING_FLAGS == {f.code for f in d.flags} - TIMING_FLAGS, kind
        assert v.task == task.key and v.candidate_hash == d.candidate_hash
    assert [direct[k].status.value for k in kinds] == kinds  # the four candidates cover four outcomes


def test_a_killed_service_finishes_its_queue_after_a_restart(tmp_path: Path, cache_dir: Path) -> None:
    task_source = resolve_task(TASK).source  # submitted by source this time, under a name of the client's
    sources = [triton_candidate(forward=f"_ = {i}") for i in range(3)]
    with Service(tmp_path / "ws", cache_dir, workers=1) as s, JudgeClient(s.url, TOKEN, retry_s=120) as judge:
        ids = [judge.submit(None, src, task_source=task_source, task_name="remote/leaky", sizes=SIZES) for src in sources]
        deadline = time.monotonic() + 120
        while [judge.get(i).status for i in ids[:2]] != ["done", "running"]:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        s.kill()
        with Store(s.workspace) as store:
            assert [j.status for j in store.jobs()] == ["done", "running", "queued"]
        s.start()
        verdicts = [judge.wait(i, poll_s=0.2, timeout_s=120) for i in ids]
        assert s.stop() == 0
    assert all(v.correct and v.task == "remote/leaky" for v in verdicts), [v.message for v in verdicts]
    with Store(s.workspace) as store:
        jobs = store.jobs()
        assert [j.status for j in jobs] == ["done"] * 3
        assert [j.claims for j in jobs] == [1, 2, 1]  # the job killed mid-run was taken again
        assert len(store.verdicts(task_key="remote/leaky")) == 3  # the killed evaluation left no verdict


def test_every_route_but_health_needs_the_token(service: Service) -> None:
    with httpx.Client(base_url=service.url) as http:
        assert http.get("/v1/health").status_code == 200
        assert http.get("/v1/jobs/1").status_code == 401
        assert http.post("/v1/jobs", json={"task": TASK, "source": "x"}).status_code == 401
        wrong = {"Authorization": "Bearer not-the-token"}
        assert http.get("/v1/jobs/1", headers=wrong).status_code == 401
        assert http.post("/v1/jobs", json={"task": TASK, "source": "x"}, headers=wrong).status_code == 401
    with JudgeClient(service.url, "not-the-token") as judge, pytest.raises(ServiceError, match="refused the token") as e:
        judge.submit(TASK, CANDIDATES["correct"])
    assert e.value.status == 401


def test_bad_requests_are_clear_errors_and_queue_nothing(service: Service) -> None:
    with JudgeClient(service.url, TOKEN) as judge:
        before = judge.health()
        with pytest.raises(ServiceError, match="no_such_task: not a task this service serves") as e:
            judge.submit("no_such_task", CANDIDATES["correct"])
        assert e.value.status == 400
        with pytest.raises(ServiceError, match="missing Model") as e:
            judge.submit(None, CANDIDATES["correct"], task_source="import torch\n", task_name="t")
        assert e.value.status == 400
        with pytest.raises(ServiceError, match="no job 987654") as e:
            judge.get(987654)
        assert e.value.status == 404
        after = judge.health()
        assert (after.queued, after.running, after.done, after.failed) == (before.queued, before.running, before.done,
                                                                          before.failed)
    with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        r = http.post("/v1/jobs", json={"task": TASK, "task_source": "x", "task_name": "t", "source": "x"})
        assert r.status_code == 422 and r.json()["detail"] == ("give exactly one of task (a task spec) and task_source "
                                                               "(a reference module's source)")
    with JudgeClient("http://127.0.0.1:9", TOKEN, retry_s=0) as judge, pytest.raises(ServiceError, match="cannot reach"):
        judge.get(1)


def test_serve_judge_refuses_to_start_without_a_token_or_on_a_served_workspace(service: Service, tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    assert "needs a token" in one_line_error(kc("serve-judge", "--device", "cpu", "--port", "0", cwd=tmp_path))
    (tmp_path / "token").write_text(TOKEN)
    line = one_line_error(kc("serve-judge", "-w", str(service.workspace), "--device", "cpu", "--port", "0",
                             "--token-file", str(tmp_path / "token"), cwd=tmp_path))
    assert "another kernelcraft serve-judge is serving" in line


def test_serve_judge_refuses_a_task_root_that_is_no_directory(tmp_path: Path) -> None:
    (tmp_path / "file.py").write_text("")
    for root in ("no_such_dir", "file.py"):
        line = one_line_error(kc("serve-judge", "--device", "cpu", "--port", "0", "--task-root", root, cwd=tmp_path,
                                 env={TOKEN_ENV: TOKEN}))
        assert line.endswith(f"--task-root {root}: no such directory"), line


def test_serve_judge_refuses_to_start_without_isolation_unless_told(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No `unshare` on the PATH: workers would get no namespaces, so the service does not start; with
    --insecure it goes on (here to the next check, the token)."""
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    line = one_line_error(kc("serve-judge", "--device", "cpu", "--port", "0", cwd=tmp_path))
    assert "cannot be fully isolated here" in line and "unshare" in line and "--insecure" in line
    line = one_line_error(kc("serve-judge", "--device", "cpu", "--port", "0", "--insecure", cwd=tmp_path))
    assert "needs a token" in line


def test_two_claimers_never_get_the_same_job(tmp_path: Path) -> None:
    """The store's claim is conditional on the job still being queued: two connections (as two processes
    would hold) racing over one queue each get different jobs, and every job is claimed once."""
    task = resolve_task(TASK)
    with Store(tmp_path) as a, Store(tmp_path) as b:
        ids = {a.add_job(task.key, {"key": task.key}, f"source {i}")[0].id for i in range(60)}

        def drain(store: Store) -> list[int]:
            claimed = []
            while (job := store.claim_job()) is not None:
                claimed.append(job.id)
            return claimed

        with ThreadPoolExecutor(4) as pool:
            claimed = [i for f in [pool.submit(drain, s) for s in (a, b, a, b)] for i in f.result()]
        assert sorted(claimed) == sorted(ids)
        assert [j.claims for j in a.jobs()] == [1] * 60
        assert a.requeue_running_jobs() == 60 and a.claim_job().claims == 2


class _StoredQueue:
    """What the API reads of a JobQueue, over a real store and nothing running: verdicts are put there by hand."""

    def __init__(self, store: Store) -> None:
        self.store, self.device, self.workers = store, DeviceDescription("cpu", "cpu0"), 1


def test_a_judge_error_is_answered_as_such_and_counted_by_cause(tmp_path: Path) -> None:
    """The judge's own failure reaches clients as a judge_error verdict with its cause (no reward: coder_reward
    rejects it), and the health route counts such jobs apart from the candidates' verdicts."""
    from fastapi.testclient import TestClient

    from kernelcraft.service.app import create_app
    from kernelcraft.service.resolve import task_record

    task = resolve_task(TASK)
    lost = Verdict(status=Status.JUDGE_ERROR, task=task.key, device="cpu", message="no space left on device")
    judged = Verdict(status=Status.INCORRECT, task=task.key, device="cpu", message="max abs error 0.5")
    with Store(tmp_path) as store:
        ids = []
        for i, verdict in enumerate((lost, judged, lost)):
            job, _ = store.add_job(task.key, task_record(task), f"source {i}")
            assert store.claim_job().id == job.id
            store.finish_job(job.id, store.record_verdict(task, f"source {i}", verdict))
            ids.append(job.id)
        # no context manager: the app's lifespan, which starts the queue, does not run
        http = TestClient(create_app(_StoredQueue(store), TOKEN), headers={"Authorization": f"Bearer {TOKEN}"})
        views = [JobView.model_validate(http.get(f"/v1/jobs/{i}").json()) for i in ids]
        health = Health.model_validate(http.get("/v1/health").json())
    assert [(v.status, v.judge_error) for v in views] == [("done", "no space left on device"), ("done", None),
                                                          ("done", "no space left on device")]
    verdict = Verdict.from_dict(views[0].verdict)
    assert verdict.status is Status.JUDGE_ERROR and coder_reward(verdict, RewardConfig()).rejected
    assert (health.done, health.judge_errors, health.judge_error_causes) == (3, 2, {"no space left on device": 2})
