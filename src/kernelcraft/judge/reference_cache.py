"""The tasks' trusted reference data for one judge (parent side): surveyed and timed alone once per
task by a trusted worker, in the background, and kept with that worker (the `max_workers` most recently
used tasks) to compare candidates' outputs with."""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from concurrent.futures import Future
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Iterator

from ..tasks import Task
from .config import JudgeConfig
from .memory import MemoryBudget
from .protocol import PrepareTiming, Probe, Survey, TimeReference
from .reference import ReferenceData, ReferenceServer, side
from .verdict import TimingStats
from .workers import SecretSeeds, WorkerSupply


class ReferenceCache:
    """Per task, one trusted worker surveys the reference and is kept: it holds each seed's expected
    outputs on its device, up to `cache_bytes`, or computes them again per comparison. A failed survey
    is tried again by the next evaluation; a worker in use by an evaluation is never evicted."""

    def __init__(self, workers: WorkerSupply, memory: MemoryBudget, config: JudgeConfig, seeds: SecretSeeds,
                 cache_bytes: int, max_workers: int) -> None:
        self.workers = workers
        self.memory = memory
        self.config = config
        self.seeds = seeds
        self.cache_bytes = cache_bytes
        self.max_workers = max(1, max_workers)
        self._refs: OrderedDict[str, Future[ReferenceData]] = OrderedDict()
        self._users: dict[str, int] = {}
        self._lock = threading.Lock()

    def key(self, task: Task) -> str:
        return hashlib.sha256(json.dumps([task.key, task.source, task.sizes_for(self.workers.device)]).encode()).hexdigest()

    def future(self, task: Task, budgeted: bool = True) -> Future[ReferenceData]:
        """The task's reference data, surveyed and timed alone in the background by a trusted worker the
        first time (while the first candidate builds). The survey and the trusted timing hold what they
        need of the device's memory budget, unless the caller holds all of it (`budgeted=False`)."""
        key = self.key(task)
        with self._lock:
            known = self._refs.get(key)
            if known is not None and not (known.done() and known.exception() is not None):  # failures are retried
                self._refs.move_to_end(key)
                return known
            future: Future[ReferenceData] = Future()
            self._refs[key] = future
        threading.Thread(target=self._compute, args=(task, future, budgeted), daemon=True, name="kc-reference").start()
        return future

    @contextmanager
    def using(self, task: Task) -> Iterator[None]:
        """An evaluation of `task` is under way: its trusted worker is not evicted meanwhile."""
        key = self.key(task)
        with self._lock:
            self._users[key] = self._users.get(key, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                self._users[key] -= 1
                if not self._users[key]:
                    del self._users[key]
            self._evict()

    def forget_pending(self, task: Task) -> None:
        """An evaluation that holds the device's whole memory: a survey of its task still waiting for
        memory would wait on it, so it is forgotten (the evaluation starts its own)."""
        with self._lock:
            pending = self._refs.get(self.key(task))
            if pending is not None and not pending.done():
                del self._refs[self.key(task)]

    def drop(self, task: Task) -> None:
        """Forget the task's trusted worker (it failed on the judge's side): the next evaluation starts a new one."""
        with self._lock:
            future = self._refs.pop(self.key(task), None)
        if future is not None and future.done() and future.exception() is None:
            future.result().server.close()

    def close(self) -> None:
        """Stop every task's trusted worker."""
        with self._lock:
            refs, self._refs = list(self._refs.values()), OrderedDict()
        for f in refs:
            if f.done() and f.exception() is None:
                f.result().server.close()

    def _compute(self, task: Task, future: Future[ReferenceData], budgeted: bool) -> None:
        trusted: Future[TimingStats] = Future()
        cfg, where, seeds, workers = self.config, task.key, self.seeds, self.workers
        w = workers.take()
        kept = False

        def hold(nbytes: int) -> AbstractContextManager[Any]:
            return self.memory.hold(nbytes) if budgeted else nullcontext()

        try:
            env = workers.trusted_setup(w, task, where, cfg).env
            binary = seeds.binary if "binary_exact" in task.meta.checks else []
            with workers.device_lock(shared=True):
                probe = workers.trusted(w, where, Probe(seeds.correctness[0]), cfg.timeouts.correctness)
            # The survey (the reference, a copy of its inputs, the float64 module with its inputs and outputs),
            # then the reference timed alone (its timing inputs and the rounds' copies), under one hold of the
            # device's memory: the data is handed out only once both are done, so no evaluation that holds
            # its own share ever waits for the trusted time while this waits for memory.
            floats = 4 * (probe.input_bytes + probe.output_bytes) if cfg.truth else 0
            survey = 2 * probe.peak_bytes + min(floats, int(2.5 * cfg.truth_max_gb * (1 << 30))) + self.cache_bytes
            timing = (cfg.timing.input_sets + 3) * probe.input_bytes + 3 * probe.output_bytes + probe.peak_bytes
            with hold(max(survey, timing)):
                with workers.device_lock(shared=True):
                    a = workers.trusted(w, where, Survey(seeds.correctness, binary, self.cache_bytes), cfg.timeouts.correctness)
                    workers.trusted(w, where, PrepareTiming(seeds.timing), cfg.timeouts.correctness)
                with workers.measuring(w, cfg):
                    t = workers.trusted(w, where, TimeReference(seeds.timing, release_inputs=True,
                                                                target_ms=cfg.timing.trusted_target_ms), cfg.timeouts.timing)
            trusted.set_result(side(t, "reference"))
            ref = ReferenceData(a.facts, flops=a.flops, bytes=a.bytes, param_bytes=a.param_bytes, trusted_future=trusted,
                                server=ReferenceServer(w, where), env={**env, **a.env})
            kept = True
            future.set_result(ref)
            with self._lock:
                orphaned = self._refs.get(self.key(task)) is not future
            if orphaned:  # an evaluation retried alone started its own meanwhile: this one is no one's
                ref.server.close()
            self._evict()
        except BaseException as e:  # noqa: BLE001 - whoever waits on the data gets the error
            for f in (future, trusted):
                if not f.done():
                    f.set_exception(e)
            if not kept:
                w.close()

    def _evict(self) -> None:
        """The least recently used tasks' trusted workers closed while more are kept than allowed
        (never one an evaluation is using)."""
        evicted = []
        with self._lock:
            live = [k for k, f in self._refs.items() if f.done() and f.exception() is None]
            excess = len(live) - self.max_workers
            for k in live:
                if excess <= 0:
                    break
                if self._users.get(k, 0) == 0:
                    evicted.append(self._refs.pop(k).result().server)
                    excess -= 1
        for server in evicted:
            server.close()
