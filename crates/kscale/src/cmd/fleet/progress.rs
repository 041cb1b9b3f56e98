//! A remote run's progress read back: `kscale fleet` starts each remote run
//! with `KSCALE_PROGRESS=lines` (engine/progress.rs draws its bar as lines)
//! and parses those lines here into its own multi-line display.

pub use crate::engine::progress::PREFIX;

/// A progress line read back: `Some((pos, len, message))`, or `None` for
/// a line that is a message of its own (a failed case).
pub fn parse(line: &str) -> Option<(u64, u64, String)> {
    let (counts, msg) = line.split_once(' ').unwrap_or((line, ""));
    let (pos, len) = counts.split_once('/')?;
    Some((pos.parse().ok()?, len.parse().ok()?, msg.trim().to_string()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn lines_parse() {
        assert_eq!(
            super::parse("3/12 syscall.null [cpus 1] trial 2"),
            Some((3, 12, "syscall.null [cpus 1] trial 2".into()))
        );
        assert_eq!(super::parse("  syscall.null [cpus 1] failed: x"), None);
        assert_eq!(super::parse("0/4"), Some((0, 4, String::new())));
    }
}
