//! `fileserver`: the file-serving side of NetBench (seed 004's first case
//! study), measured on the local kernel the way dbench replays NetBench's
//! trace (docs/families/fileserver.md).
//!
//! `clients` forked processes each own a directory tree under the run's
//! scratch directory and replay the operation mix of [`MIX`] — a Windows
//! client's calls turned into the system calls a file server makes for them
//! — as fast as they can, for a fixed `duration` after an uncounted ramp-up.
//! The worker keeps time through a shared page (one relaxed load per
//! operation), as the macro mechanism's parent does through its control
//! lines; each client sends its counts and per-kind latency histograms back
//! through a pipe.
//!
//! Every byte read is checked against what was written: each 4 KiB block
//! carries a stamp (the file's incarnation and the block's number) and a
//! known pattern, and `stat` and `readdir` are checked against the client's
//! model of its tree. A file server that loses data must not report a
//! throughput, so any mismatch fails the trial.
//!
//! This file holds the definition and the mix; `client.rs` a client's
//! tree, model and operations, `trial.rs` the forked clients and the
//! trial's result, `mount.rs` the note naming the scratch file system.

mod client;
mod mount;
mod trace;
mod trial;

use crate::{roles, ChartDef, Family, WorkloadDef};
use kscale_core::{MetricDef, ParamDef, ParamKind};
use std::path::Path;
use std::time::Duration;
use trace::{run_trace, DEFAULT_TRACE};
use trial::run_mix;

/// The kinds of operation a client performs; each has its own histogram.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Read,
    Stat,
    Open,
    Create,
    Close,
    Write,
    Readdir,
    Unlink,
    Fsync,
    Rename,
    Lock,
}

/// The operation mix, per mille, modelled on the op counts of the NetBench
/// client trace that dbench replays (its `client.txt`: ≈458,000 SMB calls
/// per client pass). SMB calls are folded into the POSIX calls a server makes
/// for them; the shares are rounded, and the rare ones are raised so that
/// every kind completes often enough in a short window to have a p99.
///
/// | kind      | system calls                          | NetBench calls (share)                              | here |
/// |-----------|---------------------------------------|-----------------------------------------------------|------|
/// | read      | pread 4–60 KiB, verified              | ReadX (27.1 %)                                      | 29.0 % |
/// | stat      | stat of a path, size checked          | QUERY_PATH/FILE/FS_INFORMATION (21.3 %)             | 22.5 % |
/// | open      | open O_RDWR of an existing file       | NTCreateX of an existing file (≈12.7 %)             |  9.5 % |
/// | create    | open O_CREAT\|O_TRUNC (new incarnation)| NTCreateX creating or overwriting (≈4.6 %)          |  3.7 % |
/// | close     | close                                 | Close (12.7 %)                                      | 13.2 % |
/// | write     | pwrite 4–64 KiB, appending or over    | WriteX (8.6 %)                                      |  9.2 % |
/// | readdir   | opendir + readdir, count checked      | FIND_FIRST (6.1 %)                                  |  6.5 % |
/// | unlink    | unlink                                | Unlink (3.5 %)                                      |  3.7 % |
/// | fsync     | fsync                                 | Flush (1.2 %)                                       |  1.3 % |
/// | rename    | rename, within or across directories  | Rename (0.7 %)                                      |  0.8 % |
/// | lock      | fcntl F_SETLK write lock, then unlock | LockX + UnlockX (0.1 %)                             |  0.6 % |
///
/// SET_FILE_INFORMATION (1.4 %) has no counterpart here. `open` + `create`
/// equal `close`, so the number of open files stays between
/// [`MIN_HANDLES`] and [`MAX_HANDLES`]; `create` equals `unlink`, so the
/// tree neither fills nor empties.
pub const MIX: &[(Kind, u32)] = &[
    (Kind::Read, 290),
    (Kind::Stat, 225),
    (Kind::Open, 95),
    (Kind::Create, 37),
    (Kind::Close, 132),
    (Kind::Write, 92),
    (Kind::Readdir, 65),
    (Kind::Unlink, 37),
    (Kind::Fsync, 13),
    (Kind::Rename, 8),
    (Kind::Lock, 6),
];

impl Kind {
    pub const ALL: [Kind; 11] = [
        Kind::Read,
        Kind::Stat,
        Kind::Open,
        Kind::Create,
        Kind::Close,
        Kind::Write,
        Kind::Readdir,
        Kind::Unlink,
        Kind::Fsync,
        Kind::Rename,
        Kind::Lock,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Read => "read",
            Kind::Stat => "stat",
            Kind::Open => "open",
            Kind::Create => "create",
            Kind::Close => "close",
            Kind::Write => "write",
            Kind::Readdir => "readdir",
            Kind::Unlink => "unlink",
            Kind::Fsync => "fsync",
            Kind::Rename => "rename",
            Kind::Lock => "lock",
        }
    }

    pub(super) fn index(self) -> usize {
        self as usize
    }
}

pub(super) const MBPS: MetricDef = MetricDef::higher("mbps", "MB/s");
pub(super) const OPS: MetricDef = MetricDef::higher("ops", "ops/s");
pub(super) const FSYNCS: MetricDef = MetricDef::higher("fsyncs", "fsyncs/s");
pub(super) const MISMATCHES: MetricDef = MetricDef::lower("mismatches", "calls");
const fn p99(name: &'static str, hist: &'static str) -> MetricDef {
    MetricDef::quantile(name, "µs", hist, 0.99, 1e-3)
}

const CLIENTS: ParamDef = ParamDef {
    name: "clients",
    help: "Client processes, each replaying the load in its own directory tree (dbench's \
           NPROCS; NetBench's client machines).",
    kind: ParamKind::Int { min: 1, max: 512 },
    default: &["1", "2", "4", "8", "16"],
    quick: &["1", "4"],
};

const TRACE: ParamDef = ParamDef {
    name: "trace",
    help: "The dbench loadfile replayed, by absolute path: NetBench's client trace as Debian's \
           dbench package installs it, or another of the same calls.",
    kind: ParamKind::Str,
    default: &[DEFAULT_TRACE],
    quick: &[],
};

const VERIFY: ParamDef = ParamDef {
    name: "verify",
    help: "on: every byte read is checked against what the client wrote, as the mix does; off: \
           unchecked, as dbench (the difference is what the check costs).",
    kind: ParamKind::Choice(&["on", "off"]),
    default: &["on"],
    quick: &[],
};

const CALLS: ParamDef = ParamDef {
    name: "calls",
    help: "trace: the calls each of the trace's operations needs; dbench: also the one dbench's \
           client adds to every line, a kill(parent, 0) to see its parent is alive (so that the \
           two make the same calls: docs/families/fileserver.md).",
    kind: ParamKind::Choice(&["trace", "dbench"]),
    default: &["trace"],
    quick: &[],
};

/// The trace's metrics. The p99s are of the calls NetBench's trace makes at
/// least every 900 lines or so, so that every window has some; LockX
/// (every 4,300), SET_FILE_INFORMATION, QUERY_FS_INFORMATION, Mkdir and
/// Deltree have histograms without a metric.
pub(super) const TRACE_METRICS: &[MetricDef] = &[
    MBPS,
    OPS,
    MISMATCHES,
    p99("p99_ntcreatex", "NTCreateX"),
    p99("p99_close", "Close"),
    p99("p99_readx", "ReadX"),
    p99("p99_writex", "WriteX"),
    p99("p99_qpathinfo", "QUERY_PATH_INFORMATION"),
    p99("p99_qfileinfo", "QUERY_FILE_INFORMATION"),
    p99("p99_findfirst", "FIND_FIRST"),
    p99("p99_unlink", "Unlink"),
    p99("p99_rename", "Rename"),
    p99("p99_flush", "Flush"),
];

pub static FAMILY: Family = Family {
    name: "fileserver",
    title: "File serving",
    help: "NetBench's file-server load replayed on the local file system the way dbench does: \
           client processes each opening, reading, writing, listing, renaming, locking and \
           deleting files in their own tree under --dir, every read verified (seed 004).",
    workloads: &[
        WorkloadDef {
            family: "fileserver",
            name: "mix",
            title: "NetBench file-server mix",
            help:
                "MB/s read plus written by `clients` processes replaying a NetBench-like operation \
               mix (read, stat, open, create, close, write, readdir, unlink, fsync, rename, \
               fcntl lock) for `duration` seconds, with operations/s, fsyncs/s and the p99 of \
               each kind of operation. A read that does not return what was written fails the \
               trial. The note names --dir's file system and mount options.",
            params: &[CLIENTS, roles::DURATION],
            metrics: &[
                MBPS,
                OPS,
                FSYNCS,
                p99("p99_read", "read"),
                p99("p99_write", "write"),
                p99("p99_open", "open"),
                p99("p99_create", "create"),
                p99("p99_close", "close"),
                p99("p99_stat", "stat"),
                p99("p99_readdir", "readdir"),
                p99("p99_unlink", "unlink"),
                p99("p99_rename", "rename"),
                p99("p99_lock", "lock"),
                p99("p99_fsync", "fsync"),
            ],
            charts: &[ChartDef::against("clients")
                .log()
                .metrics(&["mbps", "ops", "p99_read"])],
            timeout: Duration::from_secs(60),
            run: run_mix,
            caveat: mix_caveat,
            ..WorkloadDef::BASE
        },
        WorkloadDef {
            family: "fileserver",
            name: "trace",
            title: "NetBench trace replay",
            help:
                "MB/s read plus written by `clients` processes replaying a dbench loadfile call by \
               call (NetBench's client trace by default: the same calls, names, sizes and \
               offsets as dbench), each in clients/clientN, for `duration` seconds, with \
               operations/s, the calls that did not do what the trace recorded, and the p99 of \
               each kind of call. With verify=on a read that does not return what was written \
               fails the trial.",
            params: &[CLIENTS, roles::DURATION, TRACE, VERIFY, CALLS],
            metrics: TRACE_METRICS,
            charts: &[ChartDef::against("clients")
                .log()
                .metrics(&["mbps", "ops", "p99_readx"])],
            timeout: Duration::from_secs(60),
            run: run_trace,
            caveat: trace_caveat,
            unavailable: trace_unavailable,
            // The quick family run (the macro suite's, the convergence
            // studies') stays the mix's, as measured in docs/validation.md;
            // naming the workload runs it.
            quick: false,
            ..WorkloadDef::BASE
        },
    ],
};

/// The default loadfile is a package's: without it the case is skipped,
/// not failed (a missing program is a fact about the machine).
fn trace_unavailable(_: &WorkloadDef, params: &kscale_core::Params) -> Option<String> {
    let trace = params.get(TRACE.name).unwrap_or(DEFAULT_TRACE);
    (trace == DEFAULT_TRACE && !Path::new(DEFAULT_TRACE).exists()).then(|| {
        format!(
            "{DEFAULT_TRACE} (NetBench's client trace, Debian package dbench) is not installed; \
             trace=PATH names another loadfile"
        )
    })
}

/// NetBench's trace deletes a file for every five it opens or creates, and
/// the whole tree at the end of a pass: on ext4 without a journal it meets
/// the same inode-allocator scan as the mix.
fn trace_caveat(params: &kscale_core::Params, dir: &Path) -> Option<String> {
    unjournalled(params, dir, "the trace deletes its whole tree every pass")
}

/// The mix creates as many files as it deletes, and on ext4 without a
/// journal the inode allocator skips every inode freed in the last minute
/// (`recently_deleted()`), so the cost of a create rises and falls with the
/// deletions of the last minute: throughput swings on a scale of tens of
/// seconds that short windows follow instead of averaging
/// (docs/families/fileserver.md).
fn mix_caveat(params: &kscale_core::Params, dir: &Path) -> Option<String> {
    unjournalled(params, dir, "the mix deletes as often as it creates")
}

fn unjournalled(params: &kscale_core::Params, dir: &Path, deletes: &str) -> Option<String> {
    let dev = kscale_sys::fsinfo::ext4_without_journal(dir)?;
    let window = params
        .get(roles::DURATION.name)
        .unwrap_or(roles::DURATION.default[0]);
    Some(format!(
        "{} is on ext4 without a journal ({dev}): each create there scans past the inodes \
         deleted in the last minute, and {deletes}, so throughput \
         swings over tens of seconds and {window} s windows may not converge; --dir on tmpfs \
         or a journalled filesystem measures without it (docs/families/fileserver.md)",
        dir.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_is_a_whole_and_balanced() {
        let w = |k: Kind| MIX.iter().find(|(x, _)| *x == k).map_or(0, |(_, w)| *w);
        assert_eq!(MIX.iter().map(|(_, w)| w).sum::<u32>(), 1000);
        for k in Kind::ALL {
            assert!(w(k) > 0, "{k:?} missing from the mix");
            assert_eq!(Kind::ALL[k.index()], k);
        }
        // Handles opened = handles closed; files made = files removed.
        assert_eq!(w(Kind::Open) + w(Kind::Create), w(Kind::Close));
        assert_eq!(w(Kind::Create), w(Kind::Unlink));
    }
}
