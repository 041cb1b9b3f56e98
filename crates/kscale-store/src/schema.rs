//! Forward-only migrations keyed on `PRAGMA user_version`. Migration N takes
//! a database from version N to N + 1; released migrations are never edited,
//! only appended to.

use rusqlite::Connection;

/// `kscl` — marks the file as ours, so a foreign SQLite file is refused
/// instead of being silently given our tables.
pub const APPLICATION_ID: i64 = 0x6b73_636c;

pub(crate) const MIGRATIONS: &[&str] = &[
    // v0 → v1: runs, cases, their metric declarations, raw trials.
    "CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        label TEXT NOT NULL,
        started_at TEXT NOT NULL,
        ended_at TEXT,
        status TEXT NOT NULL,
        kscale_version TEXT NOT NULL,
        git_rev TEXT,
        args TEXT NOT NULL,
        options TEXT NOT NULL,
        snapshot TEXT NOT NULL
    );
    CREATE INDEX runs_label ON runs(label);
    CREATE TABLE cases (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        workload TEXT NOT NULL,
        params TEXT NOT NULL,
        cpus_name TEXT NOT NULL,
        cpus TEXT NOT NULL,
        status TEXT NOT NULL,
        converged INTEGER,
        error TEXT,
        iterations INTEGER,
        notes TEXT,
        UNIQUE (run_id, workload, params, cpus_name)
    );
    CREATE TABLE metrics (
        case_id INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        unit TEXT NOT NULL,
        direction TEXT NOT NULL,
        is_primary INTEGER NOT NULL,
        PRIMARY KEY (case_id, name)
    );
    CREATE TABLE trials (
        id INTEGER PRIMARY KEY,
        case_id INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        warmup INTEGER NOT NULL,
        started_at TEXT NOT NULL,
        wall_s REAL NOT NULL,
        iterations INTEGER,
        vals TEXT NOT NULL,
        UNIQUE (case_id, idx)
    );",
    // v1 → v2: per-trial CPU accounting from /proc/stat (JSON).
    "ALTER TABLE trials ADD COLUMN accounting TEXT;",
    // v2 → v3: kernel profiles of each case's extra, uncounted profiled
    // trial (docs/method.md), one row per sampled event.
    "CREATE TABLE profiles (
        case_id INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
        event TEXT NOT NULL,
        sample_on TEXT NOT NULL,
        total INTEGER NOT NULL,
        kernel INTEGER NOT NULL,
        user INTEGER NOT NULL,
        idle INTEGER NOT NULL,
        spinlock INTEGER NOT NULL,
        lost INTEGER NOT NULL,
        symbols TEXT NOT NULL,
        comms TEXT NOT NULL,
        ops INTEGER,
        value REAL,
        wall_s REAL,
        PRIMARY KEY (case_id, event)
    );",
    // v3 → v4: macro workloads (docs/macro.md). Percentile metrics name the
    // histogram they are read from; each trial keeps its latency histograms
    // (name → base64 HdrHistogram V2) and the CPU time of its role processes;
    // each case its run rule's estimator (mean, or median of N trials).
    "ALTER TABLE metrics ADD COLUMN hist TEXT;
    ALTER TABLE metrics ADD COLUMN quantile REAL;
    ALTER TABLE metrics ADD COLUMN per_ns REAL;
    ALTER TABLE trials ADD COLUMN histograms TEXT;
    ALTER TABLE trials ADD COLUMN roles TEXT;
    ALTER TABLE cases ADD COLUMN estimator TEXT NOT NULL DEFAULT 'mean';
    ALTER TABLE cases ADD COLUMN rule_n INTEGER;",
    // kscale tune (docs/tune.md): tuning studies, their steps (one run
    // each), and the journal of every setting changed, with its old value.
    "CREATE TABLE tunes (
        id INTEGER PRIMARY KEY,
        label TEXT NOT NULL,
        plan_file TEXT NOT NULL,
        plan TEXT NOT NULL,
        started_at TEXT NOT NULL,
        ended_at TEXT,
        status TEXT NOT NULL
    );
    CREATE TABLE tune_steps (
        tune_id INTEGER NOT NULL REFERENCES tunes(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        name TEXT NOT NULL,
        rationale TEXT NOT NULL,
        run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL,
        error TEXT,
        PRIMARY KEY (tune_id, seq)
    );
    CREATE INDEX tune_steps_run ON tune_steps(run_id);
    CREATE TABLE journal (
        id INTEGER PRIMARY KEY,
        tune_id INTEGER,
        pid INTEGER NOT NULL,
        kind TEXT NOT NULL,
        target TEXT NOT NULL,
        old_value TEXT NOT NULL,
        new_value TEXT NOT NULL,
        applied_at TEXT NOT NULL,
        restored_at TEXT,
        note TEXT
    );",
];

pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Applies every migration after `from`, each in its own transaction together
/// with the version bump, so a crash mid-way leaves a consistent version.
pub fn migrate(conn: &mut Connection, from: i64) -> rusqlite::Result<()> {
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(from.max(0) as usize) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "application_id", APPLICATION_ID)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
        tx.commit()?;
    }
    Ok(())
}
