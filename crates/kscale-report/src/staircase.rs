//! A tuning study's staircase (docs/tune.md), in the style of seed 004's
//! NetBench figure: one bar per cumulative step, each labelled with its
//! gain over the step before, the rationale of every step in the legend.
//! Gains are signed so that a positive one is an improvement whichever way
//! the metric points, and Welch's test marks with `~` the steps whose
//! change is within the noise.

use crate::format::sig;
use crate::html::{Block, Section};
use crate::svg::{Chart, Column, ColumnChart, Point, Uncertainty};
use crate::table::{Cell, RowKind, Table, Tone};
use crate::Catalog;
use kscale_core::{Direction, Welch};
use kscale_store::RunData;

/// Welch's significance level for a step's change.
const ALPHA: f64 = 0.05;

/// One step of a stored study, as the binary hands it over.
#[derive(Clone, Debug)]
pub struct StepData {
    pub name: String,
    pub rationale: String,
    pub settings: Vec<String>,
    pub run: Option<RunData>,
    pub error: Option<String>,
}

/// A gain in percent (positive = better) and whether Welch finds it real.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gain {
    pub pct: f64,
    pub significant: bool,
}

impl Gain {
    fn of(from: &[f64], to: &[f64], higher_better: bool) -> Option<Gain> {
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        if from.is_empty() || to.is_empty() {
            return None;
        }
        let (a, b) = (mean(from), mean(to));
        let ratio = if higher_better { b / a } else { a / b };
        if !ratio.is_finite() {
            return None;
        }
        Some(Gain {
            pct: (ratio - 1.0) * 100.0,
            significant: Welch::test(from, to).is_some_and(|w| w.significant(ALPHA)),
        })
    }
    pub fn label(&self) -> String {
        format!(
            "{}{:+.1} %",
            if self.significant { "" } else { "~" },
            self.pct
        )
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    pub name: String,
    pub rationale: String,
    pub settings: Vec<String>,
    pub mean: Option<f64>,
    pub ci: Option<(f64, f64)>,
    pub vs_prev: Option<Gain>,
    pub vs_base: Option<Gain>,
    pub error: Option<String>,
    /// Finished by its run rule (converged, or its median-of-N measured).
    pub settled: bool,
}

/// One case of the target measured through every step.
#[derive(Clone, Debug, PartialEq)]
pub struct Staircase {
    pub title: String,
    pub metric: String,
    pub unit: String,
    pub higher_better: bool,
    /// The baseline, each step, and (last) the baseline measured again.
    pub bars: Vec<Bar>,
    /// The re-measured baseline against the first, when both were measured.
    pub drift: Option<Gain>,
}

/// Staircases of a study: one per case of the target (cases are matched
/// by position, since a step may change a param and so the case's name).
pub fn build(steps: &[StepData], cat: &dyn Catalog) -> Vec<Staircase> {
    let Some(base) = steps.iter().find_map(|s| s.run.as_ref()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, bc) in base.cases.iter().enumerate() {
        let Some(m) = bc.primary() else { continue };
        let info = cat.workload(&bc.key.workload);
        let order = info.as_ref().map(|w| w.param_order()).unwrap_or_default();
        let params = bc.key.params_label(&order);
        let title = format!(
            "{}{}{} [cpus {}]: {} by step",
            bc.key.workload,
            if params.is_empty() { "" } else { " " },
            params,
            bc.key.cpus,
            m.name
        );
        let higher = m.direction == Direction::Higher;
        let mut bars: Vec<Bar> = Vec::new();
        let mut values: Vec<Option<Vec<f64>>> = Vec::new();
        for s in steps {
            let case = s.run.as_ref().and_then(|r| r.cases.get(i));
            let v = case.map(|c| c.values(&m.name)).filter(|v| !v.is_empty());
            let summary = case
                .filter(|_| v.is_some())
                .map(|c| c.summary(&m.name, 95.0));
            let error = s.error.clone().or_else(|| {
                case.and_then(|c| c.error.clone()).or_else(|| {
                    s.run
                        .as_ref()
                        .and(case)
                        .is_none()
                        .then(|| "not measured".into())
                })
            });
            let prev = values.iter().rev().flatten().next();
            let first = values.first().and_then(|x| x.as_ref());
            bars.push(Bar {
                name: s.name.clone(),
                rationale: s.rationale.clone(),
                settings: s.settings.clone(),
                mean: summary.map(|x| x.mean),
                ci: summary
                    .filter(|x| x.ci_low.is_finite() && x.ci_high.is_finite())
                    .map(|x| (x.ci_low, x.ci_high)),
                vs_prev: match (prev, &v) {
                    (Some(p), Some(v)) if !values.is_empty() => Gain::of(p, v, higher),
                    _ => None,
                },
                vs_base: match (first, &v) {
                    (Some(b), Some(v)) => Gain::of(b, v, higher),
                    _ => None,
                },
                error: if v.is_some() { None } else { error },
                settled: case.is_some_and(|c| c.settled()),
            });
            values.push(v);
        }
        let drift = match (values.first(), values.last()) {
            (Some(Some(a)), Some(Some(b))) if values.len() > 1 => Gain::of(a, b, higher),
            _ => None,
        };
        out.push(Staircase {
            title,
            metric: m.name.clone(),
            unit: m.unit.clone(),
            higher_better: higher,
            bars,
            drift,
        });
    }
    out
}

/// What the drift check says, in one sentence.
pub fn drift_note(s: &Staircase) -> Option<String> {
    let d = s.drift?;
    Some(if d.significant {
        format!(
            "Drift: the baseline measured again after the steps differs from the first by {:+.1} % (Welch, α = {ALPHA}): read the gains with that much doubt, or re-run on a quieter machine.",
            d.pct
        )
    } else {
        format!(
            "No significant drift: the baseline measured again is within the noise of the first ({:+.1} %).",
            d.pct
        )
    })
}

/// The study's table for one case: a row per step.
pub fn table(s: &Staircase) -> Table {
    let mut t = Table::new(
        s.title.clone(),
        vec![
            "#".into(),
            "step".into(),
            format!("{} ({})", s.metric, s.unit),
            "± CI".into(),
            "vs previous".into(),
            "vs baseline".into(),
        ],
    );
    let gain_cell = |g: Option<Gain>| match g {
        None => Cell::new("–"),
        Some(g) if !g.significant => Cell::tone(g.label(), Tone::Dim),
        Some(g) if g.pct >= 0.0 => Cell::tone(g.label(), Tone::Good),
        Some(g) => Cell::tone(g.label(), Tone::Bad),
    };
    for (i, b) in s.bars.iter().enumerate() {
        let (value, ci) = match (b.mean, &b.error) {
            (Some(m), _) if !b.settled => (
                Cell::tone(format!("{} NOT CONVERGED", sig(m, 4)), Tone::Warn),
                Cell::new(b.ci.map_or("–".into(), |(lo, hi)| {
                    format!("±{}", sig((hi - lo) / 2.0, 2))
                })),
            ),
            (Some(m), _) => (
                Cell::new(sig(m, 4)),
                Cell::new(b.ci.map_or("–".into(), |(lo, hi)| {
                    format!("±{}", sig((hi - lo) / 2.0, 2))
                })),
            ),
            (None, Some(_)) => (Cell::tone("failed", Tone::Bad), Cell::new("")),
            (None, None) => (Cell::new("–"), Cell::new("")),
        };
        t.push(
            if i == 0 || i + 1 == s.bars.len() {
                RowKind::Summary
            } else {
                RowKind::Data
            },
            vec![
                Cell::new(i.to_string()),
                Cell::new(b.name.clone()),
                value,
                ci,
                // The last row is the drift check: only its distance
                // from the first baseline means anything.
                if i == 0 || i + 1 == s.bars.len() {
                    Cell::new("")
                } else {
                    gain_cell(b.vs_prev)
                },
                if i == 0 {
                    Cell::new("")
                } else {
                    gain_cell(b.vs_base)
                },
            ],
        );
    }
    for (i, b) in s.bars.iter().enumerate() {
        if let (None, Some(e)) = (b.mean, &b.error) {
            t.notes.push(format!("{i} {} failed: {e}", b.name));
        }
        if !b.settings.is_empty() {
            t.notes.push(format!(
                "{i} {}: {} ({})",
                b.name,
                b.rationale,
                b.settings.join("; ")
            ));
        }
    }
    t.notes.push(format!(
        "Gains: positive is better ({} is better); ~ not significant (Welch, α = {ALPHA}).",
        if s.higher_better { "higher" } else { "lower" }
    ));
    if let Some(d) = drift_note(s) {
        t.notes.push(d);
    }
    t
}

/// The report section: a staircase chart and table per case.
pub fn section(steps: &[StepData], cat: &dyn Catalog) -> Section {
    let mut blocks = Vec::new();
    for s in build(steps, cat) {
        blocks.push(Block::Charts(vec![Chart::Column(chart(&s))]));
        blocks.push(Block::Table(table(&s)));
    }
    Section {
        id: "staircase".into(),
        title: "Tuning staircase".into(),
        intro: Some(
            "Each step adds its settings to every step before it and is measured under the \
             usual run rules; the bars are cumulative, each labelled with its gain over the \
             step before. The baseline is measured again at the end, every setting restored, \
             to show drift."
                .into(),
        ),
        blocks,
    }
}

/// The staircase as a chart: a column per step, each annotated with its
/// gain over the step before and explained by a line of the legend, the
/// baselines grey.
pub fn chart(s: &Staircase) -> ColumnChart {
    let last = s.bars.len().saturating_sub(1);
    let columns = s
        .bars
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let total = match (i, b.vs_base) {
                (0, _) | (_, None) => String::new(),
                (_, Some(g)) => format!(" [{} vs baseline]", g.label()),
            };
            let annotation = match (i, b.vs_prev, b.vs_base) {
                (0, _, _) => "baseline".to_string(),
                (i, _, Some(g)) if i == last => format!("drift {}", g.label()),
                (_, Some(g), _) => g.label(),
                _ => String::new(),
            };
            // A measured step without an interval had one trial: its
            // interval is unknown, so unbounded.
            let point = b.mean.map(|m| {
                let (lo, hi) = b.ci.unwrap_or((f64::NEG_INFINITY, f64::INFINITY));
                Point::new(m, lo, hi, b.settled).with_label(s.unit.clone())
            });
            Column {
                label: i.to_string(),
                legend: format!("{i} {}{total}: {}", b.name, b.rationale),
                point,
                missing: if b.error.is_some() {
                    "failed".into()
                } else {
                    "not measured".into()
                },
                annotation,
                muted: i == 0 || i == last,
            }
        })
        .collect();
    ColumnChart {
        title: s.title.clone(),
        y_label: format!("{} ({})", s.metric, s.unit),
        columns,
        notes: drift_note(s).into_iter().collect(),
        uncertainty: Uncertainty::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(name: &str, mean: Option<f64>, prev: Option<f64>) -> Bar {
        Bar {
            name: name.into(),
            rationale: format!("why {name}"),
            settings: vec![],
            mean,
            ci: mean.map(|m| (m * 0.95, m * 1.05)),
            vs_prev: prev.map(|p| Gain {
                pct: p,
                significant: p.abs() > 5.0,
            }),
            vs_base: None,
            error: mean.is_none().then(|| "no privilege".into()),
            settled: name != "sockbuf",
        }
    }

    #[test]
    fn gains_point_the_right_way() {
        let a = [100.0, 101.0, 99.0];
        let b = [120.0, 121.0, 119.0];
        let up = Gain::of(&a, &b, true).unwrap();
        assert!((up.pct - 20.0).abs() < 1e-9 && up.significant);
        // Lower is better: the same change is a loss.
        let down = Gain::of(&a, &b, false).unwrap();
        assert!(down.pct < 0.0);
        let same = Gain::of(&a, &[100.5, 99.5, 100.0], true).unwrap();
        assert!(!same.significant);
        assert!(same.label().starts_with('~'));
        assert!(Gain::of(&[], &a, true).is_none());
    }

    #[test]
    fn chart_draws_every_measured_step_inside_its_plot() {
        let s = Staircase {
            title: "net.tcp_rr [cpus all]: tps by step".into(),
            metric: "tps".into(),
            unit: "1/s".into(),
            higher_better: true,
            bars: vec![
                bar("baseline", Some(100.0), None),
                bar("sockbuf", Some(130.0), Some(30.0)),
                bar("bad", None, None),
                Bar {
                    vs_base: Some(Gain {
                        pct: 1.0,
                        significant: false,
                    }),
                    ..bar("baseline-again", Some(101.0), Some(-22.0))
                },
            ],
            drift: Some(Gain {
                pct: 1.0,
                significant: false,
            }),
        };
        let svg = chart(&s).to_svg();
        assert_eq!(svg.matches(r#"<rect class="bar mark""#).count(), 3);
        // Every measured step with its interval; the unsettled one hollow.
        assert_eq!(svg.matches(r#"class="ci mark""#).count(), 3);
        assert_eq!(
            svg.matches(r#"data-ci-low="123.5" data-ci-high="136.5""#)
                .count(),
            1
        );
        assert_eq!(svg.matches(r#"data-converged="false""#).count(), 1);
        assert!(svg.contains("failed"));
        assert!(svg.contains("+30.0 %"));
        assert!(svg.contains("drift ~+1.0 %"));
        assert!(svg.contains("why sockbuf"));
        assert!(svg.contains("No significant drift"));
        assert_eq!(svg.matches(r#"class="legend-entry""#).count(), 4);
        let t = table(&s);
        assert_eq!(t.rows.len(), 4);
        let md = t.to_markdown();
        assert!(md.contains("130.0 NOT CONVERGED"), "{md}");
        assert!(md.contains("2 bad failed: no privilege"), "{md}");
    }
}
