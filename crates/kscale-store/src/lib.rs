//! kscale's result store (docs/store.md): one SQLite file in write-ahead-log
//! mode, or a shared PostgreSQL database (`postgres://…`, feature
//! `postgres`). Raw trial values are the source of truth; every statistic is
//! recomputed from them, so a figure can always be re-derived and a killed
//! run resumed.
//!
//! Both backends sit behind `db::Db`: a store method is written once, with
//! `$1, $2 …` placeholders and portable SQL, and runs on both (db.rs says
//! how); a migration is appended once to `schema::MIGRATIONS` in SQLite's
//! dialect and translated for PostgreSQL (schema.rs says how). Every test in
//! tests.rs runs against both.

mod case;
pub mod costs;
mod db;
mod gauge;
pub mod import;
mod journal;
mod location;
pub mod owner;
#[cfg(feature = "postgres")]
mod pg;
#[cfg(all(feature = "postgres", any(test, feature = "test-harness")))]
pub mod pg_harness;
mod rows;
mod schema;
pub mod secret;
pub mod series;
#[cfg(feature = "test-harness")]
pub mod synthetic;
mod time;

use db::{Db, Row};
use kscale_core::model::CpuAccounting;
use kscale_core::profile::Profile;
use kscale_core::{CaseKey, Direction, Estimator, RoleCpu, RunRule, TrialValues};
use rusqlite::Connection;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use thiserror::Error;

pub use case::{CaseData, CaseStatus};
pub use db::Backend;
pub use import::{new_uuid, ImportOutcome};
pub use journal::{JournalEntry, TuneRow, TuneStep};
pub use location::{is_postgres_url, is_url, mask_url};
pub use owner::Owner;
pub use schema::SCHEMA_VERSION;
pub use secret::{mask_args, mask_json, mask_text};
pub use time::{now_rfc3339, parse_utc};

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("cannot open database {path}: {source}")]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("{path} is not a kscale database ({why})")]
    Foreign { path: PathBuf, why: String },
    #[error("{path} was written by a newer kscale (schema version {found}; this kscale knows up to {known}): upgrade kscale or use another --db")]
    TooNew {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    #[error("bad database URL {url}: {why}")]
    BadUrl { url: String, why: String },
    #[error("cannot connect to {url}: {why}")]
    Connect { url: String, why: String },
    #[error("no run `{0}` in the database (give a run id, a label, or `latest`; `kscale results` lists them)")]
    NoSuchRun(String),
    #[error("database error: {0}")]
    Sql(#[from] rusqlite::Error),
    #[cfg(feature = "postgres")]
    #[error("database error: {}", pg::chain(.0))]
    Pg(#[from] postgres::Error),
    #[error("unexpected value in the database: {0}")]
    Type(String),
    #[error("corrupt JSON in the database: {0}")]
    Json(#[from] serde_json::Error),
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

impl StoreError {
    /// A UNIQUE (or other) constraint refused the statement, on either
    /// backend: e.g. another process stored the same run UUID first.
    pub fn is_constraint_violation(&self) -> bool {
        match self {
            StoreError::Sql(e) => {
                e.sqlite_error_code() == Some(rusqlite::ErrorCode::ConstraintViolation)
            }
            #[cfg(feature = "postgres")]
            StoreError::Pg(e) => e.code().is_some_and(|c| c.code().starts_with("23")),
            _ => false,
        }
    }
}

pub struct Store {
    db: Db,
    /// The file, or the URL with its password masked.
    path: PathBuf,
}

/// What a new run records about itself.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NewRun {
    pub label: String,
    pub kscale_version: String,
    pub git_rev: String,
    pub args: Vec<String>,
    /// The run's resolved options (targets, CPU configs, run rules…), enough
    /// to resume it.
    pub options: serde_json::Value,
    pub snapshot: serde_json::Value,
}

/// Where a run (or a tuning study) stands; stored as its lowercase name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunStatus {
    /// Being measured, or killed so suddenly that nothing said otherwise.
    Running,
    /// Every case ended; some may have failed, each with its error.
    Complete,
    /// Every case failed, or the run stopped on an error of its own.
    Failed,
    /// Stopped by a signal; `kscale run --resume` continues it.
    Interrupted,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Complete => "complete",
            RunStatus::Failed => "failed",
            RunStatus::Interrupted => "interrupted",
        }
    }

    /// The status a stored string names, if it is one kscale writes.
    pub fn parse(s: &str) -> Option<RunStatus> {
        [
            RunStatus::Running,
            RunStatus::Complete,
            RunStatus::Failed,
            RunStatus::Interrupted,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunRow {
    pub id: i64,
    pub label: String,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub status: String,
    pub kscale_version: String,
    pub git_rev: String,
    pub args: Vec<String>,
    pub options: serde_json::Value,
    pub snapshot: serde_json::Value,
    pub cases_total: i64,
    pub cases_done: i64,
    pub cases_failed: i64,
    /// Cases the machine could not run (a program missing), with a reason.
    pub cases_skipped: i64,
    pub not_converged: i64,
    /// The process that measures (or measured) the run, where recorded.
    /// A `running` run whose process is gone reads `killed` ([`owner`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<Owner>,
}

impl RunRow {
    /// The estimator the run was measured under: its options' rule, the
    /// mean for runs stored before there was a choice (docs/method.md,
    /// "Host spells and the estimator").
    pub fn estimator(&self) -> Estimator {
        self.options["rule"]["estimator"]
            .as_str()
            .and_then(Estimator::parse)
            .unwrap_or(Estimator::Mean)
    }

    /// The run's status, when it is one this kscale writes (a run imported
    /// from another keeps its string in `status`).
    pub fn run_status(&self) -> Option<RunStatus> {
        RunStatus::parse(&self.status)
    }

    /// Whether kscale kept the run's idle CPUs polling (docs/host.md,
    /// "Idle CPUs"): the snapshot's `cpu_idle.kscale`, written by the run.
    pub fn idle_cpus_polled(&self) -> bool {
        self.snapshot["cpu_idle"]["kscale"] == "poll"
    }

    /// The mark every table puts on a run measured in an emulated guest
    /// (`kscale vm` without KVM, docs/vm.md): its figures are QEMU's
    /// translator's, not the kernel's.
    pub fn emulated_mark(&self) -> Option<String> {
        emulated_mark(&self.snapshot)
    }

    /// Was the run killed (its status `killed`, as read): the process that
    /// ran it is gone without marking it ended. `kscale run --resume`
    /// continues it.
    pub fn killed(&self) -> bool {
        self.status == "killed"
    }

    /// The status as a header shows it: a killed run with the command that
    /// continues it.
    pub fn status_line(&self) -> String {
        if self.killed() {
            format!("killed (continue it: kscale run --resume {})", self.id)
        } else {
            self.status.clone()
        }
    }
}

/// How `kscale vm` booted the guest a run was measured in, as one word
/// pair (`TCG 2cpu`, `KVM up`); `None` for a run on a host's own kernel.
/// Runs with different tags are different machines to a verdict: an
/// emulated kernel's spread is not the native one's.
pub fn vm_tag(snapshot: &serde_json::Value) -> Option<String> {
    let vm = &snapshot["vm"];
    let accel = vm["accel"].as_str()?;
    Some(if vm["up"] == true {
        format!("{accel} up")
    } else {
        format!("{accel} {}cpu", vm["vcpus"].as_u64().unwrap_or(0))
    })
}

/// [`RunRow::emulated_mark`] of a run's snapshot.
pub fn emulated_mark(snapshot: &serde_json::Value) -> Option<String> {
    let vm = &snapshot["vm"];
    (vm["emulated"] == true).then(|| {
        format!(
            "emulated ({}): not the kernel's speed",
            vm["accel"].as_str().unwrap_or("TCG")
        )
    })
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MetricRow {
    pub name: String,
    pub unit: String,
    pub direction: Direction,
    pub primary: bool,
    /// For a percentile metric: where its result is read from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantile: Option<QuantileOf>,
}

/// A percentile metric's source: quantile `q` of histogram `hist` (ns),
/// times `per_ns` to reach the metric's unit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuantileOf {
    pub hist: String,
    pub q: f64,
    pub per_ns: f64,
}

impl MetricRow {
    /// The rows of a workload's metric declarations, the first primary (as
    /// every workload declares its primary metric first).
    pub fn rows_of(metrics: &[kscale_core::MetricDef]) -> Vec<MetricRow> {
        metrics
            .iter()
            .enumerate()
            .map(|(i, m)| MetricRow::from_def(m, i == 0))
            .collect()
    }

    /// The row a workload's metric declaration is stored as.
    pub fn from_def(m: &kscale_core::MetricDef, primary: bool) -> MetricRow {
        MetricRow {
            name: m.name.into(),
            unit: m.unit.into(),
            direction: m.direction,
            primary,
            quantile: match m.kind {
                kscale_core::MetricKind::Quantile { hist, q, per_ns } => Some(QuantileOf {
                    hist: hist.into(),
                    q,
                    per_ns,
                }),
                kscale_core::MetricKind::Value => None,
            },
        }
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TrialRow {
    pub idx: i64,
    pub warmup: bool,
    pub started_at: String,
    pub wall_s: f64,
    pub iterations: Option<u64>,
    pub values: TrialValues,
    pub accounting: Option<CpuAccounting>,
    /// Latency histograms of a macro workload's trial: name → base64
    /// HdrHistogram V2 of nanoseconds ([`kscale_core::hist`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub histograms: BTreeMap<String, String>,
    /// CPU time of each role process in the measured window.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<RoleCpu>,
}

/// One finished trial, as the runner hands it to the store.
#[derive(Clone, Debug)]
pub struct NewTrial<'a> {
    pub idx: i64,
    pub warmup: bool,
    pub wall_s: f64,
    pub iterations: Option<u64>,
    pub values: &'a TrialValues,
    pub accounting: Option<&'a CpuAccounting>,
    pub histograms: &'a BTreeMap<String, String>,
    pub roles: &'a [RoleCpu],
}

impl TrialRow {
    /// The stored trial as a new one to add elsewhere (an import, a
    /// capacity search's answer), under the index `idx`.
    pub fn as_new(&self, idx: i64) -> NewTrial<'_> {
        NewTrial {
            idx,
            warmup: self.warmup,
            wall_s: self.wall_s,
            iterations: self.iterations,
            values: &self.values,
            accounting: self.accounting.as_ref(),
            histograms: &self.histograms,
            roles: &self.roles,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunData {
    pub run: RunRow,
    pub cases: Vec<CaseData>,
}

impl Store {
    /// Opens (creating if needed) and migrates a database: a file path, or
    /// a `postgres://` URL (see [`Store::open_url`]). Refuses databases that
    /// are not kscale's or that a newer kscale wrote.
    pub fn open(path: &Path) -> Result<Store> {
        if let Some(url) = path.to_str().filter(|s| is_url(s)) {
            return Store::open_url(url);
        }
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() {
                let _ = std::fs::create_dir_all(dir);
            }
        }
        let conn = Connection::open(path).map_err(|e| StoreError::Open {
            path: path.into(),
            source: e,
        })?;
        let store = Store {
            db: Db::Sqlite(conn),
            path: path.to_path_buf(),
        };
        store.prepare_sqlite()?;
        Ok(store)
    }

    /// Opens a PostgreSQL store: `postgres://user[:password]@host[:port]/db`,
    /// or a Unix socket directory as the host, percent-encoded
    /// (`postgres://user@%2Frun%2Fpostgresql/db`) or as `?host=/dir`. The
    /// database must exist; its tables are created. The password is never
    /// shown: errors and [`Store::path`] carry the masked URL.
    pub fn open_url(url: &str) -> Result<Store> {
        if !is_postgres_url(url) {
            return Err(StoreError::BadUrl {
                url: mask_url(url),
                why: "unsupported scheme; give postgres://… or postgresql://…, or a file path for SQLite".into(),
            });
        }
        #[cfg(feature = "postgres")]
        {
            let client = pg::connect(url)?;
            let store = Store {
                db: Db::Pg(std::cell::RefCell::new(client)),
                path: PathBuf::from(mask_url(url)),
            };
            schema::migrate(&store.db, &store.location())?;
            Ok(store)
        }
        #[cfg(not(feature = "postgres"))]
        Err(StoreError::BadUrl {
            url: mask_url(url),
            why: "this kscale was built without PostgreSQL support (cargo feature `postgres`)"
                .into(),
        })
    }

    /// Where the store lives, for messages: the file, or the URL with its
    /// password masked.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// [`Store::path`] as text.
    pub fn location(&self) -> String {
        self.path.display().to_string()
    }

    pub fn backend(&self) -> Backend {
        self.db.backend()
    }

    /// Checks and migrates a SQLite file. Processes opening a new file at
    /// the same moment can get "database is locked" at once rather than
    /// after the busy timeout — SQLite refuses to wait where waiting could
    /// deadlock (switching to WAL, upgrading a read lock) — so the whole
    /// sequence is retried for as long as the busy timeout.
    fn prepare_sqlite(&self) -> Result<()> {
        const BUSY: std::time::Duration = std::time::Duration::from_secs(10);
        let start = std::time::Instant::now();
        let mut pause = 5;
        loop {
            match self.prepare_sqlite_once(BUSY) {
                Err(e) if is_busy(&e) && start.elapsed() < BUSY => {
                    std::thread::sleep(std::time::Duration::from_millis(pause));
                    pause = (pause * 2).min(100);
                }
                r => return r,
            }
        }
    }

    fn prepare_sqlite_once(&self, busy: std::time::Duration) -> Result<()> {
        #[allow(irrefutable_let_patterns)] // without the `postgres` feature
        let Db::Sqlite(conn) = &self.db
        else {
            return Ok(());
        };
        // First, as other processes may be migrating the same file.
        conn.busy_timeout(busy)?;
        // Any read fails on a file that is not SQLite at all. One read
        // transaction, so the marker and the table count come from the same
        // snapshot even while another process is migrating the file.
        let first = self
            .db
            .batch("BEGIN")
            .and_then(|()| schema::marker(&self.db));
        let _ = self
            .db
            .batch(if first.is_ok() { "COMMIT" } else { "ROLLBACK" });
        let first = first.map_err(|e| {
            if is_busy(&e) {
                e
            } else {
                StoreError::Foreign {
                    path: self.path.clone(),
                    why: e.to_string(),
                }
            }
        })?;
        schema::check(&first, &self.location())?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        schema::migrate(&self.db, &self.location())
    }

    /// Records a new run. Its command line, options and snapshot are
    /// stored with their secrets masked ([`secret`]): every command that
    /// stores a run comes through here.
    /// The run records this process as its owner ([`owner`]).
    pub fn create_run(&self, r: &NewRun) -> Result<i64> {
        let owner = Owner::current();
        self.db.insert_returning_id(
            "INSERT INTO runs (label, started_at, status, kscale_version, git_rev, args, options, snapshot, uuid,
                               host, boot_id, pid, pid_start)
             VALUES ($1, $2, 'running', $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING id",
            &[
                &r.label,
                &now_rfc3339(),
                &r.kscale_version,
                &r.git_rev,
                &serde_json::to_string(&mask_args(&r.args))?,
                &serde_json::to_string(&mask_json(&r.options))?,
                &serde_json::to_string(&mask_json(&r.snapshot))?,
                &new_uuid(),
                &owner.as_ref().map(|o| o.host.as_str()),
                &owner.as_ref().map(|o| o.boot_id.as_str()),
                &owner.as_ref().map(|o| o.pid),
                &owner.as_ref().and_then(|o| o.pid_start),
            ],
        )
    }

    /// `running`, `complete`, `interrupted` or `failed`. Setting a final
    /// status stamps the end time; setting `running` (a resumed run) makes
    /// this process the run's owner ([`owner`]).
    pub fn set_run_status(&self, run_id: i64, status: RunStatus) -> Result<()> {
        if status == RunStatus::Running {
            let owner = Owner::current();
            self.db.execute(
                "UPDATE runs SET status = $1, ended_at = NULL, host = $2, boot_id = $3, pid = $4,
                    pid_start = $5 WHERE id = $6",
                &[
                    &status.as_str(),
                    &owner.as_ref().map(|o| o.host.as_str()),
                    &owner.as_ref().map(|o| o.boot_id.as_str()),
                    &owner.as_ref().map(|o| o.pid),
                    &owner.as_ref().and_then(|o| o.pid_start),
                    &run_id,
                ],
            )?;
            return Ok(());
        }
        self.db.execute(
            "UPDATE runs SET status = $1, ended_at = $2 WHERE id = $3",
            &[&status.as_str(), &now_rfc3339(), &run_id],
        )?;
        Ok(())
    }

    /// Registers a case (idempotent, so a resumed run finds its old cases).
    pub fn ensure_case(
        &self,
        run_id: i64,
        seq: i64,
        key: &CaseKey,
        cpus: &[usize],
        metrics: &[MetricRow],
        rule: RunRule,
    ) -> Result<i64> {
        let params_json = key.params_json();
        if let Some(id) = self.db.query_opt(
            "SELECT id FROM cases WHERE run_id = $1 AND workload = $2 AND params = $3 AND cpus_name = $4",
            &[&run_id, &key.workload, &params_json, &key.cpus],
            |r| r.get::<i64>(0),
        )? {
            return Ok(id);
        }
        let cpus_json = serde_json::to_string(cpus)?;
        let rule_n = match rule {
            RunRule::MedianOf(n) => Some(n as i64),
            RunRule::Converge => None,
        };
        self.db.transaction(|db| {
            let id = db.insert_returning_id(
                "INSERT INTO cases (run_id, seq, workload, params, cpus_name, cpus, status, estimator, rule_n)
                 VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8) RETURNING id",
                &[
                    &run_id,
                    &seq,
                    &key.workload,
                    &params_json,
                    &key.cpus,
                    &cpus_json,
                    &rule.estimator(),
                    &rule_n,
                ],
            )?;
            for m in metrics {
                db.execute(
                    "INSERT INTO metrics (case_id, name, unit, direction, is_primary, hist, quantile, per_ns)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                    &[
                        &id,
                        &m.name,
                        &m.unit,
                        &m.direction.as_str(),
                        &m.primary,
                        &m.quantile.as_ref().map(|q| q.hist.as_str()),
                        &m.quantile.as_ref().map(|q| q.q),
                        &m.quantile.as_ref().map(|q| q.per_ns),
                    ],
                )?;
            }
            Ok(id)
        })
    }

    /// Stores one trial; committed at once (autocommit) so a kill loses at
    /// most the trial in flight.
    pub fn add_trial(&self, case_id: i64, t: &NewTrial<'_>) -> Result<()> {
        let accounting = t.accounting.map(serde_json::to_string).transpose()?;
        let histograms = (!t.histograms.is_empty())
            .then(|| serde_json::to_string(t.histograms))
            .transpose()?;
        let roles = (!t.roles.is_empty())
            .then(|| serde_json::to_string(t.roles))
            .transpose()?;
        self.db.execute(
            "INSERT INTO trials (case_id, idx, warmup, started_at, wall_s, iterations, vals, accounting, histograms, roles)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
             ON CONFLICT (case_id, idx) DO UPDATE SET warmup = excluded.warmup,
                started_at = excluded.started_at, wall_s = excluded.wall_s,
                iterations = excluded.iterations, vals = excluded.vals,
                accounting = excluded.accounting, histograms = excluded.histograms,
                roles = excluded.roles",
            &[
                &case_id,
                &t.idx,
                &t.warmup,
                &now_rfc3339(),
                &t.wall_s,
                &t.iterations.map(|i| i as i64),
                &serde_json::to_string(t.values)?,
                &accounting,
                &histograms,
                &roles,
            ],
        )?;
        Ok(())
    }

    pub fn finish_case(
        &self,
        case_id: i64,
        status: CaseStatus,
        converged: Option<bool>,
        error: Option<&str>,
        iterations: Option<u64>,
        notes: &[String],
    ) -> Result<()> {
        self.db.execute(
            "UPDATE cases SET status = $1, converged = $2, error = $3, iterations = $4, notes = $5 WHERE id = $6",
            &[
                &status.as_str(),
                &converged,
                &error,
                &iterations.map(|i| i as i64),
                &serde_json::to_string(notes)?,
                &case_id,
            ],
        )?;
        Ok(())
    }

    /// Sets `key` in the run's stored options to `value`: what a run
    /// decided while it ran and must keep when resumed.
    pub fn set_run_option(&self, run_id: i64, key: &str, value: serde_json::Value) -> Result<()> {
        let mut options = self.run(run_id)?.options;
        options[key] = value;
        self.db.execute(
            "UPDATE runs SET options = $1 WHERE id = $2",
            &[&serde_json::to_string(&mask_json(&options))?, &run_id],
        )?;
        Ok(())
    }

    /// Removes a case a study left out after its first trials (its trials
    /// with it) and adds `line` to the run's options' `left_out`, where
    /// `show` and the report name it: a case the budget could not fund at
    /// the noise it showed is not a result, and its NOT CONVERGED row
    /// would only hide the ones that are.
    ///
    /// `beside`: the case's twin on another configuration converged and
    /// stays. The case's row then stays too, as skipped with `line` for
    /// its reason (its trials gone): a row a configuration lacks leaves
    /// its family's mean there without a figure, one skipped there is
    /// left out of the mean and of the family's scalability, as the tables
    /// leave out any case that cannot run there.
    pub fn leave_out_case(
        &self,
        run_id: i64,
        case_id: i64,
        line: &str,
        beside: bool,
    ) -> Result<()> {
        let mut options = self.run(run_id)?.options;
        let mut list: Vec<serde_json::Value> =
            options["left_out"].as_array().cloned().unwrap_or_default();
        list.push(serde_json::Value::from(line));
        options["left_out"] = serde_json::Value::Array(list);
        self.db.transaction(|db| {
            if beside {
                db.execute("DELETE FROM trials WHERE case_id = $1", &[&case_id])?;
                db.execute("DELETE FROM profiles WHERE case_id = $1", &[&case_id])?;
                db.execute(
                    "UPDATE cases SET status = $1, converged = NULL, error = $2 WHERE id = $3 AND run_id = $4",
                    &[&CaseStatus::Skipped.as_str(), &line, &case_id, &run_id],
                )?;
            } else {
                db.execute(
                    "DELETE FROM cases WHERE id = $1 AND run_id = $2",
                    &[&case_id, &run_id],
                )?;
            }
            db.execute(
                "UPDATE runs SET options = $1 WHERE id = $2",
                &[&serde_json::to_string(&mask_json(&options))?, &run_id],
            )?;
            Ok(())
        })
    }

    pub fn runs(&self) -> Result<Vec<RunRow>> {
        self.db
            .query_rows(&format!("{RUN_SELECT} ORDER BY r.id"), &[], run_from_row)
    }

    /// A run id, a label (its latest run) or `latest`.
    pub fn resolve(&self, spec: &str) -> Result<i64> {
        let spec = spec.trim();
        let get = |r: &Row| r.get::<Option<i64>>(0);
        let by_label = || {
            self.db
                .query_one("SELECT max(id) FROM runs WHERE label = $1", &[&spec], get)
        };
        let found: Option<i64> = if spec == "latest" {
            self.db.query_one("SELECT max(id) FROM runs", &[], get)?
        } else if let Ok(id) = spec.parse::<i64>() {
            match self
                .db
                .query_opt("SELECT id FROM runs WHERE id = $1", &[&id], get)?
                .flatten()
            {
                Some(id) => Some(id),
                None => by_label()?,
            }
        } else {
            by_label()?
        };
        found.ok_or_else(|| StoreError::NoSuchRun(spec.to_string()))
    }

    pub fn run(&self, run_id: i64) -> Result<RunRow> {
        self.db
            .query_opt(
                &format!("{RUN_SELECT} WHERE r.id = $1"),
                &[&run_id],
                run_from_row,
            )?
            .ok_or_else(|| StoreError::NoSuchRun(run_id.to_string()))
    }

    pub fn load_run(&self, run_id: i64) -> Result<RunData> {
        let run = self.run(run_id)?;
        let run_estimator = run.estimator();
        let mut cases = self.db.query_rows(
            &format!(
                "SELECT {} FROM cases WHERE run_id = $1 ORDER BY seq, id",
                rows::CASE_COLUMNS
            ),
            &[&run_id],
            |r| rows::case(r, run_estimator),
        )?;
        for c in &mut cases {
            c.metrics = self.db.query_rows(
                &format!(
                    "SELECT {} FROM metrics WHERE case_id = $1 ORDER BY is_primary DESC, rowid",
                    rows::METRIC_COLUMNS
                ),
                &[&c.id],
                rows::metric,
            )?;
            c.trials = self.db.query_rows(
                &format!(
                    "SELECT {} FROM trials WHERE case_id = $1 ORDER BY idx",
                    rows::TRIAL_COLUMNS
                ),
                &[&c.id],
                rows::trial,
            )?;
            c.profiles = self.profiles(c.id)?;
        }
        Ok(RunData { run, cases })
    }

    /// Stores (or replaces) the profile of one event of a case's profiled
    /// trial.
    pub fn add_profile(&self, case_id: i64, p: &Profile) -> Result<()> {
        self.db.execute(
            "INSERT INTO profiles (case_id, event, sample_on, total, kernel, \"user\", idle, spinlock, lost, symbols, comms, ops, value, wall_s)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
             ON CONFLICT (case_id, event) DO UPDATE SET sample_on = excluded.sample_on,
                total = excluded.total, kernel = excluded.kernel, \"user\" = excluded.\"user\",
                idle = excluded.idle, spinlock = excluded.spinlock, lost = excluded.lost,
                symbols = excluded.symbols, comms = excluded.comms, ops = excluded.ops,
                value = excluded.value, wall_s = excluded.wall_s",
            &[
                &case_id,
                &p.event,
                &p.sample_on,
                &(p.total as i64),
                &(p.kernel as i64),
                &(p.user as i64),
                &(p.idle as i64),
                &(p.spinlock as i64),
                &(p.lost as i64),
                &serde_json::to_string(&p.by_symbol)?,
                &serde_json::to_string(&p.by_comm)?,
                &p.ops.map(|o| o as i64),
                &p.value,
                &p.wall_s,
            ],
        )?;
        Ok(())
    }

    /// The profiles of one case, CPU clock first.
    pub fn profiles(&self, case_id: i64) -> Result<Vec<Profile>> {
        self.db.query_rows(
            "SELECT event, sample_on, total, kernel, \"user\", idle, spinlock, lost, symbols, comms, ops, value, wall_s
             FROM profiles WHERE case_id = $1 ORDER BY event = 'cpu-clock' DESC, event",
            &[&case_id],
            |r| {
                let symbols: String = r.get(8)?;
                let comms: String = r.get(9)?;
                let n = |i: usize| -> Result<u64> { Ok(r.get::<i64>(i)?.max(0) as u64) };
                Ok(Profile {
                    event: r.get(0)?,
                    sample_on: r.get(1)?,
                    total: n(2)?,
                    kernel: n(3)?,
                    user: n(4)?,
                    idle: n(5)?,
                    spinlock: n(6)?,
                    lost: n(7)?,
                    by_symbol: serde_json::from_str(&symbols)?,
                    by_comm: serde_json::from_str(&comms)?,
                    ops: r.get::<Option<i64>>(10)?.map(|o| o.max(0) as u64),
                    value: r.get(11)?,
                    wall_s: r.get(12)?,
                })
            },
        )
    }
}

/// SQLite's "database is locked" (another connection holds the lock).
fn is_busy(e: &StoreError) -> bool {
    matches!(
        e,
        StoreError::Sql(rusqlite::Error::SqliteFailure(f, _))
            if f.code == rusqlite::ErrorCode::DatabaseBusy
    )
}

const RUN_SELECT: &str = "SELECT r.id, r.label, r.started_at, r.ended_at, r.status, r.kscale_version, r.git_rev,
        r.args, r.options, r.snapshot,
        (SELECT count(*) FROM cases c WHERE c.run_id = r.id),
        (SELECT count(*) FROM cases c WHERE c.run_id = r.id AND c.status = 'done'),
        (SELECT count(*) FROM cases c WHERE c.run_id = r.id AND c.status = 'failed'),
        (SELECT count(*) FROM cases c WHERE c.run_id = r.id AND c.status = 'done' AND c.converged = 0),
        (SELECT count(*) FROM cases c WHERE c.run_id = r.id AND c.status = 'skipped'),
        r.host, r.boot_id, r.pid, r.pid_start
    FROM runs r";

/// A stored run as every reader sees it: masked again, for runs recorded
/// before the store masked what it records.
fn run_from_row(r: &Row) -> Result<RunRow> {
    let args: String = r.get(7)?;
    let options: String = r.get(8)?;
    let snapshot: String = r.get(9)?;
    let args: Vec<String> = serde_json::from_str(&args)?;
    let snapshot = mask_json(&serde_json::from_str(&snapshot)?);
    let owner = match (
        r.get::<Option<String>>(15)?,
        r.get::<Option<String>>(16)?,
        r.get::<Option<i64>>(17)?,
    ) {
        (Some(host), Some(boot_id), Some(pid)) => Some(Owner {
            host,
            boot_id,
            pid,
            pid_start: r.get(18)?,
        }),
        _ => None,
    };
    let started_at: String = r.get(2)?;
    let mut status: String = r.get(4)?;
    if status == RunStatus::Running.as_str() {
        let gone = owner::Here::current().is_some_and(|here| {
            owner::judge(
                owner.as_ref(),
                snapshot["hostname"].as_str(),
                time::parse_utc(&started_at),
                here,
                owner::start_of,
            ) == owner::Liveness::Gone
        });
        if gone {
            status = "killed".into();
        }
    }
    Ok(RunRow {
        id: r.get(0)?,
        label: r.get(1)?,
        started_at,
        ended_at: r.get(3)?,
        status,
        kscale_version: r.get(5)?,
        git_rev: r.get::<Option<String>>(6)?.unwrap_or_default(),
        args: mask_args(&args),
        options: mask_json(&serde_json::from_str(&options)?),
        snapshot,
        cases_total: r.get(10)?,
        cases_done: r.get(11)?,
        cases_failed: r.get(12)?,
        not_converged: r.get(13)?,
        cases_skipped: r.get(14)?,
        owner,
    })
}

#[cfg(test)]
mod tests;
