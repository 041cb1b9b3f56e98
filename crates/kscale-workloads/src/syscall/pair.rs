//! A one-byte token between two processes over a pipe or a UNIX socket,
//! placed by the `place` param.

use super::latency;
use crate::shared::child::ChildGuard;
use crate::shared::fd::{read_exact, write_exact};
use crate::shared::place::Placement;
use crate::timing::median_time_per_op;
use crate::{timed, TrialCtx, TrialOutput};
use anyhow::{Context, Result};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// Reads one byte and sends it back until the other side goes away.
fn echo(r: RawFd, w: RawFd) -> i32 {
    let mut byte = [0u8];
    loop {
        if read_exact(r, &mut byte).is_err() {
            return 0;
        }
        if write_exact(w, &byte).is_err() {
            return 1;
        }
    }
}

/// Sends one byte on `w` and waits for it to come back on `r`.
fn round_trip(w: RawFd, r: RawFd) -> Result<()> {
    let mut byte = [0u8];
    write_exact(w, &byte).context("write to peer")?;
    match read_exact(r, &mut byte) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            anyhow::bail!("peer process went away")
        }
        Err(e) => Err(e).context("read from peer"),
    }
}

/// Forks a peer that echoes what the parent sends on `parent_w` from
/// `child_r` to `child_w`, and times one-byte round trips. The child's ends
/// are closed in the parent so a dead peer shows as end-of-file, not a hang.
fn ping_pong(
    ctx: &TrialCtx,
    (parent_w, parent_r): (OwnedFd, OwnedFd),
    (child_r, child_w): (OwnedFd, OwnedFd),
) -> Result<TrialOutput> {
    let place = Placement::from_ctx(ctx)?;
    place.pin(0)?;
    let (cr, cw) = (child_r.as_raw_fd(), child_w.as_raw_fd());
    let _peer = ChildGuard(place.fork(1, move || echo(cr, cw))?);
    drop((child_r, child_w));
    let (w, r) = (parent_w.as_raw_fd(), parent_r.as_raw_fd());
    // One exchange before timing so both processes are running (as lmbench).
    round_trip(w, r).context("first round trip")?;
    let (per_op, n) = median_time_per_op(ctx, |n| {
        timed(|| {
            for _ in 0..n {
                round_trip(w, r)?;
            }
            Ok(())
        })
    })?;
    Ok(latency(per_op, n).note(place.note(2, "partner")))
}

pub(super) fn pipe(ctx: &TrialCtx) -> Result<TrialOutput> {
    let (to_child_r, to_child_w) = nix::unistd::pipe().context("pipe")?;
    let (to_parent_r, to_parent_w) = nix::unistd::pipe().context("pipe")?;
    ping_pong(ctx, (to_child_w, to_parent_r), (to_child_r, to_parent_w))
}

pub(super) fn unix(ctx: &TrialCtx) -> Result<TrialOutput> {
    use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
    let (parent, child) = socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::empty(),
    )
    .context("socketpair(AF_UNIX, SOCK_STREAM)")?;
    let parent2 = parent.try_clone().context("dup socket")?;
    let child2 = child.try_clone().context("dup socket")?;
    ping_pong(ctx, (parent, parent2), (child, child2))
}
