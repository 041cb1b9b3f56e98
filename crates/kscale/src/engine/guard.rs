//! The unrestored-settings guard: every setting kscale changes (a tuning
//! step's sysctl, a CPU taken offline by `--cpu-mode hotplug`) is written
//! to the store's journal, and committed, before it is changed; it is put
//! back however the run ends, and a run or a study starts only on a machine
//! kscale has put back as it was (docs/tune.md).

use crate::error::user;
use anyhow::Result;
use kscale_store::Store;
use kscale_sys::settings::{self, LoopFs};
use std::path::Path;

/// Journalled changes of this process: each written to the store, and
/// committed, before it is made.
pub struct Journal<'a> {
    pub store: &'a Store,
    pub tune_id: Option<i64>,
}

impl Journal<'_> {
    pub fn mark(&self) -> Result<i64> {
        Ok(self
            .store
            .journal_unrestored(Some(std::process::id() as i64))?
            .first()
            .map_or(0, |e| e.id))
    }

    fn record(&self, kind: &str, target: &str, old: &str, new: &str) -> Result<i64, String> {
        self.store
            .journal_add(self.tune_id, kind, target, old, new)
            .map_err(|e| format!("cannot journal the change, so it is not made: {e}"))
    }

    fn not_applied(&self, id: i64, why: &str) {
        let _ = self
            .store
            .journal_restored(id, Some(&format!("not applied: {why}")));
    }

    pub fn set_file(&self, kind: &str, path: &Path, value: &str) -> Result<(), String> {
        let old = settings::read_value(path)?;
        let target = if settings::is_net_path(path) {
            settings::in_netns(&path.display().to_string())
        } else {
            path.display().to_string()
        };
        let id = self.record(kind, &target, &old, value)?;
        if let Err(e) = settings::write_value(path, value) {
            self.not_applied(id, &e);
            return Err(e);
        }
        Ok(())
    }

    pub fn set_mtu(&self, dev: &str, mtu: u32) -> Result<(), String> {
        let old = settings::nic_mtu(dev, None)?;
        let id = self.record(
            "nic",
            &settings::in_netns(dev),
            &old.to_string(),
            &mtu.to_string(),
        )?;
        if let Err(e) = settings::nic_mtu(dev, Some(mtu)) {
            self.not_applied(id, &e);
            return Err(e);
        }
        Ok(())
    }

    pub fn create_fs(&self, fs: &LoopFs, size: u64, options: &str) -> Result<(), String> {
        let id = self.record(settings::MOUNT, &fs.encode(), "", options)?;
        if let Err(e) = fs.create(size, options) {
            let _ = fs.remove();
            self.not_applied(id, &e);
            return Err(e);
        }
        Ok(())
    }

    pub fn remount(&self, fs: &LoopFs, old: &str, new: &str) -> Result<(), String> {
        self.record(settings::MOUNT_OPTS, &fs.encode(), old, new)?;
        // A failed remount leaves the entry to restore the old options.
        fs.remount(new)
    }

    fn restore_entries(&self, keep: impl Fn(&kscale_store::JournalEntry) -> bool) -> Vec<String> {
        let entries = match self
            .store
            .journal_unrestored(Some(std::process::id() as i64))
        {
            Ok(e) => e,
            Err(e) => return vec![format!("cannot read the journal: {e}")],
        };
        restore_list(self.store, entries.into_iter().filter(|e| !keep(e)))
    }

    /// Restores everything this process changed, newest first.
    pub fn restore_all(&self) -> Vec<String> {
        self.restore_entries(|_| false)
    }

    pub fn restore_since(&self, mark: i64) -> Vec<String> {
        self.restore_entries(|e| e.id <= mark)
    }

    /// Restores every setting but the scratch filesystem itself.
    pub fn restore_keeping_fs(&self) {
        for e in self.restore_entries(|e| e.kind == settings::MOUNT) {
            eprintln!("kscale: could not restore: {e}");
        }
    }
}

pub fn restore_list(
    store: &Store,
    entries: impl Iterator<Item = kscale_store::JournalEntry>,
) -> Vec<String> {
    let mut errors = Vec::new();
    for e in entries {
        match settings::restore(&e.kind, &e.target, &e.old_value) {
            Ok(()) => {
                if let Err(err) = store.journal_restored(e.id, None) {
                    errors.push(format!("{} {}: {err}", e.kind, e.target));
                }
            }
            Err(err) => {
                let _ = store.journal_note(e.id, &err.to_string());
                errors.push(format!("{} {}: {err}", e.kind, e.target));
            }
        }
    }
    errors
}

/// `kscale run` and `kscale tune` start only on a machine kscale has put
/// back as it was.
pub fn refuse_if_unrestored(store: &Store) -> Result<()> {
    let entries = store.journal_unrestored(None)?;
    let Some(first) = entries.last() else {
        return Ok(());
    };
    let running = entries
        .iter()
        .find(|e| kscale_sys::process::alive(e.pid as i32) && e.pid != std::process::id() as i64);
    if let Some(e) = running {
        return Err(user(format!(
            "{} setting(s) are changed by a running kscale (pid {}); wait for it to end",
            entries.len(),
            e.pid
        )));
    }
    Err(user(format!(
        "{} setting(s) changed by kscale (pid {}, {}) were never restored: run `kscale --db {} tune --restore` first",
        entries.len(),
        first.pid,
        first.applied_at,
        store.path().display()
    )))
}
