"""The judge service's job queue: jobs persisted in the workspace store, claimed one at a time by a
dispatcher thread and judged on a LocalPool.

A job is in the store before its submit returns. The dispatcher claims a job only when a worker is
free (so the queue depth is what waits), and a verdict is recorded before its job is marked done:
a service killed at any moment loses nothing measured, and on the next start the jobs it left
running go back to the queue.

A candidate equal to one already judged in the same context (same normalized source, task, judge
settings and device: Store.reusable_verdict, the rule optimize follows) gets that verdict again,
and equal candidates in flight together are judged once; `fresh` jobs are always judged anew.
"""

from __future__ import annotations

import fcntl
import sqlite3
import sys
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from typing import IO

from ..judge import Job, JudgeConfig, LocalPool, Result, context_hash, describe_device, normalized_hash
from ..judge.sandbox import kill_all_workers
from ..store import Store
from ..store.db import JobRow
from ..tasks import Task
from .resolve import task_from_record, task_record

RUN_KIND = "serve-judge"  # each service session is a run: its verdicts carry the run's id
LOCK_NAME = "serve-judge.lock"


class WorkspaceBusy(Exception):
    """Another service already serves this workspace's queue."""


@dataclass(frozen=True)
class _Outcome:
    verdict_id: int | None
    error: str | None = None


class JobQueue:
    """Persisted jobs judged on a local pool. `start` begins dispatching, `stop` ends it (evaluations in
    flight are stopped and their jobs queued again)."""

    def __init__(self, store: Store, device: str, *, config: JudgeConfig, workers: int | None = None) -> None:
        self.store = store
        self.config = config
        self._lock_file = _lock_workspace(store)
        try:
            self.pool = LocalPool(device, cache_dir=store.cache_dir, config=config, workers=workers)
        except BaseException:
            self._lock_file.close()
            raise
        self.device = describe_device(device)
        self.run_id: str | None = None
        self._slots = threading.Semaphore(self.pool.workers)  # free workers
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._inflight: dict[tuple[str, str], Future[_Outcome]] = {}  # (context, normalized source) being judged
        self._inflight_lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def workers(self) -> int:
        return self.pool.workers

    def start(self) -> None:
        """Queue again what a previous service left running, then start dispatching."""
        self.store.requeue_running_jobs()
        self.run_id = self.store.start_run(RUN_KIND, {"device": self.device.kind, "device_name": self.device.name,
                                                      "workers": self.workers, "judge": self.config.to_dict()})
        self._thread = threading.Thread(target=self._dispatch, name="kc-dispatcher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop dispatching; evaluations in flight are killed and their jobs go back to the queue."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        kill_all_workers()
        self.pool.close()
        self.store.requeue_running_jobs()
        if self.run_id is not None:
            self.store.finish_run(self.run_id)
        self._lock_file.close()

    def submit(self, task: Task, source: str, *, client_key: str | None = None, fresh: bool = False) -> tuple[JobRow, bool]:
        """Queue a candidate for `task` (committed before this returns). A `client_key` used before returns its
        job instead, whatever this call asks. Returns (job, created)."""
        job, created = self.store.add_job(task.key, task_record(task), source, client_key=client_key, fresh=fresh)
        if created:
            self._wake.set()
        return job, created

    # -- dispatching ---------------------------------------------------------------------------
    def _dispatch(self) -> None:
        while not self._stopping.is_set():
            if not self._slots.acquire(timeout=0.5):
                continue
            self._wake.clear()
            try:
                job = self.store.claim_job()
            except sqlite3.Error as e:  # a busy or failing disk: say so and try again, never stop dispatching
                print(f"warning: judge service: cannot read the queue: {e}", file=sys.stderr)
                job = None
            if job is None:
                self._slots.release()
                self._wake.wait(timeout=1.0)  # the timeout: also see jobs that another process queued
                continue
            try:
                took_worker = self._start(job)
            except Exception as e:  # noqa: BLE001 - a job that cannot start fails alone, never the dispatcher
                self.store.fail_job(job.id, f"internal error: {type(e).__name__}: {e}")
                took_worker = False
            if not took_worker:
                self._slots.release()

    def _start(self, job: JobRow) -> bool:
        """Begin judging a claimed job, or give it the verdict of an equal candidate; whether it took a worker."""
        task = task_from_record(job.task)
        norm = normalized_hash(job.source)
        context = context_hash(task.source, task.meta.to_dict(), self.config, self.device.name)
        key = (context, norm)
        with self._inflight_lock:
            shared = None if job.fresh else self._inflight.get(key)
            owner = shared is None
            if owner:
                earlier = None if job.fresh else self.store.reusable_verdict(context, norm)
                if earlier is not None:
                    self.store.finish_job(job.id, earlier, reused=True)
                    return False
                shared = Future()
                if not job.fresh:
                    self._inflight[key] = shared
        shared.add_done_callback(partial(self._settle, job.id, not owner))
        if owner:
            measured = partial(self._measured, task, job.source, norm, context, shared)
            self.pool.submit(Job(task, job.source, tag=job.id)).add_done_callback(measured)
        return owner

    def _measured(self, task: Task, source: str, norm: str, context: str, shared: Future[_Outcome],
                  done: Future[Result]) -> None:
        """A pool evaluation ended: record its verdict, then settle every job waiting on it."""
        try:
            if self._stopping.is_set():  # killed by stop(): not a verdict; stop() queues the jobs again
                return
            try:
                result = done.result()
                if result.verdict is None:
                    outcome = _Outcome(None, f"the task failed to run: {result.error}")
                else:
                    vid = self.store.record_verdict(task, source, result.verdict, run_id=self.run_id, origin=RUN_KIND,
                                                    norm_hash=norm, context_hash=context)
                    outcome = _Outcome(vid)
            except Exception as e:  # noqa: BLE001 - reported on the job, not lost in a pool thread
                outcome = _Outcome(None, f"internal error: {type(e).__name__}: {e}")
            with self._inflight_lock:  # after the verdict is stored: a later equal job finds it there
                if self._inflight.get((context, norm)) is shared:
                    del self._inflight[(context, norm)]
            shared.set_result(outcome)
        finally:
            self._slots.release()

    def _settle(self, job_id: int, reused: bool, shared: Future[_Outcome]) -> None:
        outcome = shared.result()
        if outcome.verdict_id is not None:
            self.store.finish_job(job_id, outcome.verdict_id, reused=reused)
        else:
            self.store.fail_job(job_id, outcome.error or "unknown error")


def _lock_workspace(store: Store) -> IO[str]:
    """One service per workspace: a second would queue again the jobs the first is running. The OS drops
    the lock when the process dies, however it dies."""
    f = open(store.workspace / LOCK_NAME, "w")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise WorkspaceBusy(f"another kernelcraft serve-judge is serving {store.workspace}") from None
    return f
