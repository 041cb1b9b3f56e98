//! The decisions table (docs/method.md, "Decisions: a family's geometric
//! mean and scalability with intervals"): one row per family, its
//! geometric mean on each CPU configuration and its scalability, each with
//! the interval that says whether the run decided it. The per-case tables
//! give every case an interval, but a study's question is asked of a
//! family, and a family of converged cases can still be known only to
//! ±15 % as a whole (or be known well although one case did not converge).

use crate::format::sig;
use crate::results::{
    case_label, cpus_header, family_cases, group, like_cases, GeomeanCases, Grouped, RuleInfo,
};
use crate::table::{Cell, RowKind, Table, Tone};
use crate::Catalog;
use kscale_core::decision::{Interval, LogEstimate};
use kscale_core::hostfit::HostFit;
use kscale_core::verdict::{self, CompareVerdict, CompareWord};
use kscale_core::Estimator;
use kscale_store::{CaseData, CaseStatus, RunData};

/// The estimator behind a case's interval: the case's own, and for a
/// median-of-N case (whose table "interval" is the range of its trials)
/// the trimmed mean, so that its trials' spread still gives a standard
/// error that one wrecked window does not blow up
/// ([`kscale_core::RunRule::spread_estimator`]).
fn estimator(c: &CaseData) -> Estimator {
    c.rule.spread_estimator(c.estimator)
}

/// The cases whose interval a host fit narrowed, each with its fit.
type Fitted<'a> = Vec<(&'a CaseData, HostFit)>;

/// A family's geometric mean on one configuration over `cases` (those of
/// its table's "Geometric mean" row): the point is the table's (each
/// case's printed value), the interval from each case's estimate — of its
/// trials with what followed the host taken out where they followed it
/// ([`kscale_core::hostfit::HostFit`], docs/host.md, "Others on the
/// trial's CPUs"), those cases returned with their fit. `Err` with the
/// point alone when a case has fewer than two counted trials.
fn family_geomean<'a>(
    cases: &[&'a CaseData],
    metric: &str,
    confidence_pct: f64,
) -> Result<(Interval, Fitted<'a>), Option<f64>> {
    let mut fitted = Vec::new();
    let logs: Option<Vec<LogEstimate>> = cases
        .iter()
        .map(|c| {
            let (l, fit) = case_log(c, metric, confidence_pct)?;
            fitted.extend(fit.map(|f| (*c, f)));
            Some(l)
        })
        .collect();
    logs.and_then(|l| Interval::combine(&l, confidence_pct))
        .map(|i| (i, fitted))
        .ok_or_else(|| {
            let values: Vec<f64> = cases
                .iter()
                .map(|c| c.summary(metric, confidence_pct).mean)
                .collect();
            kscale_core::stats::geomean(&values)
        })
}

/// A case's part in its family's figures: its printed value with the
/// standard error of its estimate — of its trials with what followed the
/// host taken out where they followed it, that fit returned beside it.
/// `None` below two counted trials.
fn case_log(
    c: &CaseData,
    metric: &str,
    confidence_pct: f64,
) -> Option<(LogEstimate, Option<HostFit>)> {
    let (s, fit) = c.summary_and_fit(metric, confidence_pct);
    let (e, fit) = match fit.and_then(|f| Some((f.estimate(estimator(c))?, f))) {
        Some((e, f)) => (e, Some(f)),
        None => match estimator(c).estimate(&c.values(metric)) {
            Some(e) => (e, None),
            // A capacity answer is known to its bracket, which the cells
            // read beside this (`widest_bracket_pct`); under a budget its
            // step is one window, whose figure then stands alone.
            None if c.key.searched().is_some() && s.mean > 0.0 && s.mean.is_finite() => {
                return Some((
                    LogEstimate {
                        log: s.mean.ln(),
                        se: 0.0,
                        df: f64::INFINITY,
                    },
                    None,
                ));
            }
            None => return None,
        },
    };
    Some((LogEstimate::of_value(s.mean, e)?, fit))
}

/// One note line for a case whose interval the host's fit narrowed: what
/// its trials followed, how much of their spread that was, and the
/// conditions the interval is at.
fn fitted_note(c: &CaseData, f: &HostFit, cat: &dyn Catalog) -> String {
    let info = cat.info(&c.key.workload);
    let followed: Vec<String> =
        f.by.iter()
            .zip(&f.at)
            .map(|((m, l), at)| {
                format!(
                    "{} {}–{}{u} (mean {}{u}, r = {:.2})",
                    m.describe(),
                    sig(l.low, 2),
                    sig(l.high, 2),
                    sig(*at, 2),
                    l.r,
                    u = m.unit()
                )
            })
            .collect();
    format!(
        "‡ {} [cpus {}]: its trials followed {}; the fit took out {:.0} % of their spread \
         (variance), and its interval is the figure's at those means.",
        case_label(&info, &c.key),
        c.key.cpus,
        followed.join(" and "),
        100.0 * f.r2
    )
}

/// A family's scalability of configuration `other` over `base`: the
/// geometric mean over its cases of each one's ratio of its two printed
/// values, with both sides' errors ([`LogEstimate::speedup`]) — the ratio
/// of the two geometric-mean columns where both hold the same cases.
///
/// Every case of the family with a result on both configurations enters;
/// a case skipped on either is left out, as the tables leave it out of
/// their means; one failed or lost on either leaves no figure, as it would
/// compare different cases.
fn family_scalability(
    g: &Grouped<'_>,
    base: &str,
    other: &str,
    confidence_pct: f64,
) -> Option<Interval> {
    let mut logs = Vec::new();
    for (_, per_cfg) in &g.rows {
        let (b, o) = (per_cfg.get(base), per_cfg.get(other));
        if [b, o]
            .iter()
            .any(|c| c.is_some_and(|c| c.status == CaseStatus::Skipped))
        {
            continue;
        }
        let (b, o) = (b?, o?);
        if [b, o].iter().any(|c| c.status == CaseStatus::Failed) {
            return None;
        }
        let m = b.primary()?;
        let (lb, _) = case_log(b, &m.name, confidence_pct)?;
        let (lo, _) = case_log(o, &m.name, confidence_pct)?;
        logs.push(LogEstimate::speedup(lb, lo, m.direction));
    }
    Interval::combine(&logs, confidence_pct)
}

fn decided(i: &Interval, width_pct: f64) -> Cell {
    if i.decided(width_pct) {
        Cell::tone("✓", Tone::Good)
    } else {
        Cell::tone("✗", Tone::Warn)
    }
}

fn verdict_cell(v: CompareVerdict) -> Cell {
    match v.verdict {
        CompareWord::Faster => Cell::tone("faster ✓", Tone::Good),
        CompareWord::Slower => Cell::tone("slower ✓", Tone::Bad),
        CompareWord::Same => Cell::tone("same ✓", Tone::Good),
        CompareWord::CannotTell => Cell::tone(
            format!("cannot tell (±{:.0}%)", v.smallest_threshold_pct.ceil()),
            Tone::Warn,
        ),
    }
}

fn width(i: &Interval) -> Cell {
    Cell::tone(format!("{}%", sig(i.width_pct(), 2)), Tone::Dim)
}

fn times(x: f64) -> String {
    format!("{x:.2}×")
}

/// A capacity answer's bracket (docs/families/web.md, "Capacity"): the
/// search found that `capacity` conforms and the smallest step above it
/// that did not, so the true capacity lies between them
/// ([`kscale_core::decision::capacity_at_most`]). The ratio of the most
/// it can be to the answer; infinite where no step above it failed (an
/// open bracket: "≥ capacity"). `None` for a case that is no answer.
fn bracket(run: &RunData, c: &CaseData, metric: &str) -> Option<f64> {
    let param = c.key.searched()?;
    let cap = c.summary(metric, 95.0).mean;
    let above = run
        .cases
        .iter()
        .filter(|s| s.key.is_step_of(&c.key) && s.key.cpus == c.key.cpus)
        .filter_map(|s| s.key.params.get(param)?.parse::<f64>().ok())
        .filter(|v| *v > cap)
        .fold(f64::INFINITY, f64::min);
    Some(if cap > 0.0 {
        kscale_core::decision::capacity_at_most(cap, above) / cap
    } else {
        f64::INFINITY
    })
}

/// The widest bracket among `cases`' capacity answers, as a full width in
/// % of the answer (infinite where one is open); `None` where none is an
/// answer.
fn widest_bracket_pct(run: &RunData, cases: &[&CaseData], metric: &str) -> Option<f64> {
    cases
        .iter()
        .filter_map(|c| bracket(run, c, metric))
        .map(|r| (r - 1.0) * 100.0)
        .reduce(f64::max)
}

/// A scalability of capacity answers widened to what their brackets allow
/// (each answer on `other` over its answer on `base`, each anywhere in its
/// bracket, the family's ends the geometric means of its rows' ends, as
/// its figure is theirs): windows that agree do not make a search's answer
/// finer than its last steps. A full study searches three web servers; read
/// from their windows alone, its scalability was tabled at 0.967×–0.967×.
/// Unchanged for a family whose cases are not all answers.
fn bracketed_scalability(
    run: &RunData,
    g: &Grouped<'_>,
    base: &str,
    other: &str,
    i: Interval,
    confidence_pct: f64,
) -> Interval {
    let mut ends = Vec::new();
    for (_, per_cfg) in &g.rows {
        let (Some(b), Some(o)) = (per_cfg.get(base), per_cfg.get(other)) else {
            continue;
        };
        let Some(m) = b.primary() else { return i };
        let (Some(rb), Some(ro)) = (bracket(run, b, &m.name), bracket(run, o, &m.name)) else {
            return i;
        };
        let (vb, vo) = (b.summary(&m.name, 95.0).mean, o.summary(&m.name, 95.0).mean);
        if !(vb > 0.0 && vo > 0.0) {
            return i;
        }
        ends.push(((vo / (vb * rb)).ln(), (vo * ro / vb).ln()));
    }
    if ends.is_empty() {
        return i;
    }
    let n = ends.len() as f64;
    let low = i.low.min((ends.iter().map(|e| e.0).sum::<f64>() / n).exp());
    let high = i
        .high
        .max((ends.iter().map(|e| e.1).sum::<f64>() / n).exp());
    let z = kscale_core::stats::t_quantile(confidence_pct, 1e6);
    let se = if high.is_finite() && low > 0.0 {
        (high.ln() - low.ln()) / (2.0 * z)
    } else {
        f64::INFINITY
    };
    Interval {
        value: i.value,
        low,
        high,
        se_log: se.max(i.se_log),
        df: if se > i.se_log { 1e6 } else { i.df },
    }
}

/// One cell of the decisions table as data (`export --format json`'s
/// `"decisions"`): a family's level on one configuration (`cell` is the
/// configuration's name) or its scalability (`"scalability"`, all ÷ the
/// fewest CPUs), with its verdict and interval. A level is `decided` or
/// `cannot tell`; a scalability `faster`, `slower`, `same` or `cannot
/// tell` (docs/verdicts.md). `why` says what an undecided cell lacks.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Decision {
    pub family: String,
    pub cell: String,
    pub verdict: String,
    pub decided: bool,
    pub value: Option<f64>,
    pub low: Option<f64>,
    pub high: Option<f64>,
    pub unit: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl Decision {
    /// A level at interval `i`, or at the capacity answer's `bracket`
    /// (its full width in %; infinite where open) where that is wider:
    /// decided where it is within `width_pct`.
    fn level_of(&mut self, i: &Interval, bracket: Option<f64>, width_pct: f64) {
        self.value = Some(i.value);
        let (decided, why) = match bracket {
            Some(b) => {
                self.low = Some(i.value);
                self.high = b.is_finite().then(|| i.value * (1.0 + b / 100.0));
                let why = if b.is_finite() {
                    format!("a capacity bracket {} % wide, not {width_pct} %", sig(b, 2))
                } else {
                    "an open capacity bracket".into()
                };
                (b <= width_pct, why)
            }
            None => {
                (self.low, self.high) = (Some(i.low), Some(i.high));
                let why = format!(
                    "an interval {} % wide, not {width_pct} %",
                    sig(i.width_pct(), 2)
                );
                (i.decided(width_pct), why)
            }
        };
        self.decided = decided;
        self.why = (!decided).then_some(why);
    }

    /// A scalability at interval `i` with its verdict `v`, read at ± half
    /// the run's `width_pct`.
    fn scalability_of(&mut self, i: &Interval, v: CompareVerdict, width_pct: f64) {
        (self.value, self.low, self.high) = (Some(i.value), Some(i.low), Some(i.high));
        self.decided = v.verdict != CompareWord::CannotTell;
        self.verdict = match v.verdict {
            CompareWord::Faster => "faster",
            CompareWord::Slower => "slower",
            CompareWord::Same => "same",
            CompareWord::CannotTell => "cannot tell",
        }
        .into();
        if !self.decided {
            self.why = Some(format!(
                "decidable at ±{:.0} %, not ±{} %",
                v.smallest_threshold_pct.ceil(),
                sig(width_pct / 2.0, 2)
            ));
        }
    }

    fn level(family: &str, cell: &str, unit: &str) -> Decision {
        Decision {
            family: family.to_string(),
            cell: cell.to_string(),
            verdict: "cannot tell".into(),
            decided: false,
            value: None,
            low: None,
            high: None,
            unit: unit.to_string(),
            why: None,
        }
    }
}

/// The run's decisions table; `None` for a run with no family to decide.
pub fn decision_table(run: &RunData, cat: &dyn Catalog) -> Option<Table> {
    decide(run, cat).map(|(t, _)| t)
}

/// The run's decisions, one per family and cell, as the table shows them.
pub fn decisions(run: &RunData, cat: &dyn Catalog) -> Vec<Decision> {
    decide(run, cat).map(|(_, d)| d).unwrap_or_default()
}

fn decide(run: &RunData, cat: &dyn Catalog) -> Option<(Table, Vec<Decision>)> {
    let rule = RuleInfo::of(run);
    let families = decided_families(run, cat);
    let grouped: Vec<Grouped<'_>> = families.iter().map(|(_, cases)| group(cases)).collect();
    // Every configuration of the run, in the order the tables show them;
    // scalability is against the one with the fewest CPUs, as `scale`'s.
    let mut configs: Vec<(String, usize)> = Vec::new();
    for g in &grouped {
        for c in &g.configs {
            if !configs.iter().any(|(n, _)| *n == c.0) {
                configs.push(c.clone());
            }
        }
    }
    let base = configs.iter().min_by_key(|(_, n)| *n)?.clone();
    let others: Vec<(String, usize)> = configs
        .iter()
        .filter(|(n, _)| *n != base.0)
        .cloned()
        .collect();
    let short = |name: &str| kscale_core::cpus::base_name(name).to_string();
    let mut headers = vec!["Family".to_string(), "Unit".to_string()];
    for (name, count) in &configs {
        headers.push(format!("GM {}", cpus_header(name, *count)));
        headers.push("width".into());
        headers.push("decided".into());
    }
    for (name, _) in &others {
        headers.push(format!("scal. {}÷{}", short(name), short(&base.0)));
        headers.push(format!("{}% interval", rule.confidence_pct));
        headers.push("verdict".into());
    }
    let mut t = Table::new(
        format!(
            "Decisions: each family's geometric mean and scalability, with {} % intervals",
            rule.confidence_pct
        ),
        headers,
    );
    let mut decider = Decider {
        run,
        cat,
        rule,
        one_trial: false,
        fitted: Vec::new(),
        out: Vec::new(),
    };
    for ((family, _), g) in families.iter().zip(&grouped) {
        let Some((first, _)) = g.rows.first() else {
            continue;
        };
        let info = cat.info(&first.workload);
        let gm = like_cases(g, rule);
        let unit = gm.as_ref().map(|gm| gm.unit.clone()).unwrap_or_default();
        let mut cells = vec![
            Cell::new(format!("{} ({family})", info.family_title)),
            Cell::dim(unit.clone()),
        ];
        for (name, _) in &configs {
            cells.extend(decider.level(family, name, &unit, g, gm.as_ref()));
        }
        for (name, _) in &others {
            let cell = if others.len() == 1 {
                "scalability".to_string()
            } else {
                format!("scalability {}", short(name))
            };
            cells.extend(decider.scalability(family, &cell, g, (&base.0, name)));
        }
        t.push(RowKind::Summary, cells);
    }
    if t.rows.is_empty() {
        return None;
    }
    notes(
        &mut t,
        rule,
        !others.is_empty(),
        decider.one_trial,
        decider.fitted,
    );
    Some((t, decider.out))
}

/// The run's families as the decisions table decides them: a family whose
/// cases measure unlike things (fs: creations and removals) is decided
/// per metric, as its table keeps them apart.
fn decided_families<'a>(run: &'a RunData, cat: &dyn Catalog) -> Vec<(String, Vec<&'a CaseData>)> {
    let mut families: Vec<(String, Vec<&CaseData>)> = Vec::new();
    for (family, cases) in family_cases(run, cat) {
        let mut metrics: Vec<String> = Vec::new();
        for c in &cases {
            let m = c.primary().map(|m| m.name.clone()).unwrap_or_default();
            if !metrics.contains(&m) {
                metrics.push(m);
            }
        }
        if metrics.len() <= 1 {
            families.push((family, cases));
            continue;
        }
        for m in metrics {
            let mine: Vec<&CaseData> = cases
                .iter()
                .copied()
                .filter(|c| c.primary().map(|p| p.name.as_str()).unwrap_or_default() == m)
                .collect();
            families.push((format!("{family}: {m}"), mine));
        }
    }
    families
}

/// The decisions table's cells being decided, each kept as a
/// [`Decision`], with what the notes must say: whether a case had a
/// single counted trial, and the cases a host fit narrowed.
struct Decider<'a> {
    run: &'a RunData,
    cat: &'a dyn Catalog,
    rule: RuleInfo,
    one_trial: bool,
    fitted: Vec<String>,
    out: Vec<Decision>,
}

impl Decider<'_> {
    /// A family's level on configuration `name`: its geometric mean, the
    /// interval's width (or the capacity bracket, where wider) and whether
    /// that decides it.
    fn level(
        &mut self,
        family: &str,
        name: &str,
        unit: &str,
        g: &Grouped<'_>,
        gm: Option<&GeomeanCases<'_>>,
    ) -> [Cell; 3] {
        let rule = self.rule;
        let mut d = Decision::level(family, name, unit);
        let cases = g
            .configs
            .iter()
            .position(|(n, _)| n == name)
            .and_then(|i| gm?.per_config.get(i)?.as_ref());
        let cells = match (cases, gm) {
            (Some(cases), Some(gm)) => {
                match family_geomean(cases, &gm.metric, rule.confidence_pct) {
                    Ok((i, fits)) => {
                        // A capacity answer is known to its bracket,
                        // however well its windows agree.
                        let bracket = widest_bracket_pct(self.run, cases, &gm.metric)
                            .filter(|b| *b > i.width_pct());
                        let mut w = match bracket {
                            Some(b) if b.is_finite() => {
                                Cell::dim(format!("{}% bracket", sig(b, 2)))
                            }
                            Some(_) => Cell::dim("open bracket"),
                            None => width(&i),
                        };
                        if !fits.is_empty() {
                            w.text.push('‡');
                        }
                        let ok = match bracket {
                            Some(b) if b > rule.width_pct => Cell::tone("✗", Tone::Warn),
                            Some(_) => Cell::tone("✓", Tone::Good),
                            None => decided(&i, rule.width_pct),
                        };
                        d.level_of(&i, bracket, rule.width_pct);
                        let cat = self.cat;
                        self.fitted
                            .extend(fits.iter().map(|(c, f)| fitted_note(c, f, cat)));
                        [Cell::new(sig(i.value, 4)), w, ok]
                    }
                    Err(point) => {
                        self.one_trial = true;
                        d.value = point;
                        d.why = Some("a case has a single counted trial".into());
                        let value = point.map(|v| sig(v, 4)).unwrap_or_else(|| "–".into());
                        [
                            Cell::new(value),
                            Cell::dim("–"),
                            Cell::tone("✗", Tone::Warn),
                        ]
                    }
                }
            }
            _ => {
                d.why = Some("no figure: a case failed or was not measured here".into());
                [Cell::new("–"), Cell::blank(), Cell::blank()]
            }
        };
        if d.decided {
            d.verdict = "decided".into();
        }
        self.out.push(d);
        cells
    }

    /// A family's scalability of configuration `other` over `base` (the
    /// decision named `cell`), with its interval and verdict.
    fn scalability(
        &mut self,
        family: &str,
        cell: &str,
        g: &Grouped<'_>,
        (base, other): (&str, &str),
    ) -> [Cell; 3] {
        let rule = self.rule;
        let mut d = Decision::level(family, cell, "×");
        let cells = match family_scalability(g, base, other, rule.confidence_pct) {
            Some(i) => {
                let i = bracketed_scalability(self.run, g, base, other, i, rule.confidence_pct);
                let v = verdict::scaling(&i, rule.width_pct, rule.confidence_pct);
                let tone = match v.verdict {
                    CompareWord::Faster => Tone::Good,
                    CompareWord::Slower => Tone::Bad,
                    _ => Tone::Plain,
                };
                d.scalability_of(&i, v, rule.width_pct);
                [
                    Cell::tone(times(i.value), tone),
                    Cell::dim(format!("{}–{}", times(i.low), times(i.high))),
                    verdict_cell(v),
                ]
            }
            None => {
                d.why = Some("no figure: a case failed or was not measured on both".into());
                [Cell::new("–"), Cell::blank(), Cell::blank()]
            }
        };
        self.out.push(d);
        cells
    }
}

/// The decisions table's notes: what its columns mean, and the cases whose
/// interval a host fit narrowed (`fitted`, one line each).
fn notes(t: &mut Table, rule: RuleInfo, scalability: bool, one_trial: bool, fitted: Vec<String>) {
    t.notes.push(format!(
        "GM: the family's geometric mean, as its table's \"Geometric mean\" row; its interval \
         combines each case's estimate ({}; the trimmed mean's for a median of N) by the delta method \
         in log space, with Welch–Satterthwaite degrees of freedom; width: the interval's full \
         width as % of the GM; decided ✓: width ≤ {} %, the run's rule for each case.",
        rule.estimator.describe(),
        rule.width_pct
    ));
    if scalability {
        t.notes.push(format!(
            "scal.: the geometric mean over the family's cases of each case's ratio of its two \
             values (the two GM columns' ratio), inverted where lower is better so above 1× is \
             faster; its interval combines both sides' as the GM's does; verdict (docs/verdicts.md): faster or slower where the \
             scalability is beyond ±{} % of 1× and its interval excludes 1×, same where the \
             interval lies within ±{} %, else cannot tell (with the margin it could decide); \
             ✓: decided.",
            sig(rule.width_pct / 2.0, 2),
            sig(rule.width_pct / 2.0, 2)
        ));
    }
    t.notes.push(
        "A family of unlike metrics is decided per metric (`fs: creates`); a family \
         measured on one case is decided on it. –: no figure (a case failed or not measured \
         on a configuration leaves its column without one)."
            .into(),
    );
    if one_trial {
        t.notes.push(
            "✗ with no width: a case has a single counted trial, so the family's interval \
             cannot be known."
                .into(),
        );
    }
    if !fitted.is_empty() {
        t.notes.push(
            "‡: a case's trials followed what the host took from it (other tasks on its CPUs, \
             the vCPUs' placement, steal time), fitted by least squares and taken out of its \
             interval at the run's own conditions, said below: the figure as measured, known \
             that well at those conditions, not at others (docs/method.md, \"Others on the \
             trial's CPUs\")."
                .into(),
        );
        t.notes.extend(fitted);
    }
}
