"""The judge service's job queue: jobs persisted in the workspace store, claimed one at a time by a
dispatcher thread and judged on an executor: this machine's GPUs (LocalPool) or a Ray cluster's (RayPool).

A job is in the store before its submit returns. The dispatcher claims a job only when a worker is
free (so the queue depth is what waits), and a verdict is recorded before its job is marked done:
a service killed at any moment loses nothing measured, and on the next start the jobs it left
running go back to the queue.

Candidates are judged through judge.reuse.VerdictReuse, as search judges them: a candidate equal to one
already judged in the same context (same normalized source, task, judge settings and device) gets that
verdict again, and equal candidates in flight together are judged once; `fresh` jobs are always judged anew.
"""

from __future__ import annotations

import fcntl
import sqlite3
import sys
import threading
from concurrent.futures import Future
from functools import partial
from typing import IO

from ..judge import Job, JudgeConfig, Result, open_executor
from ..judge.reuse import Claim, VerdictReuse, verdict_context
from ..judge.sandbox import kill_all_workers
from ..store import Store
from ..store.jobs import JobRow
from ..tasks import Task
from .resolve import task_from_record, task_record

RUN_KIND = "serve-judge"  # each service session is a run: its verdicts carry the run's id
LOCK_NAME = "serve-judge.lock"


class WorkspaceBusy(Exception):
    """Another service already serves this workspace's queue."""


class _NoVerdict(Exception):
    """The evaluation gave no verdict; the message is the job's error."""


class JobQueue:
    """Persisted jobs judged on an executor (`gpus`, `ray`: judge.open_executor). `start` begins dispatching, `stop` ends it (evaluations in
    flight are stopped and their jobs queued again)."""

    def __init__(self, store: Store, device: str, *, config: JudgeConfig, workers: int | None = None,
                 gpus: str | None = None, ray: str | None = None) -> None:
        self.store = store
        self.config = config
        self._lock_file = _lock_workspace(store)
        try:
            self.pool = open_executor(device, cache_dir=store.cache_dir, config=config, gpus=gpus, ray=ray, workers=workers)
        except BaseException:
            self._lock_file.close()
            raise
        self.device = self.pool.description
        self.run_id: str | None = None
        self._slots = threading.Semaphore(self.pool.workers)  # free workers
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self.reuse = VerdictReuse(store, origin=RUN_KIND)
        self._thread: threading.Thread | None = None

    @property
    def workers(self) -> int:
        return self.pool.workers

    def start(self) -> None:
        """Queue again what a previous service left running, then start dispatching."""
        self.store.requeue_running_jobs()
        self.run_id = self.store.start_run(RUN_KIND, {"device": self.device.kind, "device_name": self.device.name,
                                                      "workers": self.workers, "judge": self.config.to_dict()})
        self.reuse.run_id = self.run_id
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
        claim = self.reuse.claim(task, job.source, verdict_context(task, self.config, self.device.name), fresh=job.fresh)
        claim.when_done(partial(self._settle, job.id))
        if claim.owner:
            self.pool.submit(Job(task, job.source, tag=job.id)).add_done_callback(partial(self._measured, claim))
        return claim.owner

    def _measured(self, claim: Claim, done: Future[Result]) -> None:
        """A pool evaluation ended: record its verdict, which settles every job waiting on it."""
        try:
            if self._stopping.is_set():  # killed by stop(): not a verdict; stop() queues the jobs again
                return
            try:
                result = done.result()
                if result.verdict is None:
                    self.reuse.fail(claim, _NoVerdict(f"the task failed to run: {result.error}"))
                else:
                    self.reuse.finish(claim, result.verdict)
            except Exception as e:  # noqa: BLE001 - reported on the job, not lost in a pool thread
                if not claim.future.done():
                    self.reuse.fail(claim, _NoVerdict(f"internal error: {type(e).__name__}: {e}"))
        finally:
            self._slots.release()

    def _settle(self, job_id: int, claim: Claim) -> None:
        try:
            judged = claim.result()
        except _NoVerdict as e:
            self.store.fail_job(job_id, str(e))
        except Exception as e:  # noqa: BLE001 - a failure in the store, or in a verdict reused from it
            self.store.fail_job(job_id, f"internal error: {type(e).__name__}: {e}")
        else:
            self.store.finish_job(job_id, judged.verdict_id, reused=judged.reused)


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
