//! Forward-only migrations, one list for both backends (docs/store.md).
//! Migration N takes a database from version N to N + 1; released migrations
//! are never edited, only appended to.
//!
//! A migration is written once, in SQLite's dialect with SQL keywords and
//! types in upper case and names in lower case; [`pg_ddl`] turns it into
//! PostgreSQL's (`INTEGER` → `BIGINT`, `INTEGER PRIMARY KEY` → an identity
//! column, `REAL` → `DOUBLE PRECISION`, a `rowid` identity column on every
//! table, reserved lower-case names such as `user` quoted). The version and
//! the application marker live in `PRAGMA user_version`/`application_id` on
//! SQLite and in the one-row table `kscale_schema` on PostgreSQL.

use crate::db::{Backend, Db};
use crate::{Result, StoreError};

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
    // v4 → v5 (fleet: run identity and import, docs/fleet.md): every run's
    // UUID, so an exported run is recognised when imported again. Runs made
    // before this migration get theirs when first asked for it
    // (`Store::run_uuid`): random UUIDs are not portable SQL.
    "ALTER TABLE runs ADD COLUMN uuid TEXT;
    CREATE UNIQUE INDEX runs_uuid ON runs(uuid);",
    // v5 → v6 (kscale tune, docs/tune.md): tuning studies, their steps (one run
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
    // v6 → v7 (killed runs, docs/store.md): the host, boot and process
    // measuring a run, so that readers can tell a killed run from a live one.
    "ALTER TABLE runs ADD COLUMN host TEXT;
    ALTER TABLE runs ADD COLUMN boot_id TEXT;
    ALTER TABLE runs ADD COLUMN pid INTEGER;
    ALTER TABLE runs ADD COLUMN pid_start INTEGER;",
    // v7 → v8 (interleaved tuning steps, docs/tune.md): how each step was
    // measured against the state before it, `interleaved …` or
    // `sequential: why`; empty for studies made before.
    "ALTER TABLE tune_steps ADD COLUMN measured TEXT;",
    // v8 → v9 (the gauge and the control, docs/method.md): the machine's
    // own speed on each CPU at moments before and through a run.
    "CREATE TABLE gauge (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        t_s REAL NOT NULL,
        cpu INTEGER NOT NULL,
        cpu_ns REAL NOT NULL,
        mem_mbs REAL,
        wake_us REAL,
        PRIMARY KEY (run_id, seq, cpu)
    );",
    // v9 → v10 (history and change points, docs/history.md): a case across
    // runs is found by its workload, not run by run (series.rs).
    "CREATE INDEX cases_workload ON cases(workload, cpus_name);",
    // v10 → v11 (the gauge's kernel crossing, docs/method.md): a system
    // call's time at each reading, which moves when the host slows kernel
    // paths and the CPU loop does not.
    "ALTER TABLE gauge ADD COLUMN sys_ns REAL;",
    // v11 → v12 (where the control's line does not apply, docs/method.md):
    // the CPU loop's mean over a reading's repetitions, which counts a
    // preemption burst that the median steps past.
    "ALTER TABLE gauge ADD COLUMN cpu_mean_ns REAL;",
    // v12 → v13 (the thread's own clock, docs/method.md): the CPU loop and
    // the kernel crossing on the thread's CPU clock, the machine as cases
    // timed on that clock meet it.
    "ALTER TABLE gauge ADD COLUMN cpu_thread_ns REAL;
     ALTER TABLE gauge ADD COLUMN sys_thread_ns REAL;",
];

pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// What a database says about itself before it is migrated.
#[derive(Debug)]
pub(crate) struct Marker {
    pub app_id: i64,
    pub version: i64,
    /// Tables other than the marker's own.
    pub tables: i64,
}

pub(crate) fn marker(db: &Db) -> Result<Marker> {
    match db.backend() {
        Backend::Sqlite => {
            let one = |sql: &str| db.query_one(sql, &[], |r| r.get::<i64>(0));
            Ok(Marker {
                app_id: one("PRAGMA application_id")?,
                version: one("PRAGMA user_version")?,
                tables: one("SELECT count(*) FROM sqlite_master WHERE type = 'table'")?,
            })
        }
        Backend::Postgres => {
            let tables = |name_filter: &str| {
                db.query_one(
                    &format!(
                        "SELECT count(*) FROM information_schema.tables
                         WHERE table_schema = current_schema() {name_filter}"
                    ),
                    &[],
                    |r| r.get::<i64>(0),
                )
            };
            let ours = tables("AND table_name = 'kscale_schema'")? > 0;
            let others = tables("AND table_name <> 'kscale_schema'")?;
            if !ours {
                return Ok(Marker {
                    app_id: 0,
                    version: 0,
                    tables: others,
                });
            }
            let (app_id, version) = db
                .query_opt(
                    "SELECT application_id, version FROM kscale_schema",
                    &[],
                    |r| Ok((r.get::<i64>(0)?, r.get::<i64>(1)?)),
                )?
                .unwrap_or((0, 0));
            Ok(Marker {
                app_id,
                version,
                tables: others,
            })
        }
    }
}

pub(crate) fn set_marker(db: &Db, version: i64) -> Result<()> {
    match db.backend() {
        Backend::Sqlite => db.batch(&format!(
            "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {version};"
        )),
        Backend::Postgres => {
            db.batch(
                "CREATE TABLE IF NOT EXISTS kscale_schema (
                    application_id BIGINT NOT NULL,
                    version BIGINT NOT NULL
                 );
                 DELETE FROM kscale_schema;",
            )?;
            db.execute(
                "INSERT INTO kscale_schema (application_id, version) VALUES ($1, $2)",
                &[&APPLICATION_ID, &version],
            )?;
            Ok(())
        }
    }
}

/// Refuses a database that is not ours or that a newer kscale wrote.
pub(crate) fn check(m: &Marker, location: &str) -> Result<()> {
    if m.app_id != APPLICATION_ID && (m.app_id != 0 || m.tables > 0) {
        return Err(StoreError::Foreign {
            path: location.into(),
            why: format!("application id {:#x}, {} tables", m.app_id, m.tables),
        });
    }
    if m.version > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            path: location.into(),
            found: m.version,
            known: SCHEMA_VERSION,
        });
    }
    Ok(())
}

/// Applies every pending migration, each in its own transaction together
/// with the version bump, so a crash mid-way leaves a consistent version.
/// The version is read again under the write lock (SQLite's `BEGIN
/// IMMEDIATE`, a PostgreSQL advisory lock), so processes opening a new
/// database at once apply each migration exactly once.
pub(crate) fn migrate(db: &Db, location: &str) -> Result<()> {
    loop {
        let applied = db.transaction(|db| {
            if db.backend() == Backend::Postgres {
                db.execute("SELECT pg_advisory_xact_lock($1)", &[&APPLICATION_ID])?;
            }
            let m = marker(db)?;
            check(&m, location)?;
            let Some(sql) = MIGRATIONS.get(m.version.max(0) as usize) else {
                return Ok(false);
            };
            match db.backend() {
                Backend::Sqlite => db.batch(sql)?,
                Backend::Postgres => db.batch(&pg_ddl(sql))?,
            }
            set_marker(db, m.version + 1)?;
            Ok(true)
        })?;
        if !applied {
            return Ok(());
        }
    }
}

/// Lower-case words PostgreSQL reserves that a column could be named; a
/// migration's use of them is quoted.
const PG_RESERVED: &[&str] = &[
    "all",
    "analyse",
    "analyze",
    "and",
    "any",
    "array",
    "as",
    "asc",
    "both",
    "case",
    "cast",
    "check",
    "collate",
    "column",
    "constraint",
    "create",
    "current_catalog",
    "current_date",
    "current_role",
    "current_time",
    "current_timestamp",
    "current_user",
    "default",
    "desc",
    "distinct",
    "do",
    "else",
    "end",
    "except",
    "false",
    "fetch",
    "for",
    "foreign",
    "from",
    "grant",
    "group",
    "having",
    "in",
    "initially",
    "intersect",
    "into",
    "lateral",
    "leading",
    "limit",
    "localtime",
    "localtimestamp",
    "not",
    "null",
    "offset",
    "on",
    "only",
    "or",
    "order",
    "placing",
    "primary",
    "references",
    "returning",
    "select",
    "session_user",
    "some",
    "symmetric",
    "table",
    "then",
    "to",
    "trailing",
    "true",
    "union",
    "unique",
    "user",
    "using",
    "variadic",
    "when",
    "where",
    "window",
    "with",
];

#[derive(Debug, PartialEq)]
enum Tok<'a> {
    Word(&'a str),
    Other(&'a str),
}

fn tokens(sql: &str) -> Vec<Tok<'_>> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let start = i;
        let c = b[i];
        if c.is_ascii_alphabetic() || c == b'_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Word(&sql[start..i]));
            continue;
        }
        if c == b'\'' || c == b'"' {
            i += 1;
            while i < b.len() && b[i] != c {
                i += 1;
            }
            i = (i + 1).min(b.len());
        } else if c == b'-' && b.get(i + 1) == Some(&b'-') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else {
            // One character (UTF-8 aware).
            i += sql[i..].chars().next().map_or(1, char::len_utf8);
        }
        out.push(Tok::Other(&sql[start..i]));
    }
    out
}

/// A migration in SQLite's dialect, rewritten for PostgreSQL (see the
/// module doc).
pub(crate) fn pg_ddl(sql: &str) -> String {
    let toks = tokens(sql);
    let words = |from: usize| {
        toks[from..]
            .iter()
            .filter_map(|t| match t {
                Tok::Word(w) => Some(*w),
                Tok::Other(_) => None,
            })
            .take(2)
            .collect::<Vec<_>>()
    };
    let mut out = String::with_capacity(sql.len() + 64);
    // Paren depth inside a CREATE TABLE's column list (0: not in one).
    let mut table_depth = 0usize;
    let mut after_create_table = false;
    let mut prev_word = "";
    for (i, t) in toks.iter().enumerate() {
        match t {
            Tok::Word(w) => {
                match *w {
                    "INTEGER" if words(i + 1) == ["PRIMARY", "KEY"] => {
                        out.push_str("BIGINT GENERATED BY DEFAULT AS IDENTITY")
                    }
                    "INTEGER" => out.push_str("BIGINT"),
                    "REAL" => out.push_str("DOUBLE PRECISION"),
                    "BLOB" => out.push_str("BYTEA"),
                    "AUTOINCREMENT" => {}
                    w if PG_RESERVED.contains(&w) => {
                        out.push('"');
                        out.push_str(w);
                        out.push('"');
                    }
                    w => out.push_str(w),
                }
                if *w == "TABLE" && prev_word == "CREATE" {
                    after_create_table = true;
                }
                prev_word = w;
            }
            Tok::Other(s) => {
                if *s == "(" {
                    if after_create_table {
                        after_create_table = false;
                        table_depth = 1;
                    } else if table_depth > 0 {
                        table_depth += 1;
                    }
                } else if *s == ")" && table_depth > 0 {
                    table_depth -= 1;
                    if table_depth == 0 {
                        out.push_str(",\n        rowid BIGINT GENERATED ALWAYS AS IDENTITY\n    ");
                    }
                } else if *s == ";" {
                    after_create_table = false;
                }
                out.push_str(s);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pg_ddl_maps_types_identity_rowid_and_reserved_names() {
        let got = pg_ddl(
            "CREATE TABLE t (
                id INTEGER PRIMARY KEY,
                user INTEGER NOT NULL, -- a comment with INTEGER in it
                v REAL,
                s TEXT DEFAULT 'REAL user',
                UNIQUE (user, v)
            );
            ALTER TABLE t ADD COLUMN n INTEGER;",
        );
        let want = "CREATE TABLE t (
                id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                \"user\" BIGINT NOT NULL, -- a comment with INTEGER in it
                v DOUBLE PRECISION,
                s TEXT DEFAULT 'REAL user',
                UNIQUE (\"user\", v)
            ,
        rowid BIGINT GENERATED ALWAYS AS IDENTITY
    );
            ALTER TABLE t ADD COLUMN n BIGINT;";
        assert_eq!(got, want);
    }
}
