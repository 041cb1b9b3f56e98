//! Run identity and import (docs/fleet.md): every run has a UUID, and a run
//! exported from one store (`kscale export --format json`) can be merged
//! into another with everything a report needs — its snapshot, options,
//! every trial with its accounting, histograms and role CPU times, and its
//! profiles.
//!
//! Import is built from the public writing methods a run uses, so the
//! imported rows are exactly what a local run would have written; the few
//! statements below only restore what those methods stamp with "now" (times,
//! status) and the run's own UUID. They use `$n` placeholders, numbered in
//! order of first appearance (SQLite binds them in that order), and portable
//! SQL so every backend can run them.

use crate::{CaseData, NewRun, RunData, Store, StoreError, SCHEMA_VERSION};
use serde::Deserialize;
use serde_json::{json, Value};

/// A random (version 4) UUID from the kernel's generator. Read from
/// `/dev/urandom` rather than through a crate: 16 bytes is all it takes, and
/// a run must get one even where `getrandom(2)` is filtered.
pub fn new_uuid() -> String {
    use std::io::Read;
    let mut b = [0u8; 16];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b));
    if read.is_err() {
        // No /dev/urandom (an unusual chroot): time and pid still make a
        // clash between two runs practically impossible on one store.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        b[..12].copy_from_slice(&t.to_le_bytes()[..12]);
        b[12..].copy_from_slice(&std::process::id().to_le_bytes());
    }
    format_uuid(b)
}

fn format_uuid(mut b: [u8; 16]) -> String {
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Is `s` written like a UUID (8-4-4-4-12 hex digits)?
pub fn is_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 5
        && parts
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(p, n)| p.len() == n && p.bytes().all(|c| c.is_ascii_hexdigit()))
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{0}")]
    NotExport(String),
    #[error("written by a newer kscale (store schema {found}; this kscale knows up to {known}): upgrade kscale")]
    TooNew { found: i64, known: i64 },
    #[error(
        "run {uuid} is already stored as run {id} with different contents; refusing to replace it"
    )]
    Clash { uuid: String, id: i64 },
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The caller's rendering of a stored run failed.
    #[error("{0}")]
    Render(String),
}

impl From<rusqlite::Error> for ImportError {
    fn from(e: rusqlite::Error) -> Self {
        ImportError::Store(e.into())
    }
}

impl From<serde_json::Error> for ImportError {
    fn from(e: serde_json::Error) -> Self {
        ImportError::Store(e.into())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImportOutcome {
    /// Stored as this new run id.
    Imported(i64),
    /// The same run was already stored under this id; nothing changed.
    AlreadyThere(i64),
}

/// The part of an export that carries the raw data: a case without its
/// store-local id.
pub fn raw_cases(data: &RunData) -> Result<Value, serde_json::Error> {
    let mut out = Vec::new();
    for c in &data.cases {
        let mut v = serde_json::to_value(c)?;
        if let Some(o) = v.as_object_mut() {
            o.remove("id");
        }
        out.push(v);
    }
    Ok(Value::Array(out))
}

/// The `run` fields of an export that describe the run (not the store it
/// happens to be in: its local id is left to the caller).
#[derive(Deserialize)]
struct ExportedRun {
    label: String,
    started_at: String,
    ended_at: Option<String>,
    status: String,
    kscale_version: String,
    #[serde(default)]
    git_rev: String,
    args: Vec<String>,
    options: Value,
}

/// What must be equal for two exports to be the same run: the run's
/// description, snapshot and raw cases. Not the store-local run id, not the
/// label (an import may change it: `kscale fleet` labels runs by host), and
/// not what is derived (`results`, `schema`), which another kscale version
/// may render differently from the same data.
/// Secrets count as masked ([`crate::secret`]): the store masks what it
/// records and reads, so a file exported before masking existed is the same
/// run as its masked copy.
fn identity(export: &Value) -> Value {
    let mut run = export.get("run").cloned().unwrap_or(Value::Null);
    if let Some(r) = run.as_object_mut() {
        r.remove("id");
        r.remove("label");
        if let Some(args) = r.get("args").and_then(Value::as_array) {
            let args: Vec<&str> = args.iter().filter_map(Value::as_str).collect();
            r.insert("args".into(), json!(crate::mask_args(args)));
        }
        if let Some(o) = r.get("options") {
            r.insert("options".into(), crate::mask_json(o));
        }
    }
    json!({
        "run": run,
        "system": export.get("system").map(crate::mask_json),
        "cases": export.get("cases"),
    })
}

/// Checks the outer shape of an export and returns its run's UUID.
pub fn check_export(v: &Value) -> Result<String, ImportError> {
    let not = |why: &str| ImportError::NotExport(format!("not a kscale export ({why})"));
    let obj = v.as_object().ok_or_else(|| not("not a JSON object"))?;
    let run = obj
        .get("run")
        .and_then(Value::as_object)
        .ok_or_else(|| not("no `run` object"))?;
    if !obj.contains_key("system") || !obj.contains_key("results") {
        return Err(not("no `system` or `results`"));
    }
    let schema = obj.get("schema").and_then(Value::as_i64).ok_or_else(|| {
        not("no `schema`: exported by a kscale without import support; export it again")
    })?;
    if schema > SCHEMA_VERSION {
        return Err(ImportError::TooNew {
            found: schema,
            known: SCHEMA_VERSION,
        });
    }
    if !obj.get("cases").is_some_and(Value::is_array) {
        return Err(not("no `cases` array"));
    }
    let uuid = run
        .get("uuid")
        .and_then(Value::as_str)
        .filter(|u| is_uuid(u))
        .ok_or_else(|| not("`run.uuid` missing or not a UUID"))?;
    Ok(uuid.to_ascii_lowercase())
}

impl Store {
    /// The run's UUID; a run stored before UUIDs existed gets one now.
    pub fn run_uuid(&self, run_id: i64) -> crate::Result<String> {
        let get = || -> crate::Result<Option<String>> {
            self.db
                .query_opt("SELECT uuid FROM runs WHERE id = $1", &[&run_id], |r| {
                    r.get::<Option<String>>(0)
                })?
                .ok_or_else(|| StoreError::NoSuchRun(run_id.to_string()))
        };
        if let Some(u) = get()? {
            return Ok(u);
        }
        // `uuid IS NULL` makes a concurrent first reader's UUID win.
        self.db.execute(
            "UPDATE runs SET uuid = $1 WHERE id = $2 AND uuid IS NULL",
            &[&new_uuid(), &run_id],
        )?;
        get()?.ok_or_else(|| StoreError::NoSuchRun(run_id.to_string()))
    }

    /// The run with this UUID, if stored.
    pub fn run_by_uuid(&self, uuid: &str) -> crate::Result<Option<i64>> {
        self.db.query_opt(
            "SELECT id FROM runs WHERE uuid = $1",
            &[&uuid.to_ascii_lowercase()],
            |r| r.get::<i64>(0),
        )
    }

    /// Merges one exported run (the JSON `kscale export` writes, built by
    /// `export` from this store's own data). A run already stored with the
    /// same UUID and the same contents is left alone; one with the same
    /// UUID and other contents is refused; the label does not count, as
    /// `label` may replace it (`kscale fleet` labels runs by host). `export`
    /// renders a stored run the way the file was rendered, so "the same
    /// contents" is decided on exactly what an export shows.
    pub fn import_run(
        &self,
        file: &Value,
        label: Option<&str>,
        export: &dyn Fn(&Store, i64) -> Result<Value, ImportError>,
    ) -> Result<ImportOutcome, ImportError> {
        let uuid = check_export(file)?;
        let bad = |what: &str, e: serde_json::Error| {
            ImportError::NotExport(format!("not a kscale export (bad `{what}`: {e})"))
        };
        let mut run: ExportedRun =
            serde_json::from_value(file["run"].clone()).map_err(|e| bad("run", e))?;
        if let Some(l) = label {
            run.label = l.to_string();
        }
        let mut cases: Vec<CaseData> = Vec::new();
        for (i, c) in file["cases"].as_array().into_iter().flatten().enumerate() {
            let mut c = c.clone();
            if let Some(o) = c.as_object_mut() {
                o.insert("id".into(), json!(0));
            }
            cases.push(serde_json::from_value(c).map_err(|e| bad(&format!("cases[{i}]"), e))?);
        }
        let same = |id: i64| -> Result<bool, ImportError> {
            Ok(identity(&export(self, id)?) == identity(file))
        };
        if let Some(id) = self.run_by_uuid(&uuid)? {
            return if same(id)? {
                Ok(ImportOutcome::AlreadyThere(id))
            } else {
                Err(ImportError::Clash { uuid, id })
            };
        }
        let id = self.create_run(&NewRun {
            label: run.label.clone(),
            kscale_version: run.kscale_version.clone(),
            git_rev: run.git_rev.clone(),
            args: run.args.clone(),
            options: run.options.clone(),
            snapshot: file["system"].clone(),
        })?;
        match self.fill_imported(id, &uuid, &run, &cases) {
            Ok(()) => Ok(ImportOutcome::Imported(id)),
            Err(e) => {
                // A half-imported run must not look like a result. Cases,
                // trials and profiles go with it (ON DELETE CASCADE).
                let _ = self.db.execute("DELETE FROM runs WHERE id = $1", &[&id]);
                match e {
                    // Another importer stored the same UUID meanwhile.
                    ImportError::Store(ref s) if s.is_constraint_violation() => {
                        match self.run_by_uuid(&uuid)? {
                            Some(other) if same(other)? => Ok(ImportOutcome::AlreadyThere(other)),
                            Some(other) => Err(ImportError::Clash { uuid, id: other }),
                            None => Err(e),
                        }
                    }
                    e => Err(e),
                }
            }
        }
    }

    fn fill_imported(
        &self,
        id: i64,
        uuid: &str,
        run: &ExportedRun,
        cases: &[CaseData],
    ) -> Result<(), ImportError> {
        for c in cases {
            let case_id = self.ensure_case(id, c.seq, &c.key, &c.cpus, &c.metrics, c.rule)?;
            for t in &c.trials {
                self.add_trial(case_id, &t.as_new(t.idx))?;
                self.db.execute(
                    "UPDATE trials SET started_at = $1 WHERE case_id = $2 AND idx = $3",
                    &[&t.started_at, &case_id, &t.idx],
                )?;
            }
            self.finish_case(
                case_id,
                c.status,
                c.converged,
                c.error.as_deref(),
                c.iterations,
                &c.notes,
            )?;
            for p in &c.profiles {
                self.add_profile(case_id, p)?;
            }
        }
        // Last, so the run only becomes findable by its UUID when complete.
        self.db.execute(
            // The importer is not the run's owner: the run's own host alone
            // could judge whether it still runs.
            "UPDATE runs SET uuid = $1, started_at = $2, ended_at = $3, status = $4,
                host = NULL, boot_id = NULL, pid = NULL, pid_start = NULL WHERE id = $5",
            &[&uuid, &run.started_at, &run.ended_at, &run.status, &id],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NewTrial;

    #[test]
    fn uuids_are_version_4_and_differ() {
        let a = new_uuid();
        let b = new_uuid();
        assert!(is_uuid(&a), "{a}");
        assert_ne!(a, b);
        assert_eq!(&a[14..15], "4");
        assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"), "{a}");
        assert_eq!(format_uuid([0; 16]), "00000000-0000-4000-8000-000000000000");
    }

    #[test]
    fn uuid_shape() {
        assert!(is_uuid("0a1b2c3d-0000-4000-8000-00000000abcd"));
        assert!(!is_uuid("0a1b2c3d-0000-4000-8000-00000000abc"));
        assert!(!is_uuid("0a1b2c3d00004000800000000000abcd"));
        assert!(!is_uuid("0a1b2c3d-0000-4000-8000-00000000abcg"));
    }

    #[test]
    fn old_runs_get_a_uuid_once() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("k.db")).unwrap();
        let run = NewRun {
            label: "a".into(),
            kscale_version: "0".into(),
            git_rev: String::new(),
            args: vec![],
            options: json!({}),
            snapshot: json!({}),
        };
        let id = s.create_run(&run).unwrap();
        let u = s.run_uuid(id).unwrap();
        assert_eq!(s.run_by_uuid(&u).unwrap(), Some(id));
        // A run from before the migration has none until asked.
        s.db.execute("UPDATE runs SET uuid = NULL WHERE id = $1", &[&id])
            .unwrap();
        let v = s.run_uuid(id).unwrap();
        assert!(is_uuid(&v));
        assert_ne!(u, v);
        assert_eq!(s.run_uuid(id).unwrap(), v);
        assert!(matches!(s.run_uuid(99), Err(StoreError::NoSuchRun(_))));
    }

    /// What `kscale export` writes, minus the computed `results`.
    fn render(s: &Store, id: i64) -> Result<Value, ImportError> {
        let d = s.load_run(id)?;
        let r = &d.run;
        Ok(json!({
            "schema": SCHEMA_VERSION,
            "system": r.snapshot,
            "results": [],
            "run": {
                "id": r.id, "uuid": s.run_uuid(id)?, "label": r.label,
                "started_at": r.started_at, "ended_at": r.ended_at, "status": r.status,
                "kscale_version": r.kscale_version, "git_rev": r.git_rev,
                "args": r.args, "options": r.options,
            },
            "cases": raw_cases(&d)?,
        }))
    }

    /// Everything a macro run stores survives the trip: percentile metric
    /// sources, median-of-N rules, histograms, role CPU times, accounting,
    /// profiles, a failed case's error and notes, times and status.
    #[test]
    fn rich_run_round_trips() {
        use crate::{CaseStatus, MetricRow, QuantileOf};
        use kscale_core::model::CpuAccounting;
        use kscale_core::profile::Profile;
        use kscale_core::{CaseKey, Direction, RoleCpu, RunRule};
        let dir = tempfile::tempdir().unwrap();
        let a = Store::open(&dir.path().join("a.db")).unwrap();
        let id = a
            .create_run(&NewRun {
                label: "lab".into(),
                kscale_version: "0.1.0".into(),
                git_rev: "abc".into(),
                args: vec!["kscale".into(), "run".into()],
                options: json!({"quick": true, "x": [1.5, 1e-300]}),
                snapshot: json!({"hostname": "h", "kernel": {"release": "6.1"}}),
            })
            .unwrap();
        let metrics = vec![
            MetricRow {
                name: "rps".into(),
                unit: "req/s".into(),
                direction: Direction::Higher,
                primary: true,
                quantile: None,
            },
            MetricRow {
                name: "p99".into(),
                unit: "ms".into(),
                direction: Direction::Lower,
                primary: false,
                quantile: Some(QuantileOf {
                    hist: "lat".into(),
                    q: 0.99,
                    per_ns: 1e-6,
                }),
            },
        ];
        let key = |cpus: &str| CaseKey {
            workload: "web.static".into(),
            params: [("conns".to_string(), "8".to_string())].into(),
            cpus: cpus.into(),
        };
        let c1 = a
            .ensure_case(id, 0, &key("1"), &[0], &metrics, RunRule::MedianOf(3))
            .unwrap();
        let hists = [(
            "lat".to_string(),
            "HISTFAAAABx4nJNpmSzMwMDAxAABzFAaxGe0X8D4HwA1BwPh".to_string(),
        )]
        .into();
        let roles = vec![RoleCpu {
            role: "load".into(),
            host: "local".into(),
            cpu_s: 0.7,
            window_s: 1.0,
            cpus: 1,
        }];
        for idx in 0..4 {
            let values = [
                ("rps".to_string(), 1000.0 / 3.0 + idx as f64),
                ("p99".to_string(), 0.1),
            ]
            .into();
            let acct = CpuAccounting {
                user_pct: 100.0 / 3.0,
                ctxt: 12345,
                seconds: 0.1 + 0.2,
                ..Default::default()
            };
            a.add_trial(
                c1,
                &NewTrial {
                    idx,
                    warmup: idx == 0,
                    wall_s: 1.0 / 7.0,
                    iterations: Some(99),
                    values: &values,
                    accounting: Some(&acct),
                    histograms: &hists,
                    roles: &roles,
                },
            )
            .unwrap();
        }
        a.finish_case(
            c1,
            CaseStatus::Done,
            None,
            None,
            Some(99),
            &["a note".into()],
        )
        .unwrap();
        a.add_profile(
            c1,
            &Profile {
                event: "cpu-clock".into(),
                sample_on: "997 Hz".into(),
                total: 10,
                kernel: 6,
                user: 3,
                idle: 1,
                by_symbol: vec![("do_syscall_64".into(), 4)],
                by_comm: vec![("kscale-load".into(), 3)],
                ops: Some(5),
                value: Some(0.25),
                wall_s: Some(1.0),
                ..Default::default()
            },
        )
        .unwrap();
        let c2 = a
            .ensure_case(id, 1, &key("all"), &[0, 1], &metrics, RunRule::MedianOf(3))
            .unwrap();
        a.finish_case(c2, CaseStatus::Failed, None, Some("server died"), None, &[])
            .unwrap();
        a.set_run_status(id, crate::RunStatus::Complete).unwrap();

        let file = render(&a, id).unwrap();
        let b = Store::open(&dir.path().join("b.db")).unwrap();
        let got = b.import_run(&file, None, &render).unwrap();
        assert_eq!(got, ImportOutcome::Imported(1));
        assert_eq!(render(&b, 1).unwrap(), file);
        // Through text, as a file travels.
        let text: Value = serde_json::from_str(&serde_json::to_string(&file).unwrap()).unwrap();
        assert_eq!(
            b.import_run(&text, Some("other"), &render).unwrap(),
            ImportOutcome::AlreadyThere(1)
        );
        let mut changed = text.clone();
        changed["cases"][0]["profiles"][0]["total"] = json!(11);
        assert!(matches!(
            b.import_run(&changed, None, &render),
            Err(ImportError::Clash { id: 1, .. })
        ));
        assert_eq!(b.runs().unwrap().len(), 1);
    }

    #[test]
    fn foreign_files_are_named() {
        let e = check_export(&json!([1])).unwrap_err();
        assert!(e.to_string().contains("not a kscale export"), "{e}");
        let e = check_export(&json!({"run": {}, "system": {}, "results": []})).unwrap_err();
        assert!(e.to_string().contains("schema"), "{e}");
        let e = check_export(
            &json!({"run": {}, "system": {}, "results": [], "schema": SCHEMA_VERSION + 1}),
        )
        .unwrap_err();
        assert!(matches!(e, ImportError::TooNew { .. }), "{e}");
    }
}
