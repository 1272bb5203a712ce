"""`RayPool`, the executor of a Ray cluster: one judge host (a Ray actor) per GPU on every node, or one per
node for the CPU, each owning a local judge with its own workers, device lock and build cache (one per
node, shared by the node's GPUs). Jobs travel as the task and the source; results come back as verdicts.

The driver keeps the queue: a host takes as many jobs as it has workers, each task kept to the host that took
it first (affinity.py), and a host that dies (its node lost, its process killed) has its jobs queued again for
the others. Each job's future is settled once,
so a caller that records verdicts as futures complete records each job once, whatever was judged twice.
"""

from __future__ import annotations

import socket
import tempfile
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Iterable, Iterator

from .affinity import AffinityQueue, Pending
from .config import JudgeConfig
from .device import DeviceDescription
from .executor import Job, Result, judged_map

START_TIMEOUT_S = 300.0  # a host imports torch and starts its spare workers
MAX_TRIES = 3  # a job whose host died this many times fails instead of killing another


class RayUnavailable(Exception):
    """Ray is not installed, or its cluster cannot be reached or has no device to judge on; one line."""


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayUnavailable("--ray needs Ray: pip install 'kernelcraft[distributed]'") from None
    return ray


def _host_lost(ray: Any) -> tuple[type, ...]:
    """The errors that say a host is gone for good (it is never restarted)."""
    names = ("RayActorError", "ActorUnavailableError")  # the second is newer than some Ray releases we accept
    return tuple(getattr(ray.exceptions, n) for n in names if hasattr(ray.exceptions, n))


class JudgeHost:
    """A Ray actor's body: a LocalPool on the one GPU Ray gave it (CUDA device 0 in its process), or on its
    node's CPU. Threaded (max_concurrency), so its pool's workers all take jobs."""

    def __init__(self, device: str, config: JudgeConfig | None, workers: int | None, cache_dir: str | None) -> None:
        import ray

        from .device import describe_device
        from .pool import LocalPool
        node = ray.get_runtime_context().get_node_id()
        gpu_ids = ray.get_gpu_ids()
        self.physical_index = int(gpu_ids[0]) if gpu_ids else 0
        self.host = socket.gethostname()
        cache = Path(cache_dir) if cache_dir else Path(tempfile.gettempdir()) / "kernelcraft-ray" / node[:16] / "cache"
        self.pool = LocalPool(device, cache_dir=cache, config=config, device_indices=[0], workers=workers)
        self.description = describe_device(device, 0)
        self.node = node

    def info(self) -> tuple[str, int, DeviceDescription, int]:
        """(node id, physical device index, device, workers)."""
        return self.node, self.physical_index, self.description, self.pool.workers

    def evaluate(self, job: Job) -> Result:
        result = self.pool.submit(job).result()
        if result.verdict is not None:  # which device of which machine: the store keeps both
            result.verdict.env.update(device_index=self.physical_index, node=self.host)
        return result

    def close(self) -> None:
        self.pool.close()


@dataclass(eq=False)
class _Host:
    handle: Any
    node: str
    index: int
    description: DeviceDescription
    workers: int
    free: int
    slot: int  # its place in the pool's hosts: the AffinityQueue's judge number
    alive: bool = True


class RayPool:
    """Evaluate candidates on every GPU (or, with the CPU, every node) of a Ray cluster. `address`: "auto"
    (the cluster `ray start` made on this machine), "local" (a Ray instance of this process's own, on this
    machine's devices) or a cluster's address. `workers`: concurrent evaluations per host (default: each
    host's LocalPool default). `cache_dir`: each node's build cache, the same path on every node (default: a
    folder of the node's temp dir named for the node)."""

    def __init__(self, device: str, *, address: str = "auto", config: JudgeConfig | None = None,
                 workers: int | None = None, cache_dir: str | None = None) -> None:
        ray = _ray()
        self._ray = ray
        self.device = device
        self._own_ray = False
        if not ray.is_initialized():
            try:
                ray.init(address=None if address == "local" else address, log_to_driver=False,
                         configure_logging=False, include_dashboard=False)
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise RayUnavailable(f"--ray {address}: {str(e).strip().splitlines()[0]}") from None
            self._own_ray = True
        self._cv = threading.Condition()
        self._queue = AffinityQueue()
        self._closed = False
        self.requeued = 0  # jobs queued again after their host died
        self.hosts = self._start_hosts(device, config, workers, cache_dir)
        self.workers = sum(h.workers for h in self.hosts)
        self._thread = threading.Thread(target=self._dispatch, name="kc-ray-dispatch", daemon=True)
        self._thread.start()

    # -- hosts ---------------------------------------------------------------------------------
    def _start_hosts(self, device: str, config: JudgeConfig | None, workers: int | None,
                     cache_dir: str | None) -> list[_Host]:
        ray = self._ray
        actor = ray.remote(JudgeHost)
        concurrency = (workers or 8) + 2  # its pool's workers, and the info and close calls beside them
        if device == "cuda":
            gpus = int(ray.cluster_resources().get("GPU", 0))
            if gpus == 0:
                self._shutdown()
                raise RayUnavailable("--ray: the Ray cluster has no GPU (give its nodes --num-gpus, or use --device cpu)")
            options = [{"num_gpus": 1} for _ in range(gpus)]
        else:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
            options = [{"scheduling_strategy": NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)}
                       for n in ray.nodes() if n.get("Alive")]
        handles = [actor.options(num_cpus=0, max_concurrency=concurrency, **o).remote(device, config, workers, cache_dir)
                   for o in options]
        try:
            infos = ray.get([h.info.remote() for h in handles], timeout=START_TIMEOUT_S)
        except Exception as e:  # noqa: BLE001 - any failure to start is the cluster's, said in one line
            for h in handles:
                ray.kill(h)
            self._shutdown()
            raise RayUnavailable(f"--ray: the judge hosts did not start: {type(e).__name__}: "
                                 f"{str(e).strip().splitlines()[0] if str(e).strip() else ''}") from None
        return [_Host(h, node, index, desc, n, n, slot) for slot, (h, (node, index, desc, n)) in enumerate(zip(handles, infos))]

    @property
    def description(self) -> DeviceDescription:
        return self.hosts[0].description

    def alive_hosts(self) -> list[_Host]:
        with self._cv:
            return [h for h in self.hosts if h.alive]

    # -- the executor --------------------------------------------------------------------------
    def submit(self, job: Job) -> "Future[Result]":
        item = Pending(job)
        with self._cv:
            if self._closed:
                raise RuntimeError("the Ray pool is closed")
            self._queue.put(item)
            self._cv.notify_all()
        return item.future

    def map(self, jobs: Iterable[Job]) -> Iterator[Result]:
        """Results in completion order (executor.judged_map)."""
        return judged_map(self, jobs)

    def __enter__(self) -> "RayPool":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Cancel what no host has taken, stop the hosts (and the jobs they run), and leave Ray if this pool
        started it."""
        with self._cv:
            if self._closed:
                return
            self._closed = True
            left = self._queue.drain()
            self._cv.notify_all()
        for item in left:
            item.future.cancel()
        self._thread.join()
        for h in self.hosts:
            try:
                self._ray.get(h.handle.close.remote(), timeout=60)
            except Exception:  # noqa: BLE001 - a dead or stuck host is killed below either way
                pass
            self._ray.kill(h.handle)
        self._shutdown()

    def _shutdown(self) -> None:
        if self._own_ray:
            self._ray.shutdown()

    # -- dispatching ---------------------------------------------------------------------------
    def _dispatch(self) -> None:
        while True:
            with self._cv:
                picked = None
                while not self._closed:
                    if len(self._queue) and not any(h.alive for h in self.hosts):
                        self._fail_all("every judge host of the Ray cluster died")
                    picked = self._pick()
                    if picked is not None:
                        break
                    self._cv.wait(timeout=1.0)
                if self._closed or picked is None:
                    return
                host, item = picked
                if not item.running and not item.future.set_running_or_notify_cancel():
                    continue  # cancelled while queued
                item.running = True
                host.free -= 1
            ref = host.handle.evaluate.remote(item.job)
            ref.future().add_done_callback(partial(self._landed, host, item))

    def _pick(self) -> tuple[_Host, Pending] | None:
        """A live host with a free worker, and its next job (under the lock)."""
        for host in self.hosts:
            if host.alive and host.free > 0 and len(self._queue):
                item = self._queue.take(host.slot)
                if item is not None:
                    return host, item
        return None

    def _landed(self, host: _Host, item: Pending, done: "Future[Any]") -> None:
        exceptions = self._ray.exceptions
        try:
            result = done.result()
        except exceptions.RayTaskError as e:  # the host's own code failed on this job: the job's error
            item.future.set_exception(RuntimeError(f"judge host on {host.node[:12]}: {e}"))
        except exceptions.RayError as e:  # the host died, or its node; or the result was lost on the way
            self._requeue(host, item, e)
        else:
            result.job = item.job  # the caller's own job (its tag), not the copy that travelled
            item.future.set_result(result)
        finally:
            with self._cv:
                host.free += 1
                self._cv.notify_all()

    def _requeue(self, host: _Host, item: Pending, error: BaseException) -> None:
        with self._cv:
            if isinstance(error, _host_lost(self._ray)):
                host.alive = False
                self._queue.forget(host.slot)
            item.tries += 1
            if item.tries >= MAX_TRIES:
                item.future.set_exception(RuntimeError(f"its judge host died {item.tries} times: {error}"))
                return
            self.requeued += 1
            self._queue.put(item, first=True)
            self._cv.notify_all()

    def _fail_all(self, why: str) -> None:
        for item in self._queue.drain():
            if item.running or item.future.set_running_or_notify_cancel():
                item.future.set_exception(RuntimeError(why))
