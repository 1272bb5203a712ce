"""Schema migrations, applied in order; `PRAGMA user_version` records how many ran. `statements` splits
one into the statements Store runs."""

from __future__ import annotations

import sqlite3

MIGRATIONS: list[str] = [
    """
    CREATE TABLE tasks (
        key TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        suite TEXT NOT NULL DEFAULT '',
        level INTEGER,
        problem_id INTEGER,
        path TEXT,
        source_hash TEXT NOT NULL,
        source TEXT NOT NULL,
        meta_json TEXT NOT NULL DEFAULT '{}',
        created_at REAL NOT NULL
    );
    CREATE TABLE candidates (
        id INTEGER PRIMARY KEY,
        task_key TEXT NOT NULL REFERENCES tasks(key),
        source_hash TEXT NOT NULL,
        source TEXT NOT NULL,
        origin TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL,
        UNIQUE (task_key, source_hash)
    );
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        args_json TEXT NOT NULL DEFAULT '{}',
        started_at REAL NOT NULL,
        finished_at REAL
    );
    CREATE TABLE verdicts (
        id INTEGER PRIMARY KEY,
        candidate_id INTEGER NOT NULL REFERENCES candidates(id),
        task_key TEXT NOT NULL,
        run_id TEXT REFERENCES runs(id),
        device TEXT NOT NULL,
        device_name TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL,
        speedup REAL,
        effective_speedup REAL,
        reference_ms REAL,
        candidate_ms REAL,
        coverage REAL,
        flags TEXT NOT NULL DEFAULT '',
        judge_version TEXT NOT NULL DEFAULT '',
        torch_version TEXT NOT NULL DEFAULT '',
        verdict_json TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    CREATE INDEX verdicts_task ON verdicts(task_key, device_name);
    CREATE INDEX verdicts_run ON verdicts(run_id);
    CREATE TABLE baselines (
        id INTEGER PRIMARY KEY,
        task_key TEXT NOT NULL,
        device TEXT NOT NULL,
        device_name TEXT NOT NULL,
        kind TEXT NOT NULL,
        median_ms REAL NOT NULL,
        q1_ms REAL NOT NULL,
        q3_ms REAL NOT NULL,
        torch_version TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL
    );
    CREATE INDEX baselines_task ON baselines(task_key, device_name, kind);
    CREATE TABLE vettings (
        id INTEGER PRIMARY KEY,
        task_key TEXT NOT NULL,
        device TEXT NOT NULL,
        degenerate INTEGER NOT NULL,
        findings_json TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    """,
    """
    CREATE TABLE llm_calls (
        id INTEGER PRIMARY KEY,
        run_id TEXT REFERENCES runs(id),
        purpose TEXT NOT NULL DEFAULT '',
        task_key TEXT NOT NULL DEFAULT '',
        model TEXT NOT NULL,
        request_key TEXT NOT NULL,
        sample INTEGER NOT NULL DEFAULT 0,
        prompt_tokens INTEGER NOT NULL DEFAULT 0,
        completion_tokens INTEGER NOT NULL DEFAULT 0,
        cost_usd REAL,
        latency_s REAL,
        attempts INTEGER NOT NULL DEFAULT 0,
        cached INTEGER NOT NULL DEFAULT 0,
        error TEXT,
        prompt_path TEXT NOT NULL,
        reply_path TEXT,
        created_at REAL NOT NULL
    );
    CREATE INDEX llm_calls_run ON llm_calls(run_id, task_key);
    """,
    """
    CREATE TABLE run_tasks (
        run_id TEXT NOT NULL REFERENCES runs(id),
        task_key TEXT NOT NULL REFERENCES tasks(key),
        position INTEGER NOT NULL,
        finished_at REAL,
        PRIMARY KEY (run_id, task_key)
    );
    CREATE TABLE attempts (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs(id),
        task_key TEXT NOT NULL,
        sample INTEGER NOT NULL,
        turn INTEGER NOT NULL,
        llm_call_id INTEGER REFERENCES llm_calls(id),
        verdict_id INTEGER REFERENCES verdicts(id),
        status TEXT NOT NULL,
        speedup REAL,
        feedback TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL,
        UNIQUE (run_id, task_key, sample, turn)
    );
    """,
    """
    ALTER TABLE attempts ADD COLUMN meta_json TEXT NOT NULL DEFAULT '{}';
    ALTER TABLE candidates ADD COLUMN norm_hash TEXT NOT NULL DEFAULT '';
    ALTER TABLE verdicts ADD COLUMN context_hash TEXT NOT NULL DEFAULT '';
    CREATE INDEX verdicts_context ON verdicts(context_hash);
    CREATE TABLE search_state (
        run_id TEXT NOT NULL REFERENCES runs(id),
        task_key TEXT NOT NULL,
        key TEXT NOT NULL,
        value_json TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (run_id, task_key, key)
    );
    CREATE TABLE skills (
        name TEXT NOT NULL,
        version INTEGER NOT NULL,
        skill_json TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (name, version)
    );
    CREATE TABLE skill_snapshots (
        id INTEGER PRIMARY KEY,
        parent INTEGER REFERENCES skill_snapshots(id),
        reason TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    CREATE TABLE skill_snapshot_members (
        snapshot INTEGER NOT NULL REFERENCES skill_snapshots(id),
        name TEXT NOT NULL,
        version INTEGER NOT NULL,
        PRIMARY KEY (snapshot, name)
    );
    CREATE TABLE skill_candidates (
        id INTEGER PRIMARY KEY,
        run_id TEXT REFERENCES runs(id),
        task_key TEXT NOT NULL DEFAULT '',
        skill_json TEXT NOT NULL,
        status TEXT NOT NULL,
        reason TEXT NOT NULL DEFAULT '',
        evidence_json TEXT NOT NULL DEFAULT '{}',
        snapshot INTEGER REFERENCES skill_snapshots(id),
        created_at REAL NOT NULL
    );
    """,
    """
    -- the judge service's queue (kernelcraft serve-judge): one job per submitted candidate
    CREATE TABLE jobs (
        id INTEGER PRIMARY KEY,
        client_key TEXT UNIQUE,
        status TEXT NOT NULL,
        task_key TEXT NOT NULL,
        task_json TEXT NOT NULL,
        source TEXT NOT NULL,
        fresh INTEGER NOT NULL DEFAULT 0,
        verdict_id INTEGER REFERENCES verdicts(id),
        reused INTEGER NOT NULL DEFAULT 0,
        error TEXT,
        claims INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        started_at REAL,
        finished_at REAL
    );
    CREATE INDEX jobs_status ON jobs(status, id);
    """,
    """
    -- a reasoning model's thinking, kept apart from its reply
    ALTER TABLE llm_calls ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE llm_calls ADD COLUMN reasoning_path TEXT;
    """,
    """
    -- a correct verdict's per-kernel profile (ncu, or the profiler's kernel list), taken after the verdict
    CREATE TABLE kernel_profiles (
        verdict_id INTEGER PRIMARY KEY REFERENCES verdicts(id),
        tool TEXT NOT NULL,
        profile_json TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    """,
    """
    -- where a verdict was measured when one run spreads over several devices and hosts (a Ray cluster)
    ALTER TABLE verdicts ADD COLUMN device_index INTEGER;
    ALTER TABLE verdicts ADD COLUMN node TEXT NOT NULL DEFAULT '';
    """,
]


def statements(script: str) -> list[str]:
    """A migration script as single statements (executescript would commit the migration's transaction)."""
    out: list[str] = []
    buf = ""
    for piece in script.split(";"):
        buf += piece + ";"
        if sqlite3.complete_statement(buf):
            if buf.strip(" \n\t;"):
                out.append(buf.strip())
            buf = ""
    if buf.strip(" \n\t;"):
        raise ValueError(f"incomplete SQL statement in a migration: {buf.strip()[:60]}")
    return out
