//! Markdown tables, for a report or an issue.

use super::Exporter;
use kscale_report::Table;

/// Markdown tables a blank line apart.
pub struct Markdown;

impl Exporter for Markdown {
    fn tables(&self, tables: &[Table]) -> String {
        tables
            .iter()
            .map(Table::to_markdown)
            .collect::<Vec<_>>()
            .join("\n")
    }
}
