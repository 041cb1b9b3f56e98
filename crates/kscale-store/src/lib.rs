//! kscale's result store (docs/store.md): one SQLite file in write-ahead-log mode.
//! Raw trial values are the source of truth; every statistic is recomputed
//! from them, so a figure can always be re-derived and a killed run resumed.

mod journal;
mod schema;
mod time;

use kscale_core::model::CpuAccounting;
use kscale_core::profile::Profile;
use kscale_core::{CaseKey, Direction, RoleCpu, RunRule, Summary, TrialValues};
use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use thiserror::Error;

pub use journal::{JournalEntry, TuneRow, TuneStep};
pub use schema::SCHEMA_VERSION;
pub use time::now_rfc3339;

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
    #[error("no run `{0}` in the database (give a run id, a label, or `latest`; `kscale results` lists them)")]
    NoSuchRun(String),
    #[error("database error: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("corrupt JSON in the database: {0}")]
    Json(#[from] serde_json::Error),
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

pub struct Store {
    conn: Connection,
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
    pub not_converged: i64,
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CaseStatus {
    Pending,
    Done,
    Failed,
}

impl CaseStatus {
    fn as_str(self) -> &'static str {
        match self {
            CaseStatus::Pending => "pending",
            CaseStatus::Done => "done",
            CaseStatus::Failed => "failed",
        }
    }
    fn parse(s: &str) -> CaseStatus {
        match s {
            "done" => CaseStatus::Done,
            "failed" => CaseStatus::Failed,
            _ => CaseStatus::Pending,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CaseData {
    pub id: i64,
    pub seq: i64,
    pub key: CaseKey,
    pub cpus: Vec<usize>,
    pub status: CaseStatus,
    /// Whether the CI converged; `None` for cases not run to convergence
    /// (failed ones, and median-of-N cases).
    pub converged: Option<bool>,
    /// The run rule the case was measured under.
    #[serde(default = "converge")]
    pub rule: RunRule,
    pub error: Option<String>,
    pub iterations: Option<u64>,
    pub notes: Vec<String>,
    pub metrics: Vec<MetricRow>,
    pub trials: Vec<TrialRow>,
    /// Profiles of the case's profiled trial (`--profile`), one per event.
    #[serde(default)]
    pub profiles: Vec<Profile>,
}

fn converge() -> RunRule {
    RunRule::Converge
}

impl CaseData {
    pub fn metric(&self, name: &str) -> Option<&MetricRow> {
        self.metrics.iter().find(|m| m.name == name)
    }
    /// Did the case finish by its run rule: converged, or (median of N)
    /// measured its N trials? Tables mark the others.
    pub fn settled(&self) -> bool {
        match self.rule {
            RunRule::Converge => self.converged == Some(true),
            RunRule::MedianOf(n) => self.status == CaseStatus::Done && self.values_len() >= n,
        }
    }

    fn values_len(&self) -> usize {
        self.trials.iter().filter(|t| !t.warmup).count()
    }

    /// The metric a view asked for (`--metric NAME`), else the primary one.
    pub fn metric_or_primary(&self, name: Option<&str>) -> Option<&MetricRow> {
        match name {
            Some(n) => self.metric(n),
            None => self.primary(),
        }
    }

    pub fn primary(&self) -> Option<&MetricRow> {
        self.metrics
            .iter()
            .find(|m| m.primary)
            .or(self.metrics.first())
    }
    /// The counted (non-warm-up) values of one metric, in trial order.
    pub fn values(&self, metric: &str) -> Vec<f64> {
        self.trials
            .iter()
            .filter(|t| !t.warmup)
            .filter_map(|t| t.values.get(metric).copied())
            .collect()
    }
    /// The result of one metric, by the case's run rule: the mean and its
    /// Student-t interval; under a median-of-N rule the median, its interval
    /// the range of the trials; for a percentile metric the quantile of the
    /// merged histogram of the counted trials (a mean of p99s is not a p99),
    /// its interval the trials' interval moved to that centre.
    pub fn summary(&self, metric: &str, confidence_pct: f64) -> Summary {
        let values = self.values(metric);
        let mut s = match self.rule {
            RunRule::Converge => Summary::of(&values, confidence_pct),
            RunRule::MedianOf(_) => Summary::median_of(&values),
        };
        if let Some(q) = self.metric(metric).and_then(|m| m.quantile.as_ref()) {
            if let Some(v) = self.merged_quantile(q) {
                let shift = v - s.mean;
                s.ci_low += shift;
                s.ci_high += shift;
                s.mean = v;
            }
        }
        s
    }

    /// The merged histogram of the counted trials.
    pub fn merged_histogram(&self, name: &str) -> Option<hdrhistogram::Histogram<u64>> {
        kscale_core::hist::merge_encoded(
            self.trials
                .iter()
                .filter(|t| !t.warmup)
                .filter_map(|t| t.histograms.get(name).map(String::as_str)),
        )
        .ok()
        .flatten()
    }

    fn merged_quantile(&self, q: &QuantileOf) -> Option<f64> {
        let h = self.merged_histogram(&q.hist)?;
        kscale_core::hist::quantile_ns(&h, q.q).map(|ns| ns * q.per_ns)
    }

    /// Was the load generator the bottleneck ([`kscale_core::load_bound`])?
    pub fn load_bound(&self) -> bool {
        kscale_core::load_bound(
            self.trials
                .iter()
                .filter(|t| !t.warmup)
                .map(|t| t.roles.as_slice()),
        )
    }
    /// Mean CPU accounting over the counted trials that recorded it, with
    /// context switches and interrupts per second.
    pub fn accounting(&self) -> Option<CpuAccounting> {
        let a: Vec<&CpuAccounting> = self
            .trials
            .iter()
            .filter(|t| !t.warmup)
            .filter_map(|t| t.accounting.as_ref())
            .collect();
        if a.is_empty() {
            return None;
        }
        let n = a.len() as f64;
        let mean = |f: fn(&CpuAccounting) -> f64| a.iter().map(|x| f(x)).sum::<f64>() / n;
        let secs: f64 = a.iter().map(|x| x.seconds).sum();
        Some(CpuAccounting {
            user_pct: mean(|x| x.user_pct),
            system_pct: mean(|x| x.system_pct),
            idle_pct: mean(|x| x.idle_pct),
            irq_pct: mean(|x| x.irq_pct),
            softirq_pct: mean(|x| x.softirq_pct),
            steal_pct: mean(|x| x.steal_pct),
            ctxt: a.iter().map(|x| x.ctxt).sum(),
            intr: a.iter().map(|x| x.intr).sum(),
            seconds: secs,
        })
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunData {
    pub run: RunRow,
    pub cases: Vec<CaseData>,
}

impl Store {
    /// Opens (creating if needed) and migrates a database. Refuses files that
    /// are not kscale databases or that a newer kscale wrote.
    pub fn open(path: &Path) -> Result<Store> {
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() {
                let _ = std::fs::create_dir_all(dir);
            }
        }
        let conn = Connection::open(path).map_err(|e| StoreError::Open {
            path: path.into(),
            source: e,
        })?;
        let mut store = Store {
            conn,
            path: path.to_path_buf(),
        };
        store.prepare()?;
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn prepare(&mut self) -> Result<()> {
        let foreign = |why: String| StoreError::Foreign {
            path: self.path.clone(),
            why,
        };
        // Any read fails on a file that is not SQLite at all.
        let app_id: i64 = self
            .conn
            .query_row("PRAGMA application_id", [], |r| r.get(0))
            .map_err(|e| foreign(e.to_string()))?;
        let version: i64 = self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))?;
        let tables: i64 = self.conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type='table'",
            [],
            |r| r.get(0),
        )?;
        if app_id != schema::APPLICATION_ID && (app_id != 0 || tables > 0) {
            return Err(foreign(format!(
                "application id {app_id:#x}, {tables} tables"
            )));
        }
        if version > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path: self.path.clone(),
                found: version,
                known: SCHEMA_VERSION,
            });
        }
        self.conn.busy_timeout(std::time::Duration::from_secs(10))?;
        self.conn.pragma_update(None, "journal_mode", "WAL")?;
        self.conn.pragma_update(None, "synchronous", "NORMAL")?;
        self.conn.pragma_update(None, "foreign_keys", "ON")?;
        schema::migrate(&mut self.conn, version)?;
        Ok(())
    }

    pub fn create_run(&self, r: &NewRun) -> Result<i64> {
        self.conn.execute(
            "INSERT INTO runs (label, started_at, status, kscale_version, git_rev, args, options, snapshot)
             VALUES (?1, ?2, 'running', ?3, ?4, ?5, ?6, ?7)",
            params![
                r.label,
                now_rfc3339(),
                r.kscale_version,
                r.git_rev,
                serde_json::to_string(&r.args)?,
                serde_json::to_string(&r.options)?,
                serde_json::to_string(&r.snapshot)?
            ],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    /// `running`, `complete`, `interrupted` or `failed`. Setting a final
    /// status stamps the end time.
    pub fn set_run_status(&self, run_id: i64, status: &str) -> Result<()> {
        let ended = if status == "running" {
            None
        } else {
            Some(now_rfc3339())
        };
        self.conn.execute(
            "UPDATE runs SET status = ?2, ended_at = ?3 WHERE id = ?1",
            params![run_id, status, ended],
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
        if let Some(id) = self
            .conn
            .query_row(
                "SELECT id FROM cases WHERE run_id = ?1 AND workload = ?2 AND params = ?3 AND cpus_name = ?4",
                params![run_id, key.workload, params_json, key.cpus],
                |r| r.get::<_, i64>(0),
            )
            .optional()?
        {
            return Ok(id);
        }
        let tx = self.conn.unchecked_transaction()?;
        tx.execute(
            "INSERT INTO cases (run_id, seq, workload, params, cpus_name, cpus, status, estimator, rule_n)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', ?7, ?8)",
            params![
                run_id,
                seq,
                key.workload,
                params_json,
                key.cpus,
                serde_json::to_string(cpus)?,
                rule.estimator(),
                match rule {
                    RunRule::MedianOf(n) => Some(n as i64),
                    RunRule::Converge => None,
                }
            ],
        )?;
        let id = tx.last_insert_rowid();
        for m in metrics {
            tx.execute(
                "INSERT INTO metrics (case_id, name, unit, direction, is_primary, hist, quantile, per_ns)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    id,
                    m.name,
                    m.unit,
                    m.direction.as_str(),
                    m.primary,
                    m.quantile.as_ref().map(|q| q.hist.as_str()),
                    m.quantile.as_ref().map(|q| q.q),
                    m.quantile.as_ref().map(|q| q.per_ns)
                ],
            )?;
        }
        tx.commit()?;
        Ok(id)
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
        self.conn.execute(
            "INSERT OR REPLACE INTO trials (case_id, idx, warmup, started_at, wall_s, iterations, vals, accounting, histograms, roles)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                case_id,
                t.idx,
                t.warmup,
                now_rfc3339(),
                t.wall_s,
                t.iterations.map(|i| i as i64),
                serde_json::to_string(t.values)?,
                accounting,
                histograms,
                roles
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
        self.conn.execute(
            "UPDATE cases SET status = ?2, converged = ?3, error = ?4, iterations = ?5, notes = ?6 WHERE id = ?1",
            params![
                case_id,
                status.as_str(),
                converged,
                error,
                iterations.map(|i| i as i64),
                serde_json::to_string(notes)?
            ],
        )?;
        Ok(())
    }

    pub fn runs(&self) -> Result<Vec<RunRow>> {
        let mut st = self.conn.prepare(&format!("{RUN_SELECT} ORDER BY r.id"))?;
        let rows = st.query_map([], run_from_row)?;
        let mut out = Vec::new();
        for r in rows {
            out.push(r??);
        }
        Ok(out)
    }

    /// A run id, a label (its latest run) or `latest`.
    pub fn resolve(&self, spec: &str) -> Result<i64> {
        let spec = spec.trim();
        let found: Option<i64> = if spec == "latest" {
            self.conn
                .query_row("SELECT max(id) FROM runs", [], |r| r.get(0))?
        } else if let Ok(id) = spec.parse::<i64>() {
            match self
                .conn
                .query_row("SELECT id FROM runs WHERE id = ?1", [id], |r| r.get(0))
                .optional()?
            {
                Some(id) => Some(id),
                None => self.conn.query_row(
                    "SELECT max(id) FROM runs WHERE label = ?1",
                    [spec],
                    |r| r.get(0),
                )?,
            }
        } else {
            self.conn
                .query_row("SELECT max(id) FROM runs WHERE label = ?1", [spec], |r| {
                    r.get(0)
                })?
        };
        found.ok_or_else(|| StoreError::NoSuchRun(spec.to_string()))
    }

    pub fn run(&self, run_id: i64) -> Result<RunRow> {
        self.conn
            .query_row(
                &format!("{RUN_SELECT} WHERE r.id = ?1"),
                [run_id],
                run_from_row,
            )
            .optional()?
            .ok_or_else(|| StoreError::NoSuchRun(run_id.to_string()))?
    }

    pub fn load_run(&self, run_id: i64) -> Result<RunData> {
        let run = self.run(run_id)?;
        let mut cases = Vec::new();
        {
            let mut st = self.conn.prepare(
                "SELECT id, seq, workload, params, cpus_name, cpus, status, converged, error, iterations, notes, estimator, rule_n
                 FROM cases WHERE run_id = ?1 ORDER BY seq, id",
            )?;
            let mut rows = st.query([run_id])?;
            while let Some(r) = rows.next()? {
                let params: String = r.get(3)?;
                let cpus: String = r.get(5)?;
                let status: String = r.get(6)?;
                let notes: Option<String> = r.get(10)?;
                let estimator: String = r.get(11)?;
                let rule_n: Option<i64> = r.get(12)?;
                let rule = match (estimator.as_str(), rule_n) {
                    ("median", Some(n)) => RunRule::MedianOf(n.max(1) as usize),
                    _ => RunRule::Converge,
                };
                cases.push(CaseData {
                    id: r.get(0)?,
                    seq: r.get(1)?,
                    key: CaseKey {
                        workload: r.get(2)?,
                        params: serde_json::from_str(&params)?,
                        cpus: r.get(4)?,
                    },
                    cpus: serde_json::from_str(&cpus)?,
                    status: CaseStatus::parse(&status),
                    converged: r.get(7)?,
                    rule,
                    error: r.get(8)?,
                    iterations: r.get::<_, Option<i64>>(9)?.map(|i| i as u64),
                    notes: notes
                        .map(|n| serde_json::from_str(&n))
                        .transpose()?
                        .unwrap_or_default(),
                    metrics: Vec::new(),
                    trials: Vec::new(),
                    profiles: Vec::new(),
                });
            }
        }
        let mut mst = self
            .conn
            .prepare("SELECT name, unit, direction, is_primary, hist, quantile, per_ns FROM metrics WHERE case_id = ?1 ORDER BY is_primary DESC, rowid")?;
        let mut tst = self.conn.prepare(
            "SELECT idx, warmup, started_at, wall_s, iterations, vals, accounting, histograms, roles FROM trials WHERE case_id = ?1 ORDER BY idx",
        )?;
        for c in &mut cases {
            let mut rows = mst.query([c.id])?;
            while let Some(r) = rows.next()? {
                let dir: String = r.get(2)?;
                let hist: Option<String> = r.get(4)?;
                let quantile = match (
                    hist,
                    r.get::<_, Option<f64>>(5)?,
                    r.get::<_, Option<f64>>(6)?,
                ) {
                    (Some(hist), Some(q), Some(per_ns)) => Some(QuantileOf { hist, q, per_ns }),
                    _ => None,
                };
                c.metrics.push(MetricRow {
                    name: r.get(0)?,
                    unit: r.get(1)?,
                    direction: Direction::parse(&dir).unwrap_or(Direction::Lower),
                    primary: r.get(3)?,
                    quantile,
                });
            }
            let mut rows = tst.query([c.id])?;
            while let Some(r) = rows.next()? {
                let vals: String = r.get(5)?;
                let accounting: Option<String> = r.get(6)?;
                let histograms: Option<String> = r.get(7)?;
                let roles: Option<String> = r.get(8)?;
                c.trials.push(TrialRow {
                    idx: r.get(0)?,
                    warmup: r.get(1)?,
                    started_at: r.get(2)?,
                    wall_s: r.get(3)?,
                    iterations: r.get::<_, Option<i64>>(4)?.map(|i| i as u64),
                    values: serde_json::from_str(&vals)?,
                    accounting: accounting.map(|a| serde_json::from_str(&a)).transpose()?,
                    histograms: histograms
                        .map(|h| serde_json::from_str(&h))
                        .transpose()?
                        .unwrap_or_default(),
                    roles: roles
                        .map(|r| serde_json::from_str(&r))
                        .transpose()?
                        .unwrap_or_default(),
                });
            }
        }
        for c in &mut cases {
            c.profiles = self.profiles(c.id)?;
        }
        Ok(RunData { run, cases })
    }

    /// Stores (or replaces) the profile of one event of a case's profiled
    /// trial.
    pub fn add_profile(&self, case_id: i64, p: &Profile) -> Result<()> {
        self.conn.execute(
            "INSERT OR REPLACE INTO profiles (case_id, event, sample_on, total, kernel, user, idle, spinlock, lost, symbols, comms, ops, value, wall_s)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            params![
                case_id,
                p.event,
                p.sample_on,
                p.total as i64,
                p.kernel as i64,
                p.user as i64,
                p.idle as i64,
                p.spinlock as i64,
                p.lost as i64,
                serde_json::to_string(&p.by_symbol)?,
                serde_json::to_string(&p.by_comm)?,
                p.ops.map(|o| o as i64),
                p.value,
                p.wall_s
            ],
        )?;
        Ok(())
    }

    /// The profiles of one case, CPU clock first.
    pub fn profiles(&self, case_id: i64) -> Result<Vec<Profile>> {
        let mut st = self.conn.prepare_cached(
            "SELECT event, sample_on, total, kernel, user, idle, spinlock, lost, symbols, comms, ops, value, wall_s
             FROM profiles WHERE case_id = ?1 ORDER BY event = 'cpu-clock' DESC, event",
        )?;
        let mut rows = st.query([case_id])?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            let symbols: String = r.get(8)?;
            let comms: String = r.get(9)?;
            let n = |i: usize| -> rusqlite::Result<u64> { Ok(r.get::<_, i64>(i)?.max(0) as u64) };
            out.push(Profile {
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
                ops: r.get::<_, Option<i64>>(10)?.map(|o| o.max(0) as u64),
                value: r.get(11)?,
                wall_s: r.get(12)?,
            });
        }
        Ok(out)
    }
}

const RUN_SELECT: &str = "SELECT r.id, r.label, r.started_at, r.ended_at, r.status, r.kscale_version, r.git_rev,
        r.args, r.options, r.snapshot,
        (SELECT count(*) FROM cases c WHERE c.run_id = r.id),
        (SELECT count(*) FROM cases c WHERE c.run_id = r.id AND c.status = 'done'),
        (SELECT count(*) FROM cases c WHERE c.run_id = r.id AND c.status = 'failed'),
        (SELECT count(*) FROM cases c WHERE c.run_id = r.id AND c.status = 'done' AND c.converged = 0)
    FROM runs r";

fn run_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Result<RunRow>> {
    let args: String = r.get(7)?;
    let options: String = r.get(8)?;
    let snapshot: String = r.get(9)?;
    let parse = || -> Result<RunRow> {
        Ok(RunRow {
            id: r.get(0)?,
            label: r.get(1)?,
            started_at: r.get(2)?,
            ended_at: r.get(3)?,
            status: r.get(4)?,
            kscale_version: r.get(5)?,
            git_rev: r.get::<_, Option<String>>(6)?.unwrap_or_default(),
            args: serde_json::from_str(&args)?,
            options: serde_json::from_str(&options)?,
            snapshot: serde_json::from_str(&snapshot)?,
            cases_total: r.get(10)?,
            cases_done: r.get(11)?,
            cases_failed: r.get(12)?,
            not_converged: r.get(13)?,
        })
    };
    Ok(parse())
}

#[cfg(test)]
mod tests;
