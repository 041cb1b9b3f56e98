//! A tuning study's staircase (docs/tune.md), in the style of seed 004's
//! NetBench figure: one bar per cumulative step, each labelled with its
//! gain over the step before, the rationale of every step in the legend.
//! Gains are signed so that a positive one is an improvement whichever way
//! the metric points. Each step's change is tested against the state
//! before it by the test its trials suit (a t-test on the case's estimator
//! when both sides look normal, rank-sum otherwise), named with its
//! p-value; `~` marks a change within the noise. Steps whose trials
//! alternated with the state before them in random order say
//! "interleaved", the others "sequential" and why.

use crate::format::sig;
use crate::html::{Block, Section};
use crate::svg::{Chart, Column, ColumnChart, Point, Uncertainty};
use crate::table::{Cell, RowKind, Table, Tone};
use crate::Catalog;
use kscale_core::twosample::{TwoSample, ALPHA};
use kscale_core::verdict::{self, Change, CompareWord};
use kscale_core::{Direction, Estimate, Estimator};
use kscale_store::RunData;

/// One step of a stored study, as the binary hands it over.
#[derive(Clone, Debug)]
pub struct StepData {
    pub name: String,
    pub rationale: String,
    pub settings: Vec<String>,
    pub run: Option<RunData>,
    pub error: Option<String>,
    /// How its trials were taken against the state before it.
    pub measured: Measured,
}

/// How a step's trials were taken against the state before it
/// (docs/tune.md, "Interleaved steps").
#[derive(Clone, Debug, PartialEq)]
pub enum Measured {
    /// Alternated with the other states of its group, in an order drawn
    /// afresh each round from this seed: drift falls on both sides alike.
    Interleaved { seed: Option<u64> },
    /// Measured as a run of its own after the state before it, and why.
    Sequential(String),
}

impl Measured {
    /// As the store holds it: `interleaved, seed 0x…` or `sequential: why`.
    pub fn encode(&self) -> String {
        match self {
            Measured::Interleaved { seed: Some(s) } => format!("interleaved, seed {s:#x}"),
            Measured::Interleaved { seed: None } => "interleaved".into(),
            Measured::Sequential(why) => format!("sequential: {why}"),
        }
    }

    /// What the store holds; a study stored before steps were interleaved
    /// has nothing, and was sequential.
    pub fn decode(stored: Option<&str>) -> Measured {
        match stored {
            Some(s) if s.starts_with("interleaved") => Measured::Interleaved {
                seed: s
                    .split("seed 0x")
                    .nth(1)
                    .and_then(|h| u64::from_str_radix(h.trim(), 16).ok()),
            },
            Some(s) => {
                Measured::Sequential(s.strip_prefix("sequential: ").unwrap_or(s).to_string())
            }
            None => Measured::Sequential("stored before kscale interleaved steps".into()),
        }
    }

    /// One word for a table cell.
    pub fn word(&self) -> &'static str {
        match self {
            Measured::Interleaved { .. } => "interleaved",
            Measured::Sequential(_) => "sequential",
        }
    }
}

/// A gain in percent (positive = better), the comparison's test and
/// p-value, and whether the change is significant at [`ALPHA`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gain {
    pub pct: f64,
    pub significant: bool,
    /// `None` when a side has fewer than two trials.
    pub test: Option<TwoSample>,
    /// The step's verdict at ±[`STEP_THRESHOLD`] (docs/verdicts.md), from
    /// the two sides' estimates: their trials were taken in the same
    /// minutes, interleaved where the step could be, so the trials' own
    /// spread holds what moved the machine between them. `None` when a
    /// side has fewer than two trials.
    pub verdict: Option<CompareWord>,
}

/// The change a step must make to be better or worse, not the same: the
/// gate's and `compare`'s default threshold.
pub const STEP_THRESHOLD: f64 = 0.05;

/// The verdict of `to` against `from` (estimates of one case's trials):
/// the log ratio, worse above 0, its standard error by the delta method
/// and Welch–Satterthwaite degrees of freedom.
fn step_verdict(from: Estimate, to: Estimate, higher_better: bool) -> Option<CompareWord> {
    let ok = |e: &Estimate| e.center > 0.0 && e.se.is_finite() && e.df > 0.0;
    if !(ok(&from) && ok(&to)) {
        return None;
    }
    let (ra, rb) = ((from.se / from.center).powi(2), (to.se / to.center).powi(2));
    let ln = (to.center / from.center).ln();
    let var = ra + rb;
    let df = if var > 0.0 {
        var * var / (ra * ra / from.df + rb * rb / to.df)
    } else {
        1e6
    };
    let change = Change {
        est: if higher_better { -ln } else { ln },
        se: var.sqrt(),
        df,
        sigma: None,
    };
    Some(verdict::compare(change, STEP_THRESHOLD, verdict::ALPHA).verdict)
}

impl Gain {
    /// `to` against `from`, both a case's counted trials under its
    /// estimator: the gain between their estimates (means when a side has
    /// one trial) and the test [`TwoSample`] chooses for them.
    fn of(from: &[f64], to: &[f64], higher_better: bool, estimator: Estimator) -> Option<Gain> {
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        if from.is_empty() || to.is_empty() {
            return None;
        }
        let center = |v: &[f64]| estimator.estimate(v).map_or_else(|| mean(v), |e| e.center);
        let (a, b) = (center(from), center(to));
        let ratio = if higher_better { b / a } else { a / b };
        if !ratio.is_finite() {
            return None;
        }
        let test = TwoSample::compare(from, to, estimator);
        let verdict = match (estimator.estimate(from), estimator.estimate(to)) {
            (Some(a), Some(b)) => step_verdict(a, b, higher_better),
            _ => None,
        };
        Some(Gain {
            pct: (ratio - 1.0) * 100.0,
            significant: test.is_some_and(|t| t.significant()),
            test,
            verdict,
        })
    }

    /// The verdict's word for a tuning step: better, worse, same, cannot
    /// tell.
    pub fn verdict_label(&self) -> &'static str {
        match self.verdict {
            Some(CompareWord::Faster) => "better",
            Some(CompareWord::Slower) => "worse",
            Some(CompareWord::Same) => "same",
            Some(CompareWord::CannotTell) => "cannot tell",
            None => "–",
        }
    }

    /// The p-value and the test that gave it, for a table cell.
    pub fn p_label(&self) -> String {
        match self.test {
            None => "– (1 trial)".into(),
            Some(t) if t.p < 0.001 => format!("<0.001 {}", t.test.name()),
            Some(t) => format!("{:.3} {}", t.p, t.test.name()),
        }
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
    pub measured: Measured,
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
        let est = bc.estimator;
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
                    (Some(p), Some(v)) if !values.is_empty() => Gain::of(p, v, higher, est),
                    _ => None,
                },
                vs_base: match (first, &v) {
                    (Some(b), Some(v)) => Gain::of(b, v, higher, est),
                    _ => None,
                },
                error: if v.is_some() { None } else { error },
                settled: case.is_some_and(|c| c.settled()),
                measured: s.measured.clone(),
            });
            values.push(v);
        }
        let drift = match (values.first(), values.last()) {
            (Some(Some(a)), Some(Some(b))) if values.len() > 1 => Gain::of(a, b, higher, est),
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
            "Drift: the baseline measured again after the steps differs from the first by {:+.1} % (p {}, α = {ALPHA}): read the sequential steps' gains with that much doubt, or re-run on a quieter machine; interleaved steps' trials shared the drift.",
            d.pct,
            d.p_label()
        )
    } else {
        format!(
            "No significant drift: the baseline measured again is within the noise of the first ({:+.1} %).",
            d.pct
        )
    })
}

/// The study's table for one case: a row per step, its change against the
/// state before it with that comparison's p-value and test, and whether its
/// trials were interleaved with that state's.
pub fn table(s: &Staircase) -> Table {
    let mut t = Table::new(
        s.title.clone(),
        vec![
            "#".into(),
            "step".into(),
            format!("{} ({})", s.metric, s.unit),
            "± CI".into(),
            "vs previous".into(),
            "p (test)".into(),
            format!("verdict (±{} %)", sig(STEP_THRESHOLD * 100.0, 2)),
            "trials".into(),
            "vs baseline".into(),
        ],
    );
    let last = s.bars.len().saturating_sub(1);
    for (i, b) in s.bars.iter().enumerate() {
        // The baseline and its re-measure frame the steps.
        let kind = if i == 0 || i == last {
            RowKind::Summary
        } else {
            RowKind::Data
        };
        t.push(kind, step_cells(i, last, b));
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
        "Gains: positive is better ({} is better); ~ not significant at α = {ALPHA}. p: the \
         step against the state before it (the last row: against the baseline), by a t-test on \
         the case's estimator (Welch t on means, Yuen t on trimmed means) when both sides' \
         trials look normal, by rank-sum when either is skewed or has an outlier.",
        if s.higher_better { "higher" } else { "lower" }
    ));
    t.notes.extend(interleaved_note(s));
    for (i, b) in s.bars.iter().enumerate().skip(1) {
        if let (Some(_), Measured::Sequential(why)) = (b.mean, &b.measured) {
            t.notes.push(format!("{i} {} sequential: {why}", b.name));
        }
    }
    if let Some(d) = drift_note(s) {
        t.notes.push(d);
    }
    t
}

/// A gain's cell: green better, red worse, dim where within the noise.
fn gain_cell(g: Option<Gain>) -> Cell {
    match g {
        None => Cell::new("–"),
        Some(g) if !g.significant => Cell::dim(g.label()),
        Some(g) if g.pct >= 0.0 => Cell::tone(g.label(), Tone::Good),
        Some(g) => Cell::tone(g.label(), Tone::Bad),
    }
}

/// Step `i`'s row (`last` is the baseline measured again): its value and
/// interval, its gain over the step before with that test's p-value and
/// verdict, how its trials were taken, and its gain over the baseline.
fn step_cells(i: usize, last: usize, b: &Bar) -> Vec<Cell> {
    let ci = || {
        Cell::new(b.ci.map_or("–".into(), |(lo, hi)| {
            format!("±{}", sig((hi - lo) / 2.0, 2))
        }))
    };
    let (value, ci) = match (b.mean, &b.error) {
        (Some(m), _) if !b.settled => (
            Cell::tone(format!("{} NOT CONVERGED", sig(m, 4)), Tone::Warn),
            ci(),
        ),
        (Some(m), _) => (Cell::new(sig(m, 4)), ci()),
        (None, Some(_)) => (Cell::tone("failed", Tone::Bad), Cell::blank()),
        (None, None) => (Cell::new("–"), Cell::blank()),
    };
    // The last row is the drift check: only its distance from the
    // first baseline means anything, and its p-value is that one's.
    let tested = match i {
        0 => None,
        i if i == last => b.vs_base,
        _ => b.vs_prev,
    };
    vec![
        Cell::new(i.to_string()),
        Cell::new(b.name.clone()),
        value,
        ci,
        if i == 0 || i == last {
            Cell::blank()
        } else {
            gain_cell(b.vs_prev)
        },
        tested.map_or(Cell::blank(), |g| Cell::new(g.p_label())),
        tested.map_or(Cell::blank(), |g| Cell::new(g.verdict_label())),
        if b.mean.is_some() {
            Cell::new(b.measured.word())
        } else {
            Cell::blank()
        },
        if i == 0 {
            Cell::blank()
        } else {
            gain_cell(b.vs_base)
        },
    ]
}

/// What interleaving did, with the seeds of its orders, where any step
/// was interleaved.
fn interleaved_note(s: &Staircase) -> Option<String> {
    if !s
        .bars
        .iter()
        .any(|b| matches!(b.measured, Measured::Interleaved { .. }))
    {
        return None;
    }
    let mut seeds: Vec<String> = Vec::new();
    for b in &s.bars {
        if let Measured::Interleaved { seed: Some(x) } = b.measured {
            let x = format!("{x:#x}");
            if !seeds.contains(&x) {
                seeds.push(x);
            }
        }
    }
    Some(format!(
        "Interleaved: the step's trials alternated with those of the states next to it, \
         its settings switched before each, in an order drawn afresh every round{}: drift \
         falls on both sides of the comparison alike.",
        if seeds.is_empty() {
            String::new()
        } else {
            format!(" (seed {})", seeds.join(", "))
        }
    ))
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
             step before. Steps whose settings switch fast had their trials interleaved with \
             the states next to them in random order. The baseline is measured again at the \
             end, every setting restored, to show drift."
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
                test: None,
                verdict: None,
            }),
            vs_base: None,
            error: mean.is_none().then(|| "no privilege".into()),
            settled: name != "sockbuf",
            measured: Measured::Sequential("a remount".into()),
        }
    }

    #[test]
    fn gains_point_the_right_way() {
        let a = [100.0, 101.0, 99.0];
        let b = [120.0, 121.0, 119.0];
        let up = Gain::of(&a, &b, true, Estimator::Mean).unwrap();
        assert!((up.pct - 20.0).abs() < 1e-9 && up.significant);
        // Lower is better: the same change is a loss.
        let down = Gain::of(&a, &b, false, Estimator::Mean).unwrap();
        assert!(down.pct < 0.0);
        assert_eq!(up.verdict, Some(CompareWord::Faster));
        assert_eq!(up.verdict_label(), "better");
        assert_eq!(down.verdict_label(), "worse");
        let same = Gain::of(&a, &[100.5, 99.5, 100.0], true, Estimator::Mean).unwrap();
        assert!(!same.significant);
        // Within 1 % a side, the whole interval inside ±5 %: the same.
        assert_eq!(same.verdict_label(), "same");
        let wide = Gain::of(&a, &[80.0, 120.0, 100.0], true, Estimator::Mean).unwrap();
        assert_eq!(wide.verdict_label(), "cannot tell");
        assert!(same.label().starts_with('~'));
        assert!(Gain::of(&[], &a, true, Estimator::Mean).is_none());
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
                        test: None,
                        verdict: None,
                    }),
                    ..bar("baseline-again", Some(101.0), Some(-22.0))
                },
            ],
            drift: Some(Gain {
                pct: 1.0,
                significant: false,
                test: None,
                verdict: None,
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

    #[test]
    fn measured_round_trips_through_the_store() {
        for m in [
            Measured::Interleaved { seed: Some(0xBEEF) },
            Measured::Interleaved { seed: None },
            Measured::Sequential("a remount".into()),
        ] {
            assert_eq!(Measured::decode(Some(&m.encode())), m);
        }
        assert_eq!(Measured::decode(None).word(), "sequential");
    }

    /// The p-value column: each step against the state before it, by the
    /// test its trials suit, and whether its trials were interleaved.
    #[test]
    fn the_table_names_each_steps_p_value_test_and_order() {
        let base = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2];
        let fin = [110.0, 111.0, 109.0, 110.5, 109.5, 110.2];
        // A host spell in one trial: rank-sum, not a t-test.
        let spell = [110.3, 111.2, 109.1, 20.0, 110.4, 109.8, 110.1, 110.6];
        let mount = [110.1, 109.2, 111.0, 110.6, 109.9, 110.4];
        let again = [100.4, 100.9, 99.2, 100.1, 99.8, 100.6];
        // The default estimator: a t-test is Yuen's.
        let est = Estimator::Trimmed;
        let mean = |v: &[f64]| est.estimate(v).map_or(f64::NAN, |e| e.center);
        let seed = Some(0x5EED);
        let step = |name: &str, v: &[f64], prev: &[f64], measured: Measured| Bar {
            name: name.into(),
            rationale: format!("why {name}"),
            settings: vec![format!("sysctl {name}=1")],
            mean: Some(mean(v)),
            ci: Some((mean(v) - 1.0, mean(v) + 1.0)),
            vs_prev: Gain::of(prev, v, true, est),
            vs_base: Gain::of(&base, v, true, est),
            error: None,
            settled: true,
            measured,
        };
        let s = Staircase {
            title: "syscall.null [cpus 1]: ops by step".into(),
            metric: "ops".into(),
            unit: "1/s".into(),
            higher_better: true,
            bars: vec![
                Bar {
                    settings: vec![],
                    vs_prev: None,
                    vs_base: None,
                    ..step("baseline", &base, &base, Measured::Interleaved { seed })
                },
                step("fin", &fin, &base, Measured::Interleaved { seed }),
                step("keepalive", &spell, &fin, Measured::Interleaved { seed }),
                step(
                    "writeback",
                    &mount,
                    &spell,
                    Measured::Sequential("mount -o data=writeback: a remount".into()),
                ),
                Bar {
                    settings: vec![],
                    ..step(
                        "baseline-again",
                        &again,
                        &mount,
                        Measured::Sequential("every setting restored".into()),
                    )
                },
            ],
            drift: Gain::of(&base, &again, true, est),
        };
        let t = table(&s);
        let md = t.to_markdown();
        assert!(md.contains("<0.001 Yuen t"), "{md}");
        assert!(md.contains("rank-sum"), "{md}");
        assert!(md.contains("seed 0x5eed"), "{md}");
        assert!(
            md.contains("3 writeback sequential: mount -o data=writeback"),
            "{md}"
        );
        insta::assert_snapshot!(md);
    }
}
