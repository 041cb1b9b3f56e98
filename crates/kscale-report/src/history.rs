//! The history report (`kscale report --history`, docs/history.md): each
//! case's series of runs as a chart with its change points marked, and the
//! changes as a table under it — what `kscale history` and `kscale changes`
//! print, drawn. The binary reads the series and finds the changes; this
//! module only lays them out, so the report shows exactly the changes the
//! gate judged.

use crate::format::{p_value, sig, signed_pct};
use crate::html::{Block, Report, Section};
use crate::svg::{ChangeMark, Chart, HistoryChart, Level, Point, RunPoint, Uncertainty};
use crate::table::{Cell, RowKind, Table, Tone};
use kscale_core::changes::{Change, Settings};
use kscale_core::Direction;
use kscale_store::series::SeriesRun;

/// One run of a series, its result as `kscale history` shows it (and,
/// flattened, as its JSON prints it).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct HistoryPoint {
    pub run: SeriesRun,
    pub value: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    /// Counted trials.
    pub n: usize,
    pub converged: bool,
}

/// One case across runs, in the order asked, and its change points.
#[derive(Clone, Debug, PartialEq)]
pub struct HistorySeries {
    /// The case: `mem.rd size=4k [1]`.
    pub title: String,
    pub metric: String,
    pub unit: String,
    pub direction: Direction,
    /// Of every interval, in percent.
    pub confidence_pct: f64,
    pub points: Vec<HistoryPoint>,
    /// Indices into `points`, in run order.
    pub changes: Vec<Change>,
}

/// What the whole report is of.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HistoryHeading {
    /// The selection as asked: `syscall.null --cpus 1`.
    pub selection: String,
    /// What the runs are sorted by: `start time`.
    pub order: String,
    pub kscale_version: String,
}

/// `#21 nightly-20 (2025-01-21, 6.20.0)`: which run, when, on what.
/// The cells that open a row about one run in every history table: `#id`,
/// when it started, its label and its kernel, so that `history`'s table
/// and the report's change points name a run alike.
pub fn run_cells(run: &SeriesRun) -> [Cell; 4] {
    [
        Cell::new(format!("#{}", run.id)),
        Cell::new(
            run.started_at
                .replace('T', " ")
                .trim_end_matches('Z')
                .to_string(),
        ),
        Cell::new(run.label.clone()),
        Cell::new(match (&run.kernel, &run.vm) {
            (Some(k), Some(vm)) => format!("{k} ({vm})"),
            (Some(k), None) => k.clone(),
            (None, _) => "–".into(),
        }),
    ]
}

/// The headings of [`run_cells`], the first naming what the run is to the
/// table.
pub fn run_headings(first: &str) -> [String; 4] {
    [
        first.into(),
        "started".into(),
        "label".into(),
        "kernel".into(),
    ]
}

fn run_words(r: &SeriesRun) -> String {
    let day = r.started_at.get(..10).unwrap_or(&r.started_at);
    match &r.kernel {
        Some(k) => format!("#{} {} ({day}, {k})", r.id, r.label),
        None => format!("#{} {} ({day})", r.id, r.label),
    }
}

impl HistorySeries {
    fn unit_suffix(&self) -> String {
        if self.unit.is_empty() {
            String::new()
        } else {
            format!(" {}", self.unit)
        }
    }

    /// `latency (µs)`, or the metric alone when it has no unit.
    fn metric_with_unit(&self) -> String {
        if self.unit.is_empty() {
            self.metric.clone()
        } else {
            format!("{} ({})", self.metric, self.unit)
        }
    }

    /// The level of each stretch between change points: the change's own
    /// segment means, so the chart shows the levels the table compares.
    pub fn levels(&self) -> Vec<Level> {
        let n = self.points.len();
        if n == 0 {
            return Vec::new();
        }
        if self.changes.is_empty() {
            let mean = self.points.iter().map(|p| p.value).sum::<f64>() / n as f64;
            return vec![Level {
                from: 0,
                to: n,
                value: mean,
            }];
        }
        let mut out = Vec::new();
        let mut from = 0;
        for (i, c) in self.changes.iter().enumerate() {
            out.push(Level {
                from,
                to: c.at,
                value: if i == 0 {
                    c.before
                } else {
                    self.changes[i - 1].after
                },
            });
            from = c.at;
        }
        if let Some(last) = self.changes.last() {
            out.push(Level {
                from,
                to: n,
                value: last.after,
            });
        }
        out
    }

    /// What a change reads as, in the marker's tooltip.
    fn change_words(&self, c: &Change) -> String {
        let worse = c.worse(self.direction);
        let run = self
            .points
            .get(c.at)
            .map(|p| run_words(&p.run))
            .unwrap_or_default();
        format!(
            "change before run {run}: {} → {}{} ({}, {} [{}, {}]), p {}, {}",
            sig(c.before, 4),
            sig(c.after, 4),
            self.unit_suffix(),
            if worse > 0.0 { "worse" } else { "better" },
            signed_pct(100.0 * c.rel),
            signed_pct(100.0 * c.rel_low),
            signed_pct(100.0 * c.rel_high),
            p_value(c.p),
            self.fate(c),
        )
    }

    fn fate(&self, c: &Change) -> String {
        match c.reverted_at.and_then(|i| self.points.get(i)) {
            Some(p) => format!("reverted at run #{}", p.run.id),
            None => "persistent".into(),
        }
    }

    /// The chart: every run's result with its interval, the levels and
    /// the change points; `order` names what the runs are sorted by.
    pub fn chart(&self, order: &str) -> HistoryChart {
        let n = self.points.len();
        let changes = self
            .changes
            .iter()
            .filter_map(|c| {
                let p = self.points.get(c.at)?;
                Some(ChangeMark {
                    at: c.at,
                    run: p.run.id,
                    label: format!("#{}", p.run.id),
                    tip: self.change_words(c),
                })
            })
            .collect();
        HistoryChart {
            title: format!(
                "{} — {}: {n} run{}, {} change point{}",
                self.title,
                self.metric,
                if n == 1 { "" } else { "s" },
                self.changes.len(),
                if self.changes.len() == 1 { "" } else { "s" },
            ),
            x_label: format!("runs by {order}, 1 to {n}"),
            y_label: if self.unit.is_empty() {
                self.metric.clone()
            } else {
                format!(
                    "{} ({}, {} is better)",
                    self.metric, self.unit, self.direction
                )
            },
            runs: self
                .points
                .iter()
                .map(|p| RunPoint {
                    run: p.run.id,
                    what: format!("{}:", run_words(&p.run)),
                    point: Point::new(p.value, p.ci_low, p.ci_high, p.converged)
                        .with_label(format!("{} trials", p.n)),
                })
                .collect(),
            levels: self.levels(),
            changes,
            uncertainty: Uncertainty {
                interval: format!(
                    "the run's {}% interval, as kscale history shows it",
                    self.confidence_pct
                ),
                hollow: "the case did not converge in that run".into(),
            },
        }
    }

    /// The changes under the chart, in run order.
    pub fn changes_table(&self) -> Table {
        let n = self.points.len();
        let mut t = Table::new(
            format!("Change points — {}", self.title),
            run_headings("first run after")
                .into_iter()
                .chain(
                    [
                        "in series",
                        &match self.unit.as_str() {
                            "" => "before → after".to_string(),
                            u => format!("before → after ({u})"),
                        },
                        "change",
                        &format!("{}% interval", self.confidence_pct),
                        "p",
                        "trials",
                        "fate",
                    ]
                    .map(String::from),
                )
                .collect(),
        );
        for c in &self.changes {
            let Some(p) = self.points.get(c.at) else {
                continue;
            };
            let worse = c.worse(self.direction);
            let tone = if worse > 0.0 { Tone::Bad } else { Tone::Good };
            let mut row = run_cells(&p.run).to_vec();
            row.extend([
                Cell::new(format!("{} of {n}", c.at + 1)),
                Cell::new(format!("{} → {}", sig(c.before, 4), sig(c.after, 4))),
                Cell::tone(signed_pct(100.0 * c.rel), tone),
                Cell::new(format!(
                    "[{}, {}]",
                    signed_pct(100.0 * c.rel_low),
                    signed_pct(100.0 * c.rel_high)
                )),
                Cell::new(p_value(c.p)),
                Cell::new(
                    c.trials
                        .map(|s| format!("{} p {}", s.test.name(), p_value(s.p)))
                        .unwrap_or_else(|| "–".into()),
                ),
                Cell::new(self.fate(c)),
            ]);
            t.push(RowKind::Data, row);
        }
        let min = Settings::default().min_runs;
        if self.changes.is_empty() {
            t.notes.push(format!(
                "No change point in these {n} runs (a change needs at least {min} runs on each side)."
            ));
        }
        t.notes.push(format!(
            "Before → after: the mean of the runs from the change before (or the first run) to \
             this one, and from this one to the next (or the last run), with the Welch interval \
             of the change; p: the permutation test that found it; trials: the two-sample test \
             on the trials of the {} runs either side (docs/history.md).",
            Settings::default().confirm_runs
        ));
        t
    }
}

/// Every series as a section: its chart, then its change points.
pub fn build(series: &[HistorySeries], heading: &HistoryHeading) -> Report {
    let runs: std::collections::BTreeSet<i64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.run.id))
        .collect();
    let mut report = Report {
        title: format!("kscale history — {}", heading.selection),
        subtitle: format!(
            "{} case{} over {} run{}, by {}; generated by kscale {}",
            series.len(),
            if series.len() == 1 { "" } else { "s" },
            runs.len(),
            if runs.len() == 1 { "" } else { "s" },
            heading.order,
            heading.kscale_version
        ),
        sections: Vec::new(),
    };
    report.sections.push(overview(series));
    for (i, s) in series.iter().enumerate() {
        report.sections.push(Section {
            id: format!("series-{}", i + 1),
            title: format!("{} — {}", s.title, s.metric),
            intro: None,
            blocks: vec![
                Block::Charts(vec![Chart::History(s.chart(&heading.order))]),
                Block::Table(s.changes_table()),
            ],
        });
    }
    report
}

/// One line per series: its runs, its change points and the largest
/// worsening among the persistent ones.
fn overview(series: &[HistorySeries]) -> Section {
    let mut t = Table::new(
        "",
        [
            "case",
            "metric",
            "runs",
            "change points",
            "worst persistent",
        ]
        .map(String::from)
        .to_vec(),
    );
    for s in series {
        let worst = s
            .changes
            .iter()
            .filter(|c| c.persistent())
            .map(|c| c.worse(s.direction))
            .fold(None, |w: Option<f64>, x| Some(w.map_or(x, |w| w.max(x))));
        t.push(
            RowKind::Data,
            vec![
                Cell::new(s.title.clone()),
                Cell::new(s.metric_with_unit()),
                Cell::new(s.points.len().to_string()),
                Cell::new(s.changes.len().to_string()),
                match worst {
                    Some(w) if w > 0.0 => {
                        Cell::tone(format!("{} % worse", sig(100.0 * w, 3)), Tone::Bad)
                    }
                    Some(w) => Cell::tone(format!("{} % better", sig(-100.0 * w, 3)), Tone::Good),
                    None => Cell::tone("–", Tone::Dim),
                },
            ],
        );
    }
    Section {
        id: "cases".into(),
        title: "Cases".into(),
        intro: Some(
            "Each case's result over the stored runs, one point per run with its interval; the \
             dashed lines are the change points that kscale changes finds, the horizontal steps \
             the mean level between them (docs/history.md)."
                .into(),
        ),
        blocks: vec![Block::Table(t)],
    }
}
