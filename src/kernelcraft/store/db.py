"""The workspace store: one SQLite database in WAL mode. Every write commits at once, so a run
that is killed loses nothing it had measured."""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import os
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..judge import KernelProfile, Status, Verdict
from ..judge.reuse import NOT_REUSED
from ..judge.verdict import TimingStats
from ..tasks import Task
from .calls import CallTables
from .jobs import JobTables
from .schema import MIGRATIONS, statements
from .skill_tables import SkillTables

DB_NAME = "kernelcraft.db"
CACHE_DIR = "cache"  # the judge's cache in a workspace: builds, scratch, ceilings
_BUSY_TIMEOUT_S = 30  # how long a connection waits for another's write lock
# Verdicts never reused for an equal candidate: judge.reuse.NOT_REUSED (timeouts, judge errors).
_REUSABLE = f"v.status NOT IN ({', '.join(repr(s.value) for s in sorted(NOT_REUSED))})"


def _device_index(verdict: Verdict) -> int | None:
    """The index of the device a verdict was measured on, as the judge put it in the verdict's env; None for a
    verdict without one (recorded by an older judge, or a judge error before a device was chosen)."""
    index = verdict.env.get("device_index")
    return None if index is None else int(index)


class StoreError(Exception):
    """The workspace cannot be opened: not a directory, not writable, or its database is not kernelcraft's."""


@dataclass(frozen=True)
class VerdictRow:
    id: int
    task_key: str
    run_id: str | None  # None: recorded by `eval`
    device: str
    device_name: str
    status: str
    speedup: float | None
    effective_speedup: float | None
    flags: str
    created_at: float
    origin: str = ""  # where the candidate came from: the file `eval` was given, a solution's path

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class RunRow:
    id: str
    kind: str
    args: dict[str, Any]
    started_at: float
    finished_at: float | None


@dataclass(frozen=True)
class RunTaskRow:
    task_key: str
    name: str
    level: int | None
    position: int
    finished_at: float | None


@dataclass(frozen=True)
class AttemptRow:
    """One turn of one sample of a search on one task: the model's reply and what the judge said."""

    id: int
    run_id: str
    task_key: str
    sample: int
    turn: int
    llm_call_id: int | None
    verdict_id: int | None
    # a verdict status; "parse_failed" when the reply held no candidate, "truncated" when it was cut at the
    # token limit first, "llm_error" when the call failed for good
    status: str
    speedup: float | None  # the effective speedup of a correct candidate
    feedback: str  # what the model was told about this attempt
    created_at: float
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)  # the strategy's note: idea, island, exemplars...

    @classmethod
    def from_row(cls, r: sqlite3.Row) -> "AttemptRow":
        d = dict(r)
        return cls(**{k: v for k, v in d.items() if k != "meta_json"}, meta=json.loads(d.get("meta_json") or "{}"))


@dataclass(frozen=True)
class Baseline:
    task_key: str
    device_name: str
    kind: str  # eager, eager_default, compile_default, tunableop (compile: legacy); "@server": server scenario (judge.baseline_kind)
    median_ms: float
    q1_ms: float
    q3_ms: float


class Store(JobTables, CallTables, SkillTables):
    """Thread-safe access to a workspace's database (one connection, serialised). `read_only`: for commands that
    only read (`runs list`, `verdicts`): the database must exist, and where this process may not write it (a
    read-only disk, another user's workspace) it is opened read-only."""

    def __init__(self, workspace: Path, *, read_only: bool = False) -> None:
        self.workspace = Path(workspace).resolve()  # workers run in their own directories
        self.path = self.workspace / DB_NAME
        self._lock = threading.Lock()
        if self.workspace.exists() and not self.workspace.is_dir():
            raise StoreError(f"workspace {self.workspace}: a file, not a directory")
        if read_only and not (os.access(self.workspace, os.W_OK) and os.access(self.path, os.W_OK)):
            self._conn = self._open_read_only()
            return
        if read_only and not self.path.is_file():
            raise StoreError(f"workspace {self.workspace}: no {DB_NAME} here")
        try:
            self.workspace.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=_BUSY_TIMEOUT_S)
            self._conn.row_factory = sqlite3.Row
            self._wal()
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except OSError as e:
            if e.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise StoreError(f"workspace {self.workspace}: read-only, kernelcraft cannot write there ({e.strerror}): "
                                 f"give -w a directory you can write") from None
            raise StoreError(f"workspace {self.workspace}: {e.strerror or e}") from None
        except sqlite3.DatabaseError as e:
            if "readonly" in str(e) or not os.access(self.workspace, os.W_OK):  # a WAL database's index cannot be made
                raise StoreError(f"workspace {self.workspace}: read-only, kernelcraft cannot write {self.path.name} ({e}): "
                                 f"give -w a directory you can write") from None
            raise StoreError(f"workspace {self.workspace}: {self.path.name}: {e}") from None

    def _open_read_only(self) -> sqlite3.Connection:
        """The database opened for reading only: `mode=ro`, which reads what a live writer has in its WAL but needs
        the WAL's index beside it (or the right to make it); else, on a disk where nothing can be made, `immutable`,
        which reads the database file as it is (a crashed writer's last, unmerged writes left out)."""
        if not self.path.is_file():
            raise StoreError(f"workspace {self.workspace}: no {DB_NAME} here")
        problem = ""
        for mode in ("mode=ro", "immutable=1"):
            try:
                conn = sqlite3.connect(f"{self.path.as_uri()}?{mode}", uri=True, check_same_thread=False,
                                       isolation_level=None, timeout=_BUSY_TIMEOUT_S)
                conn.row_factory = sqlite3.Row
                version = conn.execute("PRAGMA user_version").fetchone()[0]
            except sqlite3.DatabaseError as e:
                problem = str(e)
                continue
            if version < len(MIGRATIONS):
                conn.close()
                raise StoreError(f"workspace {self.workspace}: {DB_NAME} is of an older kernelcraft, and read-only here: "
                                 f"read it once where it can be written, which brings it up to date")
            return conn
        raise StoreError(f"workspace {self.workspace}: {self.path.name}: {problem}")

    @property
    def cache_dir(self) -> Path:
        return self.workspace / CACHE_DIR

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _wal(self) -> None:
        # Switching a new database to WAL needs it alone, and SQLite answers "locked" at once instead of
        # waiting when other processes open it at the same moment: retry for as long as the busy timeout.
        deadline = time.monotonic() + _BUSY_TIMEOUT_S
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _migrate(self) -> None:
        # Processes opening a new workspace at once: BEGIN IMMEDIATE lets one migrate while the others wait,
        # and each reads the version inside its own transaction, so no step runs twice.
        with self._lock:
            while True:
                self._conn.execute("BEGIN IMMEDIATE")
                version = self._conn.execute("PRAGMA user_version").fetchone()[0]
                if version >= len(MIGRATIONS):
                    self._conn.execute("COMMIT")
                    return
                try:
                    for statement in statements(MIGRATIONS[version]):
                        self._conn.execute(statement)
                    self._conn.execute(f"PRAGMA user_version = {version + 1}")
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
                self._conn.execute("COMMIT")

    def _exec(self, sql: str, params: tuple = ()) -> sqlite3.Cursor:
        with self._lock:
            return self._conn.execute(sql, params)

    def _query(self, sql: str, params: tuple = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    @property
    def schema_version(self) -> int:
        return self._query("PRAGMA user_version")[0][0]

    # -- tasks and candidates --------------------------------------------------------------
    def put_task(self, task: Task) -> None:
        self._exec(
            "INSERT INTO tasks (key, name, suite, level, problem_id, path, source_hash, source, meta_json, created_at) "
            "VALUES (?,?,?,?,?,?,?,?,?,?) ON CONFLICT(key) DO UPDATE SET source=excluded.source, "
            "source_hash=excluded.source_hash, meta_json=excluded.meta_json, path=excluded.path",
            (task.key, task.name, task.suite, task.level, task.problem_id, str(task.path) if task.path else None,
             hashlib.sha256(task.source.encode()).hexdigest(), task.source, json.dumps(task.meta.to_dict()), time.time()))

    def put_candidate(self, task_key: str, source: str, source_hash: str, origin: str = "", norm_hash: str = "") -> int:
        self._exec("INSERT OR IGNORE INTO candidates (task_key, source_hash, source, origin, norm_hash, created_at) "
                   "VALUES (?,?,?,?,?,?)", (task_key, source_hash, source, origin, norm_hash, time.time()))
        return self._query("SELECT id FROM candidates WHERE task_key=? AND source_hash=?", (task_key, source_hash))[0][0]

    # -- runs ----------------------------------------------------------------------------------
    def start_run(self, kind: str, args: dict[str, Any]) -> str:
        run_id = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
        self._exec("INSERT INTO runs (id, kind, args_json, started_at) VALUES (?,?,?,?)",
                   (run_id, kind, json.dumps(args, default=str), time.time()))
        return run_id

    def finish_run(self, run_id: str) -> None:
        self._exec("UPDATE runs SET finished_at=? WHERE id=?", (time.time(), run_id))

    def run(self, run_id: str) -> RunRow:
        rows = self._query("SELECT * FROM runs WHERE id=?", (run_id,))
        if not rows:
            raise KeyError(f"no run {run_id!r} in {self.path}")
        r = rows[0]
        return RunRow(id=r["id"], kind=r["kind"], args=json.loads(r["args_json"]), started_at=r["started_at"],
                      finished_at=r["finished_at"])

    def runs(self, kind: str | None = None) -> list[RunRow]:
        ids = self._query("SELECT id FROM runs" + (" WHERE kind=?" if kind else "") + " ORDER BY started_at",
                          (kind,) if kind else ())
        return [self.run(r[0]) for r in ids]

    def add_run_tasks(self, run_id: str, tasks: list[Task]) -> None:
        """The tasks a run covers, in order; adding them again (on resume) changes nothing."""
        for position, task in enumerate(tasks):
            self.put_task(task)
            self._exec("INSERT OR IGNORE INTO run_tasks (run_id, task_key, position) VALUES (?,?,?)",
                       (run_id, task.key, position))

    def finish_run_task(self, run_id: str, task_key: str) -> None:
        self._exec("UPDATE run_tasks SET finished_at=? WHERE run_id=? AND task_key=?", (time.time(), run_id, task_key))

    def run_tasks(self, run_id: str) -> list[RunTaskRow]:
        rows = self._query("SELECT rt.task_key, t.name, t.level, rt.position, rt.finished_at FROM run_tasks rt "
                           "JOIN tasks t ON t.key = rt.task_key WHERE rt.run_id=? ORDER BY rt.position", (run_id,))
        return [RunTaskRow(**dict(r)) for r in rows]

    def task_source(self, task_key: str) -> str:
        rows = self._query("SELECT source FROM tasks WHERE key=?", (task_key,))
        if not rows:
            raise KeyError(f"no task {task_key!r}")
        return rows[0][0]

    # -- search attempts -------------------------------------------------------------------------
    def record_attempt(self, run_id: str, task_key: str, sample: int, turn: int, *, status: str,
                       llm_call_id: int | None = None, verdict_id: int | None = None, speedup: float | None = None,
                       feedback: str = "", meta: dict[str, Any] | None = None) -> int:
        cur = self._exec(
            "INSERT INTO attempts (run_id, task_key, sample, turn, llm_call_id, verdict_id, status, speedup, feedback, "
            "meta_json, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (run_id, task_key, sample, turn, llm_call_id, verdict_id, status, speedup, feedback, json.dumps(meta or {}),
             time.time()))
        return int(cur.lastrowid)

    def attempts(self, run_id: str, task_key: str | None = None) -> list[AttemptRow]:
        rows = self._query("SELECT * FROM attempts WHERE run_id=?" + (" AND task_key=?" if task_key else "")
                           + " ORDER BY task_key, sample, turn", (run_id, task_key) if task_key else (run_id,))
        return [AttemptRow.from_row(r) for r in rows]

    def put_state(self, run_id: str, task_key: str, key: str, value: Any) -> None:
        """A strategy's saved decision (a round's ideas, a task's skill schemes), read back on resume."""
        self._exec("INSERT OR REPLACE INTO search_state (run_id, task_key, key, value_json, created_at) VALUES (?,?,?,?,?)",
                   (run_id, task_key, key, json.dumps(value), time.time()))

    def state(self, run_id: str, task_key: str, key: str) -> Any:
        rows = self._query("SELECT value_json FROM search_state WHERE run_id=? AND task_key=? AND key=?", (run_id, task_key, key))
        return json.loads(rows[0][0]) if rows else None

    def states(self, run_id: str, task_key: str, prefix: str) -> dict[str, Any]:
        """A task's saved decisions whose keys start with `prefix`, by key."""
        rows = self._query("SELECT key, value_json FROM search_state WHERE run_id=? AND task_key=? "
                           "AND substr(key, 1, length(?)) = ?", (run_id, task_key, prefix, prefix))
        return {r["key"]: json.loads(r["value_json"]) for r in rows}

    def run_spend(self, run_id: str, task_key: str | None = None) -> tuple[int, int, int, float]:
        """Model calls, prompt and completion tokens, and dollars a run (or one task of it) has spent so far (cached
        calls cost nothing)."""
        r = self._query("SELECT count(*), coalesce(sum(prompt_tokens),0), coalesce(sum(completion_tokens),0), "
                        "coalesce(sum(cost_usd),0) FROM llm_calls WHERE run_id=? AND cached=0 AND error IS NULL"
                        + (" AND task_key=?" if task_key is not None else ""),
                        (run_id,) if task_key is None else (run_id, task_key))[0]
        return int(r[0]), int(r[1]), int(r[2]), float(r[3])

    def judge_calls(self, run_id: str, task_key: str | None = None, *, judge_errors: bool = True) -> int:
        """A run's (or one task's) judge calls so far, as its judge budgets count them: the verdicts it had measured
        (with `judge_errors` False, not the judge's own failures), and each of its attempts answered by a verdict
        measured before (another run's, or one of its own judged for an earlier attempt). No attempt holds a
        judge_error verdict, and none is reused."""
        task = "" if task_key is None else " AND task_key=?"
        keys = () if task_key is None else (task_key,)
        status = "" if judge_errors else " AND status!=?"
        measured, with_verdict, own = self._query(
            f"SELECT (SELECT count(*) FROM verdicts WHERE run_id=?{task}{status}), "
            f"(SELECT count(*) FROM attempts WHERE run_id=?{task} AND verdict_id IS NOT NULL), "
            f"(SELECT count(DISTINCT a.verdict_id) FROM attempts a JOIN verdicts v ON v.id = a.verdict_id "
            f"WHERE a.run_id=? AND v.run_id=?{task.replace('task_key', 'a.task_key')})",
            (run_id, *keys, *(() if judge_errors else (Status.JUDGE_ERROR.value,)), run_id, *keys, run_id, run_id, *keys))[0]
        return int(measured) + int(with_verdict) - int(own)

    def candidate_source(self, verdict_id: int) -> str:
        rows = self._query("SELECT c.source FROM verdicts v JOIN candidates c ON c.id = v.candidate_id WHERE v.id=?",
                           (verdict_id,))
        if not rows:
            raise KeyError(f"no verdict {verdict_id}")
        return rows[0][0]

    # -- verdicts ------------------------------------------------------------------------------
    def record_verdict(self, task: Task, source: str, verdict: Verdict, *, run_id: str | None = None, origin: str = "",
                       norm_hash: str = "", context_hash: str = "") -> int:
        """Store a verdict with its task and candidate; committed before this returns. `context_hash` names what
        the verdict depends on besides the source (task, device, judge settings): see `reusable_verdict`."""
        self.put_task(task)
        cid = self.put_candidate(task.key, source, verdict.candidate_hash, origin, norm_hash)
        cur = self._exec(
            "INSERT INTO verdicts (candidate_id, task_key, run_id, device, device_name, status, speedup, effective_speedup, "
            "reference_ms, candidate_ms, coverage, flags, judge_version, torch_version, verdict_json, context_hash, device_index, "
            "node, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (cid, task.key, run_id, verdict.device, str(verdict.env.get("device_name", "")), verdict.status.value,
             verdict.speedup, verdict.effective_speedup, verdict.reference.median_ms if verdict.reference else None,
             verdict.candidate.median_ms if verdict.candidate else None, verdict.coverage,
             ",".join(f.code for f in verdict.flags), str(verdict.env.get("judge_version", "")),
             str(verdict.env.get("torch", "")), verdict.to_json(), context_hash, _device_index(verdict),
             str(verdict.env.get("node", "")), time.time()))
        return int(cur.lastrowid)

    def correct_kernels(self, context_hash: str, limit: int = 50, *, other_than_run: str | None = None
                        ) -> list[tuple[int, str, float]]:
        """Correct kernels judged in this context by any run (`other_than_run`: but that one), fastest first:
        (verdict id, source, effective speedup). Of kernels within noise of the reference (effective speedup
        1.0), the faster measured comes first."""
        if other_than_run is not None:
            return self._correct_kernels("v.context_hash=? AND coalesce(v.run_id, '') != ?", (context_hash, other_than_run), limit)
        return self._correct_kernels("v.context_hash=?", (context_hash,), limit)

    def correct_kernels_anywhere(self, task_key: str, device_name: str, limit: int = 50) -> list[tuple[int, str, float]]:
        """Correct kernels of this task judged on this device in any context (another judge version or
        recipe), fastest first, as `correct_kernels` orders them: what a search may try first, since
        no verdict of another context is reused."""
        return self._correct_kernels("v.task_key=? AND v.device_name=?", (task_key, device_name), limit)

    def _correct_kernels(self, where: str, params: tuple[str, ...], limit: int) -> list[tuple[int, str, float]]:
        rows = self._query("SELECT v.id, c.source, v.effective_speedup FROM verdicts v JOIN candidates c ON c.id = v.candidate_id "
                           f"WHERE {where} AND v.status='correct' AND v.effective_speedup IS NOT NULL "
                           "ORDER BY v.effective_speedup DESC, v.speedup DESC LIMIT ?", (*params, limit))
        return [(int(r[0]), r[1], float(r[2])) for r in rows]

    def judged_norm_hashes(self, context_hash: str) -> set[str]:
        """The normalized hashes of every candidate judged in this context by any run (those a new
        judgment would reuse: timeouts and judge errors are left out, as in `reusable_verdict`)."""
        rows = self._query("SELECT DISTINCT c.norm_hash FROM verdicts v JOIN candidates c ON c.id = v.candidate_id "
                           f"WHERE v.context_hash=? AND {_REUSABLE} AND c.norm_hash != ''", (context_hash,))
        return {r[0] for r in rows}

    def reusable_verdict(self, context_hash: str, norm_hash: str, run_id: str | None = None) -> int | None:
        """The latest verdict of a candidate with the same normalized source in the same context, if any
        (with `run_id`: measured by that run only). Timeouts and judge errors are not reused (judge.reuse.NOT_REUSED)."""
        in_run = " AND v.run_id=?" if run_id is not None else ""
        rows = self._query("SELECT v.id FROM verdicts v JOIN candidates c ON c.id = v.candidate_id WHERE v.context_hash=? "
                           f"AND c.norm_hash=? AND {_REUSABLE}{in_run} ORDER BY v.id DESC LIMIT 1",
                           (context_hash, norm_hash, *([run_id] if run_id is not None else [])))
        return int(rows[0][0]) if rows and context_hash and norm_hash else None

    def verdict(self, verdict_id: int) -> Verdict:
        rows = self._query("SELECT verdict_json FROM verdicts WHERE id=?", (verdict_id,))
        if not rows:
            raise KeyError(f"no verdict {verdict_id}")
        return Verdict.from_dict(json.loads(rows[0][0]))

    def record_kernel_profile(self, verdict_id: int, profile: KernelProfile) -> None:
        """A verdict's kernel profile (the latest kept): reused with the verdict, so an equal candidate is not profiled again."""
        self._exec("INSERT OR REPLACE INTO kernel_profiles (verdict_id, tool, profile_json, created_at) VALUES (?,?,?,?)",
                   (verdict_id, profile.tool, json.dumps(profile.to_dict()), time.time()))

    def kernel_profile(self, verdict_id: int) -> KernelProfile | None:
        """The kernel profile recorded for a verdict, or None."""
        rows = self._query("SELECT profile_json FROM kernel_profiles WHERE verdict_id=?", (verdict_id,))
        return KernelProfile.from_dict(json.loads(rows[0][0])) if rows else None

    def verdicts(self, *, run_id: str | None = None, task_key: str | None = None, status: str | None = None,
                 last: int | None = None) -> list[VerdictRow]:
        """Verdicts oldest first, of a run, a task (its key, or its name: `leaky_relu_clamp` is
        `examples/leaky_relu_clamp`) and a status where given; `last`: only the latest so many."""
        where: list[str] = []
        params: list[Any] = []
        if run_id:
            where.append("v.run_id=?")
            params.append(run_id)
        if task_key:
            where.append("(v.task_key=? OR substr(v.task_key, -length(?) - 1)=?)")
            params += [task_key, task_key, f"/{task_key}"]
        if status:
            where.append("v.status=?")
            params.append(status)
        return self._verdict_rows(where, params, last)

    def verdict_row(self, verdict_id: int) -> VerdictRow:
        """One verdict's row; KeyError where there is none."""
        rows = self._verdict_rows(["v.id=?"], [verdict_id], None)
        if not rows:
            raise KeyError(f"no verdict {verdict_id} in {self.path}")
        return rows[0]

    def _verdict_rows(self, where: list[str], params: list[Any], last: int | None) -> list[VerdictRow]:
        sql = ("SELECT v.id, v.task_key, v.run_id, v.device, v.device_name, v.status, v.speedup, v.effective_speedup, "
               "v.flags, v.created_at, c.origin FROM verdicts v JOIN candidates c ON c.id = v.candidate_id"
               + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY v.id DESC")
        if last is not None:
            sql += f" LIMIT {int(last)}"
        return [VerdictRow(**dict(r)) for r in reversed(self._query(sql, tuple(params)))]

    # -- baselines and vetting -------------------------------------------------------------------
    def record_baseline(self, task_key: str, device: str, device_name: str, kind: str, stats: TimingStats, torch_version: str) -> None:
        self._exec("INSERT INTO baselines (task_key, device, device_name, kind, median_ms, q1_ms, q3_ms, torch_version, created_at) "
                   "VALUES (?,?,?,?,?,?,?,?,?)",
                   (task_key, device, device_name, kind, stats.median_ms, stats.q1_ms, stats.q3_ms, torch_version, time.time()))

    def baselines(self, task_key: str, device_name: str) -> dict[str, Baseline]:
        """The latest baseline of each kind for a task on a device."""
        rows = self._query("SELECT task_key, device_name, kind, median_ms, q1_ms, q3_ms FROM baselines "
                           "WHERE task_key=? AND device_name=? ORDER BY id", (task_key, device_name))
        return {r["kind"]: Baseline(**dict(r)) for r in rows}

    def record_vetting(self, task_key: str, device: str, degenerate: bool, findings: list[dict[str, Any]]) -> None:
        self._exec("INSERT INTO vettings (task_key, device, degenerate, findings_json, created_at) VALUES (?,?,?,?,?)",
                   (task_key, device, int(degenerate), json.dumps(findings), time.time()))
