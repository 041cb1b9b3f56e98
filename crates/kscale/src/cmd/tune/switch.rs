//! Switching the machine between the states of an interleaved group
//! (docs/tune.md, "Interleaved steps"). Every file a group's steps change
//! was journalled when the step was first applied, with the value it had
//! before: so the switches between trials write without journalling, and
//! however the study ends the journal puts back what was there before.

use std::cell::Cell;
use std::path::{Path, PathBuf};

/// The files a group's steps write and each state's value of each.
#[derive(Debug, Default)]
pub struct Switcher {
    files: Vec<PathBuf>,
    /// Per state, in the order they were pushed: a value per file.
    values: Vec<Vec<String>>,
    /// The state the machine is in now.
    current: Cell<Option<usize>>,
}

/// A file a step wrote: its path, its value before, the value written.
pub type Write = (PathBuf, String, String);

impl Switcher {
    /// Adds the next state, reached from the one before (or from the
    /// group's start, for the first) by `writes`, as it was just applied:
    /// the machine is in it now. A file first written here had its `old`
    /// value in every earlier state.
    pub fn push(&mut self, writes: Vec<Write>) {
        let mut now = self.values.last().cloned().unwrap_or_default();
        for (path, old, new) in writes {
            match self.files.iter().position(|f| *f == path) {
                Some(i) => now[i] = new,
                None => {
                    self.files.push(path);
                    for v in &mut self.values {
                        v.push(old.clone());
                    }
                    now.push(new);
                }
            }
        }
        self.values.push(now);
        self.current.set(Some(self.values.len() - 1));
    }

    /// Puts the machine in state `to`, writing only the files whose value
    /// differs from the current state's.
    pub fn switch(
        &self,
        to: usize,
        mut write: impl FnMut(&Path, &str) -> Result<(), String>,
    ) -> Result<(), String> {
        let Some(want) = self.values.get(to) else {
            return Err(format!("no state {to} in this group"));
        };
        let from = self.current.get().and_then(|c| self.values.get(c));
        for (i, path) in self.files.iter().enumerate() {
            if from.is_none_or(|f| f[i] != want[i]) {
                // Unknown until it has succeeded: a failed write leaves
                // the machine between two states.
                self.current.set(None);
                write(path, &want[i])?;
            }
        }
        self.current.set(Some(to));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(p: &str, old: &str, new: &str) -> Write {
        (PathBuf::from(p), old.into(), new.into())
    }

    #[test]
    fn each_state_gets_its_own_values_and_only_changes_are_written() {
        let mut s = Switcher::default();
        s.push(vec![]); // the baseline
        s.push(vec![w("fin", "60", "23")]);
        s.push(vec![w("keep", "7200", "3333"), w("fin", "23", "24")]);
        let mut log = Vec::new();
        let mut rec = |p: &Path, v: &str| {
            log.push(format!("{}={v}", p.display()));
            Ok(())
        };
        // Now in the last state: the baseline puts both back.
        s.switch(0, &mut rec).unwrap();
        s.switch(0, &mut rec).unwrap();
        s.switch(1, &mut rec).unwrap();
        s.switch(2, &mut rec).unwrap();
        assert_eq!(
            log,
            ["fin=60", "keep=7200", "fin=23", "fin=24", "keep=3333"]
        );
        assert!(s.switch(3, |_, _| Ok(())).is_err());
    }

    #[test]
    fn after_a_failed_write_every_file_is_written_again() {
        let mut s = Switcher::default();
        s.push(vec![w("a", "1", "2"), w("b", "1", "2")]);
        s.push(vec![w("a", "2", "3")]);
        assert!(s.switch(0, |_, _| Err("busy".into())).is_err());
        let mut n = 0;
        s.switch(1, |_, _| {
            n += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(n, 2);
    }
}
