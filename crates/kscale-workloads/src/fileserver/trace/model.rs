//! The verification model: what the client believes each file of its tree
//! holds, so that every byte read is checked against what was written.

use super::super::client::Rng;
use super::PERIOD;
use std::collections::{BTreeMap, HashMap};

/// One stretch of a file written by one write (or by appends that
/// continued it): byte `o` of it is `pattern[(o + phase) % PERIOD]`.
#[derive(Clone, Copy, Debug)]
struct Extent {
    start: u64,
    end: u64,
    phase: u64,
}

/// What the client believes one file holds; bytes no extent covers are
/// zeros (a hole, or past a truncation).
#[derive(Debug, Default)]
pub(super) struct Data {
    len: u64,
    extents: Vec<Extent>,
    /// Names and open handles that reach it: a file unlinked while open is
    /// still read through its handle.
    names: u32,
    handles: u32,
}

impl Data {
    /// The phase a write at `o` takes: an append that continues the last
    /// extent keeps its phase (the file stays one extent), any other write
    /// a fresh one, so that data left from before it does not pass.
    pub(super) fn phase_for(&self, o: u64, rng: &mut Rng) -> u64 {
        match self.extents.last() {
            Some(e) if e.end == o => e.phase,
            _ => rng.below(PERIOD as u64),
        }
    }

    pub(super) fn write(&mut self, start: u64, n: u64, phase: u64) {
        if n == 0 {
            return;
        }
        let end = start + n;
        self.len = self.len.max(end);
        match self.extents.last_mut() {
            None => self.extents.push(Extent { start, end, phase }),
            Some(e) if e.end == start && e.phase == phase => e.end = end,
            Some(e) if e.end <= start => self.extents.push(Extent { start, end, phase }),
            _ => {
                let mut out = Vec::with_capacity(self.extents.len() + 2);
                for e in &self.extents {
                    if e.end <= start || e.start >= end {
                        out.push(*e);
                        continue;
                    }
                    if e.start < start {
                        out.push(Extent { end: start, ..*e });
                    }
                    if e.end > end {
                        out.push(Extent { start: end, ..*e });
                    }
                }
                let at = out.partition_point(|e| e.start < start);
                out.insert(at, Extent { start, end, phase });
                self.extents = out;
            }
        }
    }

    /// Checks `got`, read at `o` after asking for `size` bytes; the
    /// offset of the first wrong byte, or how the length is wrong.
    pub(super) fn check(
        &self,
        o: u64,
        size: u64,
        got: &[u8],
        pattern: &[u8],
    ) -> Result<(), String> {
        let due = size.min(self.len.saturating_sub(o));
        if got.len() as u64 != due {
            return Err(format!(
                "{} bytes came back at offset {o}, {due} were due (the client wrote {} bytes)",
                got.len(),
                self.len
            ));
        }
        let end = o + due;
        let mut at = o;
        let first = self.extents.partition_point(|e| e.end <= o);
        for e in self.extents[first..].iter().take_while(|e| e.start < end) {
            if e.start > at {
                zeros(&got[(at - o) as usize..(e.start - o) as usize], at)?;
                at = e.start;
            }
            let to = e.end.min(end);
            let p = ((at + e.phase) % PERIOD as u64) as usize;
            let want = &pattern[p..p + (to - at) as usize];
            let have = &got[(at - o) as usize..(to - o) as usize];
            if let Some(k) = (0..want.len()).find(|&k| want[k] != have[k]) {
                return Err(format!(
                    "byte {} differs from what was written",
                    at + k as u64
                ));
            }
            at = to;
        }
        if at < end {
            zeros(&got[(at - o) as usize..], at)?;
        }
        Ok(())
    }
}

fn zeros(b: &[u8], from: u64) -> Result<(), String> {
    match b.iter().position(|&x| x != 0) {
        Some(k) => Err(format!(
            "byte {} is not the zero of a hole or of a truncated file",
            from + k as u64
        )),
        None => Ok(()),
    }
}

/// The client's model of its tree: which name holds which file, and what
/// each file holds.
#[derive(Debug, Default)]
pub(super) struct Model {
    pub(super) names: BTreeMap<String, u64>,
    pub(super) files: HashMap<u64, Data>,
    next: u64,
}

impl Model {
    /// A file opened under `name`: the one the name holds (emptied when the
    /// open truncates), or a new one.
    pub(super) fn open(&mut self, name: &str, truncate: bool) -> u64 {
        if let Some(&id) = self.names.get(name) {
            if let Some(d) = self.files.get_mut(&id) {
                if truncate {
                    d.len = 0;
                    d.extents.clear();
                }
                d.handles += 1;
                return id;
            }
        }
        self.next += 1;
        let id = self.next;
        self.files.insert(
            id,
            Data {
                names: 1,
                handles: 1,
                ..Data::default()
            },
        );
        if let Some(old) = self.names.insert(name.to_string(), id) {
            self.release(old, true);
        }
        id
    }

    pub(super) fn release(&mut self, id: u64, name: bool) {
        if let Some(d) = self.files.get_mut(&id) {
            if name {
                d.names = d.names.saturating_sub(1);
            } else {
                d.handles = d.handles.saturating_sub(1);
            }
            if d.names == 0 && d.handles == 0 {
                self.files.remove(&id);
            }
        }
    }

    /// The names at `path` and below it (every name for `""`).
    fn under(&self, path: &str) -> Vec<String> {
        if path.is_empty() {
            return self.names.keys().cloned().collect();
        }
        let below = format!("{path}/");
        let mut out: Vec<String> = self
            .names
            .range(below.clone()..)
            .take_while(|(k, _)| k.starts_with(&below))
            .map(|(k, _)| k.clone())
            .collect();
        if self.names.contains_key(path) {
            out.push(path.to_string());
        }
        out
    }

    pub(super) fn remove(&mut self, path: &str) {
        for k in self.under(path) {
            if let Some(id) = self.names.remove(&k) {
                self.release(id, true);
            }
        }
    }

    pub(super) fn rename(&mut self, from: &str, to: &str) {
        if from == to {
            return;
        }
        let moved: Vec<(String, u64)> = self
            .under(from)
            .into_iter()
            .filter_map(|k| self.names.remove(&k).map(|id| (k, id)))
            .collect();
        self.remove(to);
        for (k, id) in moved {
            self.names.insert(format!("{to}{}", &k[from.len()..]), id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse::Trace;
    use super::super::replay::Replayer;
    use super::*;
    use std::path::Path;

    /// The model follows overwrites, holes, truncation and names.
    #[test]
    fn the_model_knows_what_each_byte_should_be() {
        let t = Trace::parse("Close 1 NT_STATUS_OK\n").unwrap();
        let r = Replayer::new(&t, Path::new("/nonexistent"), 0, 1, true);
        let p = &r.pattern;
        let mut d = Data::default();
        d.write(10, 100, 7);
        d.write(50, 10, 3);
        d.write(200, 5, 7);
        let mut want = vec![0u8; 205];
        for o in 10..110 {
            want[o] = p[(o + 7) % PERIOD];
        }
        for o in 50..60 {
            want[o] = p[(o + 3) % PERIOD];
        }
        for o in 200..205 {
            want[o] = p[(o + 7) % PERIOD];
        }
        assert!(d.check(0, 4096, &want, p).is_ok());
        assert!(d.check(55, 20, &want[55..75], p).is_ok());
        let mut bad = want.clone();
        bad[57] ^= 1;
        assert_eq!(
            d.check(0, 4096, &bad, p).unwrap_err(),
            "byte 57 differs from what was written"
        );
        bad = want.clone();
        bad[150] = 1;
        assert!(d
            .check(0, 4096, &bad, p)
            .unwrap_err()
            .contains("byte 150 is not the zero"));
        assert!(d
            .check(0, 4096, &want[..100], p)
            .unwrap_err()
            .contains("205 were due"));

        let mut m = Model::default();
        let a = m.open("d/a", false);
        m.release(a, false);
        m.rename("d", "e");
        assert_eq!(m.names.get("e/a"), Some(&a));
        let b = m.open("e/a", true);
        assert_eq!(a, b, "the same file, truncated");
        m.remove("e");
        assert!(m.files.contains_key(&a), "an open file outlives its name");
        m.release(a, false);
        assert!(m.files.is_empty() && m.names.is_empty());
    }
}
