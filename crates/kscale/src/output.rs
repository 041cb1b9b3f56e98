//! Standard output for every command that prints. A reader that goes away
//! early (`kscale show | head`) closes the pipe; the write then fails with
//! EPIPE, and kscale stops printing and exits quietly with status 0 instead
//! of panicking the way `print!` does.

use std::io::Write;

/// The reader of standard output went away; `main` exits quietly.
#[derive(Debug, thiserror::Error)]
#[error("standard output was closed by its reader")]
pub struct Closed;

/// Writes `s` to standard output and flushes it.
pub fn print(s: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(s.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(Closed.into()),
        Err(e) => Err(anyhow::Error::new(e).context("writing to standard output")),
    }
}

/// `print!` that returns an error instead of panicking; use with `?`.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::print(&format!($($arg)*))
    };
}

/// `println!` that returns an error instead of panicking; use with `?`.
macro_rules! outln {
    () => {
        $crate::output::print("\n")
    };
    ($($arg:tt)*) => {
        $crate::output::print(&format!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use {out, outln};

/// How a command prints its result: `--format terminal|json|csv`. Defined
/// here, not in a command, so that it can become every command's one
/// format; `history` and `changes` use it first, while the older commands
/// keep their own enums until they are moved over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Tables and lines for a person.
    #[default]
    Terminal,
    /// One JSON document.
    Json,
    /// Comma-separated rows with a header.
    Csv,
}
