//! Tables for a person at a terminal.

use super::Exporter;
use kscale_report::Table;

/// Tables a blank line apart, in colour where `color` says.
pub struct Terminal {
    /// Whether the tables' tones are coloured; the caller decides, since
    /// `run` and `show` print to a terminal and tests read the same text.
    pub color: bool,
}

impl Exporter for Terminal {
    fn tables(&self, tables: &[Table]) -> String {
        tables
            .iter()
            .map(|t| t.to_terminal(self.color))
            .collect::<Vec<_>>()
            .join("\n")
    }
}
