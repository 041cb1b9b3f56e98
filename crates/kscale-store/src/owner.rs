//! Which process is measuring a run, so that a reader can tell a run that
//! is still measuring from one whose process was killed (docs/store.md,
//! "Killed runs"). A run records the host, the boot and the process that
//! runs it; a `running` run whose process is gone reads `killed`.
//!
//! Nothing is written back: the judgement is made afresh by every reader,
//! as only the host that runs a run can judge it, readers may have no
//! right to write (a shared PostgreSQL store), and a judgement written
//! back could race with the `--resume` that claims the run again.

use serde::{Deserialize, Serialize};

/// The process measuring a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    /// The host's name (`uname -n`), as the run's snapshot has it.
    pub host: String,
    /// `/proc/sys/kernel/random/boot_id`: a new one at every boot.
    pub boot_id: String,
    pub pid: i64,
    /// The process's start time (clock ticks after boot, `/proc/PID/stat`
    /// field 22): with the boot id, it tells the process from a later one
    /// given the same pid.
    pub pid_start: Option<i64>,
}

/// Where the reader is: its host and boot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Here {
    pub host: String,
    pub boot_id: String,
    /// When this boot began, Unix seconds (`/proc/stat` btime).
    pub boot_time: Option<i64>,
}

/// What a reader can say of a `running` run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Liveness {
    /// Its process is still there.
    Alive,
    /// Its process is gone: the run is `killed`.
    Gone,
    /// It runs on another host, or recorded no process: only that host
    /// could tell.
    Unknown,
}

/// Judges a `running` run. `start_of(pid)` is the start time of the
/// process `pid` on this host, `None` when there is none. A run from
/// before owners were recorded is judged by its snapshot's host and start
/// time: started on this host before its last boot, it was killed.
pub fn judge(
    owner: Option<&Owner>,
    snapshot_host: Option<&str>,
    started_at: Option<i64>,
    here: &Here,
    start_of: impl Fn(i64) -> Option<i64>,
) -> Liveness {
    let Some(o) = owner else {
        return match (snapshot_host, started_at, here.boot_time) {
            (Some(h), Some(s), Some(b)) if h == here.host && s < b => Liveness::Gone,
            _ => Liveness::Unknown,
        };
    };
    if o.host != here.host {
        return Liveness::Unknown;
    }
    if o.boot_id != here.boot_id {
        return Liveness::Gone;
    }
    match (start_of(o.pid), o.pid_start) {
        (None, _) => Liveness::Gone,
        (Some(now), Some(then)) if now != then => Liveness::Gone,
        _ => Liveness::Alive,
    }
}

impl Owner {
    /// This process, or `None` where `/proc` cannot say.
    pub fn current() -> Option<Owner> {
        let here = Here::current()?;
        let pid = i64::from(std::process::id());
        Some(Owner {
            host: here.host.clone(),
            boot_id: here.boot_id.clone(),
            pid,
            pid_start: start_of(pid),
        })
    }
}

impl Here {
    /// This host and boot, read once per process.
    pub fn current() -> Option<&'static Here> {
        static HERE: std::sync::OnceLock<Option<Here>> = std::sync::OnceLock::new();
        HERE.get_or_init(|| {
            let read = |p: &str| {
                std::fs::read_to_string(p)
                    .ok()
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
            };
            Some(Here {
                host: read("/proc/sys/kernel/hostname")?,
                boot_id: read("/proc/sys/kernel/random/boot_id")?,
                boot_time: read("/proc/stat").and_then(|s| {
                    s.lines()
                        .find_map(|l| l.strip_prefix("btime "))
                        .and_then(|v| v.trim().parse().ok())
                }),
            })
        })
        .as_ref()
    }
}

/// The start time of process `pid` on this host, `None` if there is no
/// such process (or it is a zombie: it has ended).
pub fn start_of(pid: i64) -> Option<i64> {
    if pid <= 0 {
        return None;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The name in parentheses may hold spaces and parentheses: fields
    // are counted after the last `)`. Field 3 is the state, 22 the start.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    if fields.next()? == "Z" {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn here() -> Here {
        Here {
            host: "lab1".into(),
            boot_id: "boot-a".into(),
            boot_time: Some(1_000),
        }
    }

    fn owner(host: &str, boot: &str, pid: i64, start: Option<i64>) -> Owner {
        Owner {
            host: host.into(),
            boot_id: boot.into(),
            pid,
            pid_start: start,
        }
    }

    #[test]
    fn same_host_and_boot_is_judged_by_the_process() {
        let h = here();
        let o = owner("lab1", "boot-a", 42, Some(7));
        assert_eq!(
            judge(Some(&o), None, None, &h, |_| Some(7)),
            Liveness::Alive
        );
        assert_eq!(judge(Some(&o), None, None, &h, |_| None), Liveness::Gone);
        // The pid was given to a later process.
        assert_eq!(judge(Some(&o), None, None, &h, |_| Some(9)), Liveness::Gone);
        let unknown_start = owner("lab1", "boot-a", 42, None);
        assert_eq!(
            judge(Some(&unknown_start), None, None, &h, |_| Some(9)),
            Liveness::Alive
        );
    }

    #[test]
    fn another_boot_of_this_host_killed_it() {
        let o = owner("lab1", "boot-old", 42, Some(7));
        assert_eq!(
            judge(Some(&o), None, None, &here(), |_| Some(7)),
            Liveness::Gone
        );
    }

    #[test]
    fn another_host_is_not_judged_by_this_hosts_processes() {
        let o = owner("lab2", "boot-b", 42, Some(7));
        for alive in [None, Some(7)] {
            assert_eq!(
                judge(Some(&o), None, None, &here(), |_| alive),
                Liveness::Unknown
            );
        }
    }

    #[test]
    fn runs_without_an_owner_are_judged_by_boot_time_only() {
        let h = here();
        let j = |host, started| judge(None, host, started, &h, |_| Some(1));
        assert_eq!(j(Some("lab1"), Some(999)), Liveness::Gone);
        assert_eq!(j(Some("lab1"), Some(1_001)), Liveness::Unknown);
        assert_eq!(j(Some("lab2"), Some(999)), Liveness::Unknown);
        assert_eq!(j(None, Some(999)), Liveness::Unknown);
    }

    #[test]
    fn this_process_is_alive_and_a_dead_child_is_gone() {
        let Some(me) = Owner::current() else { return };
        let h = Here::current().unwrap();
        assert_eq!(judge(Some(&me), None, None, h, start_of), Liveness::Alive);
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = i64::from(child.id());
        child.wait().unwrap();
        let dead = Owner {
            pid,
            pid_start: Some(0),
            ..me
        };
        assert_eq!(judge(Some(&dead), None, None, h, start_of), Liveness::Gone);
    }
}
