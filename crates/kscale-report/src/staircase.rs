//! A tuning study's staircase (docs/tune.md), in the style of seed 004's
//! NetBench figure: one bar per cumulative step, each labelled with its
//! gain over the step before, the rationale of every step in the legend.
//! Gains are signed so that a positive one is an improvement whichever way
//! the metric points, and Welch's test marks with `~` the steps whose
//! change is within the noise.

use crate::format::{escape_html as esc, sig};
use crate::html::{Block, Section};
use crate::svg::{self, Chart, WIDTH};
use crate::table::{Cell, RowKind, Table, Tone};
use crate::Catalog;
use kscale_core::{Direction, Welch};
use kscale_store::RunData;
use std::fmt::Write;

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
        blocks.push(Block::Charts(vec![Chart::Staircase(s.clone())]));
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

const PAD: f64 = 10.0;
const FONT: f64 = 12.0;
const PLOT_H: f64 = 230.0;

impl Staircase {
    pub fn to_svg(&self) -> String {
        let vals: Vec<f64> = self
            .bars
            .iter()
            .flat_map(|b| b.mean.into_iter().chain(b.ci.map(|c| c.1)))
            .filter(|v| v.is_finite())
            .collect();
        let mut body = String::new();
        let top = svg::title(&mut body, &self.title);
        let hi = vals.iter().copied().fold(0.0, f64::max);
        let (ticks, step) = svg::ticks(0.0, if hi > 0.0 { hi } else { 1.0 }, 5);
        let v1 = ticks[ticks.len() - 1].max(f64::MIN_POSITIVE);
        let labels: Vec<String> = ticks.iter().map(|t| svg::tick_label(*t, step)).collect();
        let lw = labels
            .iter()
            .map(|l| svg::text_width(l, FONT))
            .fold(0.0, f64::max);
        // Room above the bars for their gain labels.
        let plot_top = top + FONT * 2.0;
        let left = PAD + FONT * 1.4 + lw + 6.0;
        let right = WIDTH - PAD;
        let bottom = plot_top + PLOT_H;
        let sy = |v: f64| bottom - (v / v1) * PLOT_H;
        let _ = write!(
            body,
            r##"<rect class="plot" x="{left:.2}" y="{plot_top:.2}" width="{:.2}" height="{PLOT_H:.2}" fill="none" stroke="#ccc"/>"##,
            right - left
        );
        for (t, l) in ticks.iter().zip(&labels) {
            let y = sy(*t);
            let _ = write!(
                body,
                r##"<line x1="{left:.2}" x2="{right:.2}" y1="{y:.2}" y2="{y:.2}" stroke="#eee"/><text data-tick="{t}" x="{:.2}" y="{:.2}" text-anchor="end">{}</text>"##,
                left - 4.0,
                y + FONT * 0.35,
                esc(l)
            );
        }
        let axis = format!("{} ({})", self.metric, self.unit);
        let _ = write!(
            body,
            r##"<text x="{:.2}" y="{:.2}" transform="rotate(-90 {:.2} {:.2})" text-anchor="middle">{}</text>"##,
            PAD + FONT,
            plot_top + PLOT_H / 2.0,
            PAD + FONT,
            plot_top + PLOT_H / 2.0,
            esc(&axis)
        );
        let n = self.bars.len().max(1);
        let slot = (right - left) / n as f64;
        let bw = slot * 0.62;
        let last = self.bars.len().saturating_sub(1);
        for (i, b) in self.bars.iter().enumerate() {
            let cx = left + slot * (i as f64 + 0.5);
            let (fill, extra) = if i == 0 || i == last {
                ("#999999", r#" fill-opacity="0.6""#)
            } else {
                (svg::color(0), "")
            };
            match b.mean {
                Some(m) if m.is_finite() && m >= 0.0 => {
                    let y = sy(m);
                    let _ = write!(
                        body,
                        r##"<rect class="mark" x="{:.2}" y="{y:.2}" width="{bw:.2}" height="{:.2}" fill="{fill}"{extra}><title>{}: {} {}</title></rect>"##,
                        cx - bw / 2.0,
                        (bottom - y).max(0.0),
                        esc(&b.name),
                        sig(m, 4),
                        esc(&self.unit)
                    );
                    if let Some((lo, hi)) = b.ci {
                        let (lo, hi) = (lo.max(0.0), hi.min(v1));
                        let _ = write!(
                            body,
                            r##"<line class="mark" x1="{cx:.2}" x2="{cx:.2}" y1="{:.2}" y2="{:.2}" stroke="#000"/>"##,
                            sy(lo),
                            sy(hi)
                        );
                    }
                    let label = match (i, b.vs_prev, b.vs_base) {
                        (0, _, _) => "baseline".to_string(),
                        (i, _, Some(g)) if i == last => format!("drift {}", g.label()),
                        (_, Some(g), _) => g.label(),
                        _ => String::new(),
                    };
                    // Above the bar and its interval, below the title.
                    let whisker = b.ci.map_or(y, |(_, hi)| sy(hi.min(v1)));
                    let label_y = (y.min(whisker) - 5.0).max(top + FONT);
                    let _ = write!(
                        body,
                        r##"<text x="{cx:.2}" y="{label_y:.2}" text-anchor="middle" font-size="{:.0}">{}</text>"##,
                        FONT - 1.0,
                        esc(&label)
                    );
                }
                _ => {
                    let _ = write!(
                        body,
                        r##"<text x="{cx:.2}" y="{:.2}" text-anchor="middle" fill="#D55E00">failed</text>"##,
                        bottom - 6.0
                    );
                }
            }
            let _ = write!(
                body,
                r##"<text x="{cx:.2}" y="{:.2}" text-anchor="middle">{i}</text>"##,
                bottom + FONT * 1.3
            );
        }
        // Legend: each step's number, name, total gain and rationale.
        let mut y = bottom + FONT * 3.0;
        let _ = write!(body, r#"<g class="legend">"#);
        for (i, b) in self.bars.iter().enumerate() {
            let total = match (i, b.vs_base) {
                (0, _) => String::new(),
                (_, Some(g)) => format!(" [{} vs baseline]", g.label()),
                _ => String::new(),
            };
            let text = format!("{i} {}{total}: {}", b.name, b.rationale);
            let label = format!("{i} {}", b.name);
            for (k, line) in svg::wrap(&text, WIDTH - 2.0 * PAD, FONT).iter().enumerate() {
                let _ = write!(
                    body,
                    r#"<text class="{}" data-label="{}" x="{PAD}" y="{y:.2}">{}</text>"#,
                    if k == 0 {
                        "legend-entry"
                    } else {
                        "legend-more"
                    },
                    esc(&label),
                    esc(line)
                );
                y += FONT * 1.3;
            }
        }
        if let Some(d) = drift_note(self) {
            for line in svg::wrap(&d, WIDTH - 2.0 * PAD, FONT) {
                let _ = write!(
                    body,
                    r##"<text x="{PAD}" y="{y:.2}" fill="#555">{}</text>"##,
                    esc(&line)
                );
                y += FONT * 1.3;
            }
        }
        body.push_str("</g>");
        let height = (y + PAD).ceil();
        svg::document("staircase", &self.title, height, &body)
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
        let svg = s.to_svg();
        assert_eq!(svg.matches(r#"<rect class="mark""#).count(), 3);
        assert!(svg.contains("failed"));
        assert!(svg.contains("+30.0 %"));
        assert!(svg.contains("drift ~+1.0 %"));
        assert!(svg.contains("why sockbuf"));
        assert!(svg.contains("No significant drift"));
        assert_eq!(svg.matches("legend-entry").count(), 4);
        let t = table(&s);
        assert_eq!(t.rows.len(), 4);
        let md = t.to_markdown();
        assert!(md.contains("130.0 NOT CONVERGED"), "{md}");
        assert!(md.contains("2 bad failed: no privilege"), "{md}");
    }
}
