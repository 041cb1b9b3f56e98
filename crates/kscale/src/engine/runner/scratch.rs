//! The run's scratch directory, and the removal of those that runs killed
//! before they could remove their own (docs/method.md, "Execution model").

use anyhow::{Context, Result};

/// The run's scratch directory in `dir`, after removing those of runs
/// killed before they could, here and in the places a run that moved its
/// file cases worked in ([`crate::engine::plan::settling_places`]): a run
/// SIGKILLed in `/dev/shm` left its scratch there for whichever run next
/// moved there.
pub(super) fn scratch_dir(dir: &std::path::Path) -> Result<tempfile::TempDir> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    remove_stale_scratch(dir);
    for place in crate::engine::plan::settling_places() {
        if place != dir {
            remove_stale_scratch(&place);
        }
    }
    tempfile::Builder::new()
        .prefix(&format!("{SCRATCH_PREFIX}{}-", std::process::id()))
        .tempdir_in(dir)
        .with_context(|| format!("cannot create a scratch directory in {}", dir.display()))
}

const SCRATCH_PREFIX: &str = ".kscale-tmp-";

/// A run killed with SIGKILL cannot remove its scratch directory; the next
/// run in the same place does, once the owning process is gone.
fn remove_stale_scratch(dir: &std::path::Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(SCRATCH_PREFIX) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        if !kscale_sys::process::alive(pid) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}
