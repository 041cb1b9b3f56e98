//! A format-neutral table and its renderers.

/// comfy-table preset (19 components, see `TableComponent`): a top rule, a
/// header rule and a bottom rule, as the seed's slides draw their tables.
const RULES: &str = "  ──────     ──────";

use comfy_table::{Attribute, CellAlignment, Color, ContentArrangement};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tone {
    Plain,
    Good,
    Bad,
    Warn,
    Dim,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    pub text: String,
    pub tone: Tone,
}

impl Cell {
    pub fn new(text: impl Into<String>) -> Self {
        Cell {
            text: text.into(),
            tone: Tone::Plain,
        }
    }
    pub fn tone(text: impl Into<String>, tone: Tone) -> Self {
        Cell {
            text: text.into(),
            tone,
        }
    }
    /// A unit, an interval or a mark: what a reader's eye should pass over
    /// on the way to the value.
    pub fn dim(text: impl Into<String>) -> Self {
        Cell::tone(text, Tone::Dim)
    }
    /// An empty cell, where a column has nothing to say for a row.
    pub fn blank() -> Self {
        Cell::new("")
    }
}

impl From<String> for Cell {
    fn from(s: String) -> Self {
        Cell::new(s)
    }
}
impl From<&str> for Cell {
    fn from(s: &str) -> Self {
        Cell::new(s)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowKind {
    Data,
    /// A geometric-mean or other derived row.
    Summary,
    /// A heading inside the table ("Creations").
    Section,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub kind: RowKind,
    pub cells: Vec<Cell>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    pub title: String,
    pub headers: Vec<String>,
    pub rows: Vec<Row>,
    /// Lines printed under the table: legend, failures, notes.
    pub notes: Vec<String>,
}

impl Table {
    pub fn new(title: impl Into<String>, headers: Vec<String>) -> Self {
        Table {
            title: title.into(),
            headers,
            ..Default::default()
        }
    }
    pub fn push(&mut self, kind: RowKind, cells: Vec<Cell>) {
        self.rows.push(Row { kind, cells });
    }

    pub fn to_terminal(&self, color: bool) -> String {
        let mut t = comfy_table::Table::new();
        // Rules above and below the table and under the header, no inner lines.
        t.load_preset(RULES);
        t.set_content_arrangement(ContentArrangement::Disabled);
        t.set_header(
            self.headers
                .iter()
                .map(|h| comfy_table::Cell::new(h).add_attribute(Attribute::Bold)),
        );
        for row in &self.rows {
            let cells = row.cells.iter().enumerate().map(|(i, c)| {
                let mut cell = comfy_table::Cell::new(&c.text);
                if i > 0 {
                    cell = cell.set_alignment(CellAlignment::Right);
                }
                if row.kind != RowKind::Data {
                    cell = cell.add_attribute(Attribute::Bold);
                }
                if color {
                    cell = match c.tone {
                        Tone::Good => cell.fg(Color::Green),
                        Tone::Bad => cell.fg(Color::Red),
                        Tone::Warn => cell.fg(Color::Yellow),
                        Tone::Dim => cell.fg(Color::DarkGrey),
                        Tone::Plain => cell,
                    };
                }
                cell
            });
            t.add_row(cells);
        }
        if !color {
            t.force_no_tty();
        }
        let mut out = String::new();
        if !self.title.is_empty() {
            out.push_str(&self.title);
            out.push('\n');
        }
        out.push_str(&t.to_string());
        out.push('\n');
        for n in &self.notes {
            out.push_str(n);
            out.push('\n');
        }
        out
    }

    pub fn to_markdown(&self) -> String {
        let esc = |s: &str| s.replace('|', "\\|");
        let mut out = String::new();
        if !self.title.is_empty() {
            out.push_str(&format!("### {}\n\n", esc(&self.title)));
        }
        out.push_str(&format!(
            "| {} |\n",
            self.headers
                .iter()
                .map(|h| esc(h))
                .collect::<Vec<_>>()
                .join(" | ")
        ));
        let sep: Vec<&str> = (0..self.headers.len())
            .map(|i| if i == 0 { "---" } else { "---:" })
            .collect();
        out.push_str(&format!("| {} |\n", sep.join(" | ")));
        for row in &self.rows {
            let cells: Vec<String> = row
                .cells
                .iter()
                .map(|c| {
                    if row.kind == RowKind::Data || c.text.is_empty() {
                        esc(&c.text)
                    } else {
                        format!("**{}**", esc(&c.text))
                    }
                })
                .collect();
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        if !self.notes.is_empty() {
            out.push('\n');
            for n in &self.notes {
                out.push_str(&format!("{}  \n", esc(n)));
            }
        }
        out
    }

    /// An HTML `<table>`; tones become CSS classes the report styles.
    pub fn to_html(&self) -> String {
        let esc = crate::format::escape_html;
        let mut out = String::new();
        if !self.title.is_empty() {
            out.push_str(&format!("<h3>{}</h3>\n", esc(&self.title)));
        }
        out.push_str("<table>\n<thead><tr>");
        for h in &self.headers {
            out.push_str(&format!("<th>{}</th>", esc(h)));
        }
        out.push_str("</tr></thead>\n<tbody>\n");
        for row in &self.rows {
            let class = match row.kind {
                RowKind::Data => "",
                RowKind::Summary => " class=\"summary\"",
                RowKind::Section => " class=\"section\"",
            };
            out.push_str(&format!("<tr{class}>"));
            for c in &row.cells {
                let tone = match c.tone {
                    Tone::Plain => "",
                    Tone::Good => " class=\"good\"",
                    Tone::Bad => " class=\"bad\"",
                    Tone::Warn => " class=\"warn\"",
                    Tone::Dim => " class=\"dim\"",
                };
                out.push_str(&format!("<td{tone}>{}</td>", esc(&c.text)));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody>\n</table>\n");
        for n in &self.notes {
            out.push_str(&format!("<p class=\"note\">{}</p>\n", esc(n)));
        }
        out
    }

    /// CSV with a leading `table` column so several tables stack in one file.
    pub fn to_csv(&self, header: bool) -> String {
        let q = crate::format::csv_field;
        let mut out = String::new();
        if header {
            out.push_str(&format!(
                "table,{}\n",
                self.headers
                    .iter()
                    .map(|h| q(h))
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
        for row in &self.rows {
            out.push_str(&format!(
                "{},{}\n",
                q(&self.title),
                row.cells
                    .iter()
                    .map(|c| q(&c.text))
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        let mut t = Table::new("Latency", vec!["Case".into(), "A".into(), "B".into()]);
        t.push(
            RowKind::Data,
            vec![
                "null | x".into(),
                "1.0".into(),
                Cell::tone("2.0", Tone::Bad),
            ],
        );
        t.push(
            RowKind::Summary,
            vec!["Geometric mean".into(), "1.0".into(), "2.0".into()],
        );
        t.notes.push("legend".into());
        t
    }

    #[test]
    fn markdown_is_a_valid_pipe_table() {
        let md = sample().to_markdown();
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(lines[0], "### Latency");
        assert_eq!(lines[2], "| Case | A | B |");
        assert_eq!(lines[3], "| --- | ---: | ---: |");
        assert_eq!(lines[4], "| null \\| x | 1.0 | 2.0 |");
        assert_eq!(lines[5], "| **Geometric mean** | **1.0** | **2.0** |");
    }

    #[test]
    fn csv_quotes() {
        let csv = sample().to_csv(true);
        assert!(csv.starts_with("table,Case,A,B\n"));
        assert!(csv.contains("Latency,null | x,1.0,2.0"));
    }

    #[test]
    fn terminal_without_color_has_no_escapes() {
        let t = sample().to_terminal(false);
        assert!(!t.contains('\x1b'));
        assert!(t.contains("Geometric mean") && t.contains("legend"));
    }
}
