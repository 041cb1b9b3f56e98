//! `fileserver.trace`: a dbench loadfile (NetBench's client trace) replayed
//! call by call — the same calls, names, sizes and offsets, each client in
//! its own tree — where `fileserver.mix` only draws from its proportions,
//! so that the figure can be set beside dbench's (docs/families/fileserver.md,
//! "The trace replay").
//!
//! A call whose recorded status is a failure is expected to fail; one that
//! does otherwise is a *mismatch*, counted as dbench warns about it. Unlike
//! dbench, every byte read is checked against a model of what the client
//! wrote (`verify=on`): a file system that returns other data fails the
//! trial, whatever the trace says.

mod model;
mod parse;
mod replay;

use super::client::Rng;
use super::trial::run_clients;
use super::{MISMATCHES, TRACE_METRICS};
use crate::{TrialCtx, TrialOutput};
use anyhow::{bail, Result};
use parse::Trace;
use replay::Replayer;
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Where Debian's dbench package installs NetBench's client trace.
pub(super) const DEFAULT_TRACE: &str = "/usr/share/dbench/client.txt";

/// The longest read or write replayed: a client's buffers are this long.
/// NetBench's calls move at most 64 KiB.
const MAX_IO: usize = 1 << 20;
/// Written data repeats with this period; a prime, so that a block put at
/// the wrong offset (a multiple of any power of two away) does not pass.
const PERIOD: usize = 65_521;

/// SMB's NTCreateX create options and dispositions (MS-SMB2 2.2.13).
const FILE_DIRECTORY_FILE: u32 = 0x1;
const FILE_NON_DIRECTORY_FILE: u32 = 0x40;
const FILE_SUPERSEDE: u32 = 0;
const FILE_OPEN: u32 = 1;
const FILE_CREATE: u32 = 2;
const FILE_OPEN_IF: u32 = 3;
const FILE_OVERWRITE: u32 = 4;
const FILE_OVERWRITE_IF: u32 = 5;

/// The calls replayed, under the names the loadfile gives them; each has
/// its own latency histogram under this name.
pub(super) const KINDS: [&str; 17] = [
    "NTCreateX",
    "Close",
    "Rename",
    "Unlink",
    "Deltree",
    "Rmdir",
    "Mkdir",
    "QUERY_PATH_INFORMATION",
    "QUERY_FILE_INFORMATION",
    "QUERY_FS_INFORMATION",
    "SET_FILE_INFORMATION",
    "FIND_FIRST",
    "WriteX",
    "ReadX",
    "LockX",
    "UnlockX",
    "Flush",
];

/// How a loadfile is accepted, for every message that refuses one.
const ACCEPTED: &str = "accepted: the absolute path of a dbench loadfile of NetBench's SMB calls, \
                        such as /usr/share/dbench/client.txt (Debian package dbench)";

/// `KSCALE_FAULT=corrupt:fileserver.trace`: a byte of every file of client
/// 0 flipped at a random offset.
pub(super) fn corrupt_trace_tree(dir: &Path, rng: &mut Rng) {
    let mut stack = vec![dir.join("clients").join("client0")];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                stack.push(e.path());
                continue;
            }
            let Ok(f) = OpenOptions::new().read(true).write(true).open(e.path()) else {
                continue;
            };
            let len = f.metadata().map_or(0, |m| m.len());
            if len == 0 {
                continue;
            }
            let at = rng.below(len);
            let mut b = [0u8; 1];
            if f.read_exact_at(&mut b, at).is_ok() {
                b[0] ^= 0xff;
                let _ = f.write_all_at(&b, at);
            }
        }
    }
}

/// One trial of `fileserver.trace`: the loadfile parsed once in the worker
/// (the clients share it, copy-on-write), then replayed by every client.
pub(super) fn run_trace(ctx: &TrialCtx) -> Result<TrialOutput> {
    let clients = ctx.params.int("clients")? as usize;
    let verify = ctx.params.get("verify")? == "on";
    let liveness = ctx.params.get("calls")? == "dbench";
    let source = ctx.params.get("trace")?;
    let trace = Trace::load(source)?;
    let timed: Vec<&str> = TRACE_METRICS.iter().filter_map(|m| m.histogram()).collect();
    if let Some(h) = timed.iter().find(|h| trace.count(h) == 0) {
        bail!(
            "trace={source}: makes no {h} call, and fileserver.trace reports the p99 of each of \
             {} ({ACCEPTED})",
            timed.join(", ")
        );
    }
    let o = run_clients(
        ctx,
        clients,
        |i, dir, seed| Ok(Replayer::new(&trace, dir, i, seed, verify).liveness(liveness)),
        corrupt_trace_tree,
    )?;
    let window = ctx.params.seconds("duration")?;
    for h in &timed {
        if o.histograms.get(*h).is_none_or(|x| x.is_empty()) {
            bail!(
                "no {h} call completed in the {window} s window (the trace makes {} in a pass of \
                 {} calls): a longer duration= reaches one",
                trace.count(h),
                trace.calls()
            );
        }
    }
    let tally = |k: &str| o.tallies.get(k).copied().unwrap_or(0);
    let (failed, mismatched) = (tally("expected_failures"), tally("mismatches"));
    let mut out = o
        .output(
            ctx,
            clients,
            if verify {
                "every read verified"
            } else {
                "reads not verified (verify=off)"
            },
        )
        .with(&MISMATCHES, mismatched as f64)
        .note(format!(
            "{source}: {} calls a pass, {:.2} of a pass per client in the window; {failed} \
             calls ({:.1} %) failed as the trace recorded, {mismatched} did not do what it \
             recorded",
            trace.calls(),
            o.ops() as f64 / trace.calls() as f64 / clients as f64,
            failed as f64 / o.ops().max(1) as f64 * 100.0
        ));
    for n in &o.notes {
        out = out.note(format!("mismatch: {n}"));
    }
    Ok(out)
}

/// A short loadfile in NetBench's form that makes every kind of call, some
/// recorded as failing, one recorded against what a Linux file system does
/// (line 28: the file is there); the binary's test replays it too.
#[cfg(test)]
const SHORT_TRACE: &str = include_str!("../short-trace.txt");
