//! The settings journal and tuning studies (docs/tune.md). Every setting
//! kscale changes is written here with its old value, and committed, before
//! it is changed; restoring marks it restored. Whatever is unrestored after
//! a crash or SIGKILL is what `kscale tune --restore` replays, newest first.
//!
//! A tuning study (`tunes`) is measured as one run per step (`tune_steps`),
//! so `compare` and `report` work on its steps as on any runs.

use crate::{now_rfc3339, Result, Store};
use serde::{Deserialize, Serialize};

/// One journalled change.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JournalEntry {
    pub id: i64,
    /// The tuning study that made it, if any (hotplug in a plain run has none).
    pub tune_id: Option<i64>,
    /// The kscale process that made it.
    pub pid: i64,
    /// `sysctl`, `thp`, `mount`, … (kscale_sys::settings).
    pub kind: String,
    /// What was changed: a file's path, a filesystem's description.
    pub target: String,
    pub old_value: String,
    pub new_value: String,
    pub applied_at: String,
    pub restored_at: Option<String>,
    pub note: Option<String>,
}

/// A step of a stored tuning study.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuneStep {
    pub seq: i64,
    pub name: String,
    pub rationale: String,
    pub run_id: Option<i64>,
    /// Why the step was not measured (a setting that could not be changed).
    pub error: Option<String>,
    /// How its trials were taken against the state before it:
    /// `interleaved …` (with the order's seed) or `sequential: why`
    /// (docs/tune.md); `None` for studies stored before kscale recorded it.
    #[serde(default)]
    pub measured: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuneRow {
    pub id: i64,
    pub label: String,
    pub plan_file: String,
    pub plan: String,
    pub status: String,
}

impl Store {
    /// Records a change about to be made; returns its id. The row is
    /// committed when this returns (autocommit), before the caller changes
    /// anything.
    pub fn journal_add(
        &self,
        tune_id: Option<i64>,
        kind: &str,
        target: &str,
        old_value: &str,
        new_value: &str,
    ) -> Result<i64> {
        self.db.insert_returning_id(
            "INSERT INTO journal (tune_id, pid, kind, target, old_value, new_value, applied_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
            &[
                &tune_id,
                &i64::from(std::process::id()),
                &kind,
                &target,
                &old_value,
                &new_value,
                &now_rfc3339(),
            ],
        )
    }

    /// Marks an entry restored (or, with a note, never applied).
    pub fn journal_restored(&self, id: i64, note: Option<&str>) -> Result<()> {
        self.db.execute(
            "UPDATE journal SET restored_at = $1, note = $2 WHERE id = $3",
            &[&now_rfc3339(), &note, &id],
        )?;
        Ok(())
    }

    /// Records why a restore failed, leaving the entry unrestored.
    pub fn journal_note(&self, id: i64, note: &str) -> Result<()> {
        self.db
            .execute("UPDATE journal SET note = $1 WHERE id = $2", &[&note, &id])?;
        Ok(())
    }

    /// Unrestored entries, newest first (the order they are restored in);
    /// only those of process `pid` when given.
    pub fn journal_unrestored(&self, pid: Option<i64>) -> Result<Vec<JournalEntry>> {
        let mut sql = String::from(
            "SELECT id, tune_id, pid, kind, target, old_value, new_value, applied_at, \
             restored_at, note FROM journal WHERE restored_at IS NULL",
        );
        let params: &[&dyn crate::db::ToValue] = match &pid {
            Some(p) => {
                sql.push_str(" AND pid = $1");
                &[p]
            }
            None => &[],
        };
        sql.push_str(" ORDER BY id DESC");
        self.db.query_rows(&sql, params, |r| {
            Ok(JournalEntry {
                id: r.get(0)?,
                tune_id: r.get(1)?,
                pid: r.get(2)?,
                kind: r.get(3)?,
                target: r.get(4)?,
                old_value: r.get(5)?,
                new_value: r.get(6)?,
                applied_at: r.get(7)?,
                restored_at: r.get(8)?,
                note: r.get(9)?,
            })
        })
    }

    pub fn create_tune(&self, label: &str, plan_file: &str, plan: &str) -> Result<i64> {
        self.db.insert_returning_id(
            "INSERT INTO tunes (label, plan_file, plan, started_at, status)
             VALUES ($1, $2, $3, $4, 'running') RETURNING id",
            &[
                &label,
                &crate::mask_text(plan_file),
                &crate::mask_text(plan),
                &now_rfc3339(),
            ],
        )
    }

    pub fn set_tune_status(&self, tune_id: i64, status: crate::RunStatus) -> Result<()> {
        self.db.execute(
            "UPDATE tunes SET status = $1, ended_at = $2 WHERE id = $3",
            &[&status.as_str(), &now_rfc3339(), &tune_id],
        )?;
        Ok(())
    }

    pub fn add_tune_step(&self, tune_id: i64, step: &TuneStep) -> Result<()> {
        self.db.execute(
            "INSERT INTO tune_steps (tune_id, seq, name, rationale, run_id, error, measured)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[
                &tune_id,
                &step.seq,
                &step.name,
                &step.rationale,
                &step.run_id,
                &step.error,
                &step.measured,
            ],
        )?;
        Ok(())
    }

    pub fn tune(&self, tune_id: i64) -> Result<TuneRow> {
        self.db.query_one(
            "SELECT id, label, plan_file, plan, status FROM tunes WHERE id = $1",
            &[&tune_id],
            |r| {
                Ok(TuneRow {
                    id: r.get(0)?,
                    label: r.get(1)?,
                    plan_file: r.get(2)?,
                    plan: r.get(3)?,
                    status: r.get(4)?,
                })
            },
        )
    }

    pub fn tune_steps(&self, tune_id: i64) -> Result<Vec<TuneStep>> {
        self.db.query_rows(
            "SELECT seq, name, rationale, run_id, error, measured FROM tune_steps
             WHERE tune_id = $1 ORDER BY seq",
            &[&tune_id],
            |r| {
                Ok(TuneStep {
                    seq: r.get(0)?,
                    name: r.get(1)?,
                    rationale: r.get(2)?,
                    run_id: r.get(3)?,
                    error: r.get(4)?,
                    measured: r.get(5)?,
                })
            },
        )
    }

    /// The tuning study a run measured a step of, if any.
    pub fn tune_of_run(&self, run_id: i64) -> Result<Option<i64>> {
        self.db.query_opt(
            "SELECT tune_id FROM tune_steps WHERE run_id = $1",
            &[&run_id],
            |r| r.get::<i64>(0),
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::Store;

    #[test]
    fn entries_stay_unrestored_until_marked_and_come_back_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("k.db")).unwrap();
        assert!(s.journal_unrestored(None).unwrap().is_empty());
        let t = s.create_tune("l", "p.toml", "[target]").unwrap();
        let a = s
            .journal_add(Some(t), "sysctl", "/proc/sys/a", "1", "2")
            .unwrap();
        let b = s.journal_add(None, "hotplug", "/sys/x", "1", "0").unwrap();
        let un = s.journal_unrestored(None).unwrap();
        assert_eq!(un.iter().map(|e| e.id).collect::<Vec<_>>(), vec![b, a]);
        assert_eq!(un[1].old_value, "1");
        assert_eq!(un[1].tune_id, Some(t));
        let me = std::process::id() as i64;
        assert_eq!(s.journal_unrestored(Some(me)).unwrap().len(), 2);
        assert!(s.journal_unrestored(Some(me + 1)).unwrap().is_empty());
        s.journal_restored(b, None).unwrap();
        let un = s.journal_unrestored(None).unwrap();
        assert_eq!(un.len(), 1);
        assert_eq!(un[0].id, a);
        // A reopened store sees the same journal: it is on disk.
        drop(s);
        let s = Store::open(&dir.path().join("k.db")).unwrap();
        assert_eq!(s.journal_unrestored(None).unwrap().len(), 1);
    }

    #[test]
    fn tunes_keep_their_steps_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("k.db")).unwrap();
        let t = s.create_tune("l", "p.toml", "x").unwrap();
        for (seq, name) in [(1, "b"), (0, "a")] {
            s.add_tune_step(
                t,
                &super::TuneStep {
                    seq,
                    name: name.into(),
                    rationale: "why".into(),
                    run_id: None,
                    error: None,
                    measured: (seq == 1).then(|| "interleaved (seed 0x2a)".into()),
                },
            )
            .unwrap();
        }
        let steps = s.tune_steps(t).unwrap();
        assert_eq!(steps[0].name, "a");
        assert_eq!(steps[1].name, "b");
        assert_eq!(steps[0].measured, None);
        assert_eq!(
            steps[1].measured.as_deref(),
            Some("interleaved (seed 0x2a)")
        );
        s.set_tune_status(t, crate::RunStatus::Complete).unwrap();
        assert_eq!(s.tune(t).unwrap().status, "complete");
        assert_eq!(s.tune_of_run(99).unwrap(), None);
    }
}
