//! A run's progress bar: drawn on the terminal for a person, or, when
//! `KSCALE_PROGRESS=lines` asks for it, as `kscale-progress: POS/LEN MESSAGE`
//! lines on standard error for a program to read (`kscale fleet` starts
//! each remote run so and draws the lines into its own display). Off a
//! terminal, without `--no-progress`, a `kscale: progress …` line every
//! 30 s says a long run is alive and how far it is.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle, TermLike};
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// `45 s`, `12 min`, `2.3 h`.
pub fn duration(s: f64) -> String {
    if s < 90.0 {
        format!("{s:.0} s")
    } else if s < 5400.0 {
        format!("{:.0} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}

/// The run's bar: line mode when the environment asks for it, else drawn
/// on stderr when `show`, else hidden. `eta`: indicatif's estimate from
/// the trials' rate, for a run whose trials cost alike; a run without a
/// budget says its own in the message instead (the runner's
/// [`kscale_core::ahead`]), since its macro trials cost twenty times its
/// micro ones.
pub fn bar(show: bool, len: u64, eta: bool) -> ProgressBar {
    if let Some(bar) = line_bar(len) {
        return bar;
    }
    if !show && !SILENT.load(Ordering::Relaxed) && !std::io::stderr().is_terminal() {
        return periodic_bar(len, eta);
    }
    let bar = ProgressBar::with_draw_target(
        Some(len),
        if show {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        },
    );
    bar.set_style(
        ProgressStyle::with_template(if eta {
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} trials  ETA {eta}  {msg}"
        } else {
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} trials  {msg}"
        })
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// `--no-progress` was given: no bar, and no periodic lines either.
static SILENT: AtomicBool = AtomicBool::new(false);

/// Says that the user asked for no progress at all.
pub fn silence() {
    SILENT.store(true, Ordering::Relaxed);
}

/// Seconds between two progress lines off a terminal: a log or a CI job
/// shows the run is alive and how far it is, without a line per trial.
pub const EVERY_S: u64 = 30;

/// When the last periodic line was written (or the first bar made): one
/// clock for the whole process, whose runs make several bars (a capacity
/// search's steps).
static LAST: Mutex<Option<Instant>> = Mutex::new(None);

/// Off a terminal: a `kscale: progress …` line at most every
/// [`EVERY_S`] seconds.
fn periodic_bar(len: u64, eta: bool) -> ProgressBar {
    if let Ok(mut last) = LAST.lock() {
        last.get_or_insert_with(Instant::now);
    }
    let target = ProgressDrawTarget::term_like_with_hz(
        Box::new(Lines {
            prefix: "kscale: progress ",
            every: Some(Duration::from_secs(EVERY_S)),
            ..Lines::default()
        }),
        1,
    );
    let bar = ProgressBar::with_draw_target(Some(len), target);
    bar.set_style(
        ProgressStyle::with_template(if eta {
            "[{elapsed_precise}] {pos}/{len} trials, ETA {eta}: {msg}"
        } else {
            "[{elapsed_precise}] {pos}/{len} trials: {msg}"
        })
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(Duration::from_secs(1));
    bar
}

pub const ENV: &str = "KSCALE_PROGRESS";
pub const PREFIX: &str = "kscale-progress: ";

/// The run's bar in line mode, when the environment asks for it.
pub fn line_bar(len: u64) -> Option<ProgressBar> {
    if std::env::var(ENV).ok()? != "lines" {
        return None;
    }
    let target = ProgressDrawTarget::term_like_with_hz(
        Box::new(Lines {
            prefix: PREFIX,
            ..Lines::default()
        }),
        2,
    );
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
    prefix: &'static str,
    /// At most one line this often ([`LAST`]); `None`: every change.
    every: Option<Duration>,
    pending: Mutex<String>,
    last: Mutex<String>,
}

impl Lines {
    fn emit(&self, s: &str) -> std::io::Result<()> {
        let s = s.trim_end();
        if s.is_empty() {
            return Ok(());
        }
        if let Some(every) = self.every {
            let Ok(mut at) = LAST.lock() else {
                return Ok(());
            };
            if at.is_some_and(|t| t.elapsed() < every) {
                return Ok(());
            }
            *at = Some(Instant::now());
        }
        if let Ok(mut last) = self.last.lock() {
            if *last == s {
                return Ok(());
            }
            *last = s.to_string();
        }
        let mut err = std::io::stderr().lock();
        writeln!(err, "{}{s}", self.prefix)?;
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
