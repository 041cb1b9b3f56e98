//! Comma-separated rows for a spreadsheet or a script.

use super::Exporter;
use kscale_report::format::csv_field;
use kscale_report::Table;

/// Tables stacked in one file under one header row: each row names its
/// table in a leading column, so the file stays one table for a reader.
pub struct Csv;

impl Exporter for Csv {
    fn tables(&self, tables: &[Table]) -> String {
        tables
            .iter()
            .enumerate()
            .map(|(i, t)| t.to_csv(i == 0))
            .collect()
    }
}

/// One CSV line of `fields`, quoted where they need it: for the commands
/// whose CSV is their own rows rather than their tables (`export`,
/// `history`, `changes`).
pub fn record(fields: &[String]) -> String {
    let mut line = fields
        .iter()
        .map(|f| csv_field(f))
        .collect::<Vec<_>>()
        .join(",");
    line.push('\n');
    line
}
