//! One JSON document, for other tools.

use super::Exporter;
use kscale_report::Table;
use serde::Serialize;
use serde_json::json;

/// Pretty-printed JSON ending in a newline.
pub struct Json;

impl Json {
    /// A command's own structure: its JSON is a documented interface, so
    /// it is written as the command built it, field order and all.
    pub fn document<D: Serialize + ?Sized>(&self, document: &D) -> anyhow::Result<String> {
        Ok(serde_json::to_string_pretty(document)? + "\n")
    }
}

impl Exporter for Json {
    /// Tables as data, each its title, headers, rows of cell text and
    /// notes, for a command whose only structure is its tables.
    fn tables(&self, tables: &[Table]) -> String {
        let tables: Vec<serde_json::Value> = tables
            .iter()
            .map(|t| {
                let rows: Vec<Vec<&str>> = t
                    .rows
                    .iter()
                    .map(|r| r.cells.iter().map(|c| c.text.as_str()).collect())
                    .collect();
                json!({
                    "title": t.title,
                    "headers": t.headers,
                    "rows": rows,
                    "notes": t.notes,
                })
            })
            .collect();
        // A `Value` always serializes; `{:#}` is its pretty form.
        format!("{:#}\n", serde_json::Value::Array(tables))
    }
}
