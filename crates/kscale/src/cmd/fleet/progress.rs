//! Progress as lines, for a run whose progress is read by a program rather
//! than a person: `kscale fleet` starts each remote run with
//! `KSCALE_PROGRESS=lines`, and the run's progress bar is drawn as
//! `kscale-progress: POS/LEN MESSAGE` lines on standard error, which the
//! fleet reads through ssh and draws into its own multi-line display.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle, TermLike};
use std::io::Write;
use std::sync::Mutex;

pub const ENV: &str = "KSCALE_PROGRESS";
pub const PREFIX: &str = "kscale-progress: ";

/// The run's bar in line mode, when the environment asks for it.
pub fn line_bar(len: u64) -> Option<ProgressBar> {
    if std::env::var(ENV).ok()? != "lines" {
        return None;
    }
    let target = ProgressDrawTarget::term_like_with_hz(Box::new(Lines::default()), 2);
    let bar = ProgressBar::with_draw_target(Some(len), target);
    bar.set_style(
        ProgressStyle::with_template("{pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    Some(bar)
}

/// A terminal that has no cursor: every drawn line is written once, whole.
#[derive(Debug, Default)]
struct Lines {
    pending: Mutex<String>,
    last: Mutex<String>,
}

impl Lines {
    fn emit(&self, s: &str) -> std::io::Result<()> {
        let s = s.trim_end();
        if s.is_empty() {
            return Ok(());
        }
        if let Ok(mut last) = self.last.lock() {
            if *last == s {
                return Ok(());
            }
            *last = s.to_string();
        }
        let mut err = std::io::stderr().lock();
        writeln!(err, "{PREFIX}{s}")?;
        err.flush()
    }
}

impl TermLike for Lines {
    fn width(&self) -> u16 {
        200
    }
    fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn write_line(&self, s: &str) -> std::io::Result<()> {
        let pending = self
            .pending
            .lock()
            .map(|mut p| std::mem::take(&mut *p))
            .unwrap_or_default();
        self.emit(&(pending + s))
    }
    fn write_str(&self, s: &str) -> std::io::Result<()> {
        if let Ok(mut p) = self.pending.lock() {
            p.push_str(s);
        }
        Ok(())
    }
    fn clear_line(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn flush(&self) -> std::io::Result<()> {
        let pending = self
            .pending
            .lock()
            .map(|mut p| std::mem::take(&mut *p))
            .unwrap_or_default();
        self.emit(&pending)
    }
}

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
