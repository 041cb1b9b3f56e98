//! The one thing the runner asks of a load generator, wherever it runs:
//! a local role process (roles.rs) or a `kscale peer` (peers.rs).

use kscale_workloads::roles::RoleLine;
use std::time::Instant;

/// A load generator, local or on a peer: the parent only sends it control
/// lines and reads its lines.
pub trait LoadHandle {
    fn send(&mut self, cmd: &str);
    fn next_line(&mut self, deadline: Instant) -> Result<RoleLine, String>;
    /// `local` or the peer's address.
    fn host(&self) -> String;
}
