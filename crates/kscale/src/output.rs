//! Standard output for every command that prints. A reader that goes away
//! early (`kscale show | head`) closes the pipe; the write then fails with
//! EPIPE, and kscale stops printing and exits quietly with status 0 instead
//! of panicking the way `print!` does.
//!
//! Also what every command's `--format` means: the one [`Format`] they all
//! take, and one [`Exporter`] a format (a file each below `output/`) that
//! turns a command's tables or its own structure into that format's text.

mod csv;
mod json;
mod markdown;
mod terminal;

pub use csv::{record as csv_record, Csv};
pub use json::Json;
pub use markdown::Markdown;
pub use terminal::Terminal;

use crate::error::user;
use kscale_report::Table;
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

/// Colour only on a terminal and only when NO_COLOR is unset.
pub fn use_color() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

/// How a command prints its result: `--format terminal|json|csv|md`. One
/// enum for every command, so that a format is spelled and described the
/// same everywhere; a command that cannot write one refuses it with
/// [`Format::accepted`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Tables and lines for a person.
    #[default]
    // `cpus` and `list` called it `text`; scripts that say so still work.
    #[value(alias = "text")]
    Terminal,
    /// One JSON document.
    Json,
    /// Comma-separated rows with a header.
    Csv,
    /// Markdown tables.
    Md,
}

impl Format {
    /// `self`, if it is one of the formats `command` `writes`; else bad
    /// input naming them. clap offers every format to every command, so
    /// each command says here, before it does any work, which it can write.
    pub fn accepted(self, command: &str, writes: &[Format]) -> anyhow::Result<Format> {
        if writes.contains(&self) {
            return Ok(self);
        }
        let names: Vec<String> = writes.iter().map(|f| f.name()).collect();
        let list = match names.split_last() {
            Some((last, [])) => last.to_string(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => "nothing".to_string(),
        };
        Err(user(format!(
            "bad --format `{}`: kscale {command} writes {list}",
            self.name()
        )))
    }

    /// The name `--format` takes, as clap spells it.
    fn name(self) -> String {
        use clap::ValueEnum;
        self.to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_default()
    }

    /// The exporter that writes this format; the terminal's is in colour
    /// when standard output is a terminal that wants it ([`use_color`]).
    pub fn exporter(self) -> Box<dyn Exporter> {
        match self {
            Format::Terminal => Box::new(Terminal { color: use_color() }),
            Format::Json => Box::new(Json),
            Format::Csv => Box::new(Csv),
            Format::Md => Box::new(Markdown),
        }
    }
}

/// Turns a command's tables into the text of one format, one
/// implementation a format (hyperfine's `Exporter` is the model), so that
/// every command lays a format out the same way. A command's own
/// structure, which is what its JSON is, goes through [`Json::document`].
pub trait Exporter {
    /// `tables`, one after another.
    fn tables(&self, tables: &[Table]) -> String;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_format_names_what_the_command_writes() {
        let two = [Format::Terminal, Format::Json];
        assert_eq!(Format::Json.accepted("cpus", &two).ok(), Some(Format::Json));
        let e = Format::Csv
            .accepted("cpus", &two)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("bad --format `csv`: kscale cpus writes terminal or json")
        );
        let three = [Format::Terminal, Format::Md, Format::Csv];
        let e = Format::Json
            .accepted("show", &three)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("bad --format `json`: kscale show writes terminal, md or csv")
        );
    }

    /// Two small tables, the second with a cell CSV must quote.
    fn two_tables() -> Vec<Table> {
        use kscale_report::{Cell, RowKind};
        let mut a = Table::new("first", vec!["case".into(), "mean".into()]);
        a.push(RowKind::Data, vec![Cell::new("x"), Cell::new("1.5")]);
        let mut b = Table::new("second", vec!["case".into(), "mean".into()]);
        b.push(RowKind::Data, vec![Cell::new("y, z"), Cell::new("2")]);
        vec![a, b]
    }

    #[test]
    fn text_formats_put_a_blank_line_between_tables_and_csv_one_header() {
        let t = two_tables();
        let (a, b) = (&t[0], &t[1]);
        let terminal = Terminal { color: false }.tables(&t);
        assert_eq!(
            terminal,
            format!("{}\n{}", a.to_terminal(false), b.to_terminal(false))
        );
        let md = Markdown.tables(&t);
        assert_eq!(md, format!("{}\n{}", a.to_markdown(), b.to_markdown()));
        assert_eq!(
            Csv.tables(&t),
            "table,case,mean\nfirst,x,1.5\nsecond,\"y, z\",2\n"
        );
        assert_eq!(Csv.tables(&[]), "");
    }

    #[test]
    fn json_keeps_a_commands_field_order() {
        #[derive(serde::Serialize)]
        struct Doc {
            zeta: u8,
            alpha: &'static str,
        }
        let text = Json
            .document(&Doc {
                zeta: 1,
                alpha: "a",
            })
            .ok();
        assert_eq!(
            text.as_deref(),
            Some("{\n  \"zeta\": 1,\n  \"alpha\": \"a\"\n}\n")
        );
        let tables: serde_json::Value =
            serde_json::from_str(&Json.tables(&two_tables())).unwrap_or_default();
        assert_eq!(tables[1]["rows"][0][0], "y, z");
        assert_eq!(tables[0]["headers"][1], "mean");
    }

    #[test]
    fn csv_records_quote_what_needs_it() {
        assert_eq!(
            csv_record(&["a".into(), "b,c".into(), "say \"hi\"".into()]),
            "a,\"b,c\",\"say \"\"hi\"\"\"\n"
        );
    }

    #[test]
    fn text_is_still_the_terminal() {
        use clap::ValueEnum;
        assert_eq!(Format::from_str("text", false).ok(), Some(Format::Terminal));
    }
}
