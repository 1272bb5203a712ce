"""RayPool on a real local Ray cluster of two nodes (ray.cluster_utils.Cluster), each with its CPU judge: a suite
judged while one node is killed mid-way loses no job, settles each once, records no duplicate, and gives the
verdicts LocalPool gives."""

from __future__ import annotations

import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Iterator

import pytest

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

from kernelcraft.judge import Job, RayPool, RayUnavailable, Result, open_executor  # noqa: E402
from kernelcraft.store import Store  # noqa: E402
from kernelcraft.tasks import resolve_task  # noqa: E402

from .conftest import FAST  # noqa: E402

_SIZES = {"leaky_relu_clamp": {"N": 1 << 16}, "swish_residual": {"M": 128, "D": 256}, "softmax_rows": {"M": 256, "N": 128}}

# Candidates that build nothing (a suite of C++ builds would take minutes on a CI machine), with three outcomes:
# library calls (correct, counted as the library's), a wrong answer, a shape mistake.
_CANDIDATES = {
    "leaky_relu_clamp": [
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\nclass ModelNew(nn.Module):\n"
        "    def __init__(self, slope, low, high):\n        super().__init__()\n        self.a = (slope, low, high)\n\n"
        "    def forward(self, x):\n        s, lo, hi = self.a\n        return torch.clamp(F.leaky_relu(x, s), lo, hi)\n",
        "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def __init__(self, slope, low, high):\n"
        "        super().__init__()\n\n    def forward(self, x):\n        return torch.clamp(x, -0.25, 1.5)\n",
    ],
    "swish_residual": [
        "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x, y):\n"
        "        return torch.nn.functional.silu(x) + y\n",
        "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x, y):\n"
        "        return (x + y)[:1]\n",
    ],
    "softmax_rows": [
        "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def __init__(self, t):\n"
        "        super().__init__()\n        self.t = t\n\n    def forward(self, x):\n"
        "        return torch.softmax(x * (1.0 / self.t), dim=-1)\n",
        "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def __init__(self, t):\n"
        "        super().__init__()\n\n    def forward(self, x):\n        return torch.softmax(x, dim=-1)\n",
    ],
}


# The test is about losing a node, not about timeouts: on a CI machine of two cores running two nodes' judges beside
# other tests, a trivial call has stalled past the 10 s floor of the scaled timeouts (a 'timeout' verdict).
_CONFIG = FAST.with_overrides({"timeouts": {"floor": 120.0}})


def _jobs() -> list[Job]:
    jobs = []
    for name, sources in _CANDIDATES.items():
        task = resolve_task(name).with_sizes("cpu", _SIZES[name])
        jobs += [Job(task, src, tag=f"{name}#{i}", config=_CONFIG) for i, src in enumerate(sources)]
    return jobs


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    # A killed node is found dead in about 3 s, not Ray's default 30 or more: the test waits for it.
    fast_death = {"health_check_initial_delay_ms": 0, "health_check_period_ms": 1000, "health_check_failure_threshold": 3}
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "_system_config": fast_death})
    c.add_node(num_cpus=1)
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False, include_dashboard=False)
    yield c
    ray.shutdown()
    c.shutdown()


def _outcome(r: Result) -> tuple[str, str]:
    assert r.verdict is not None, r.error
    return r.verdict.status.value, ",".join(sorted(f.code for f in r.verdict.flags if f.code != "noisy_timing"))


# What each candidate's verdict is on a judge of one process (LocalPool's, as tests/test_judge_cpu.py and the redteam
# suite check such candidates): the cluster's must be the same.
EXPECTED = {"leaky_relu_clamp#0": ("hack_detected", ""), "leaky_relu_clamp#1": ("incorrect", ""),
            "swish_residual#0": ("hack_detected", ""), "swish_residual#1": ("incorrect", ""),
            "softmax_rows#0": ("hack_detected", ""), "softmax_rows#1": ("incorrect", "")}


def test_a_suite_survives_a_node_killed_mid_way(cluster: Cluster, tmp_path: Path) -> None:
    jobs = _jobs()

    doomed = next(n for n in cluster.worker_nodes)
    settled: Counter[str] = Counter()
    with Store(tmp_path / "ws") as store, RayPool("cpu", address=cluster.address, workers=1) as pool:
        assert len(pool.hosts) == 2 and pool.workers == 2
        run_id = store.start_run("eval-suite", {})
        futures = [pool.submit(j) for j in jobs]
        killed = False
        for f in futures:
            r = f.result(timeout=600)
            settled[r.job.tag] += 1
            store.record_verdict(r.job.task, r.job.source, r.verdict, run_id=run_id, origin=r.job.tag)
            if not killed:  # once the doomed node's host holds a job, kill its node under it
                host = next(h for h in pool.hosts if h.node == doomed.node_id)
                while host.free > 0:
                    time.sleep(0.05)
                cluster.remove_node(doomed, allow_graceful=False)
                killed = True
        assert pool.requeued >= 1 and len(pool.alive_hosts()) == 1
        got = {f.result().job.tag: _outcome(f.result()) for f in futures}
        db = sqlite3.connect(store.path)
        rows = db.execute("SELECT c.origin, count(*) FROM verdicts v JOIN candidates c ON c.id = v.candidate_id "
                                  "WHERE v.run_id=? GROUP BY c.origin", (run_id,)).fetchall()
        nodes = db.execute("SELECT DISTINCT json_extract(verdict_json, '$.env.node') FROM verdicts").fetchall()
    assert settled == Counter(j.tag for j in jobs)  # every verdict arrived, once
    assert got == EXPECTED  # as LocalPool judges them
    assert sorted(rows) == sorted((j.tag, 1) for j in jobs)  # no duplicate in the store
    assert all(n[0] for n in nodes)


def test_without_a_cluster_or_a_gpu_ray_says_why(cluster: Cluster) -> None:
    with pytest.raises(RayUnavailable, match="no GPU"):
        RayPool("cuda", address=cluster.address)
    with pytest.raises(Exception, match="--gpus and --ray"):
        open_executor("cpu", cache_dir=Path("/nonexistent"), gpus="0", ray="auto")
