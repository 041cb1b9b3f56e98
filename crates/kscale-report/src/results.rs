//! The tables of one run (`kscale show`, and after `kscale run`): one per
//! family in the layout of seed 003, a row per case, a column group per CPU
//! configuration, then the geometric-mean rows the seed reports.

use crate::format::sig;
use crate::table::{Cell, RowKind, Table, Tone};
use crate::{Catalog, WorkloadInfo};
use kscale_core::stats::geomean;
use kscale_core::{CaseKey, RunRule};
use kscale_store::{CaseData, CaseStatus, MetricRow, RunData};
use std::collections::BTreeMap;

/// Confidence and width the run was measured with, for the legend and CIs.
#[derive(Clone, Copy, Debug)]
pub struct RuleInfo {
    pub width_pct: f64,
    pub confidence_pct: f64,
    /// What the values and intervals of converging cases are.
    pub estimator: kscale_core::Estimator,
}

impl RuleInfo {
    pub fn of(run: &RunData) -> RuleInfo {
        let r = &run.run.options["rule"];
        RuleInfo {
            width_pct: r["width_pct"].as_f64().unwrap_or(5.0),
            confidence_pct: r["confidence_pct"].as_f64().unwrap_or(95.0),
            estimator: run.run.estimator(),
        }
    }
}

/// The workload's title, then its params in declaration order:
/// "Simple stat", "Some workload p=4k q=x".
pub fn case_label(info: &WorkloadInfo, key: &CaseKey) -> String {
    let p = key.params_label(&info.param_order());
    if p.is_empty() {
        info.title.clone()
    } else {
        format!("{} {p}", info.title)
    }
}

/// Human name of a CPU configuration column.
pub fn cpus_header(name: &str, count: usize) -> String {
    // Names since kscale placed CPUs by topology say where they are:
    // `4 (4 cores, 1 LLC, node 0)`.
    if let Some((base, place)) = name.split_once(" (") {
        let place = place.strip_suffix(')').unwrap_or(place);
        return match cpus_header(base, count).strip_suffix(')') {
            Some(open) => format!("{open}; {place})"),
            None => format!("{} ({place})", cpus_header(base, count)),
        };
    }
    match name.parse::<usize>() {
        // A count names as many CPUs as it says; an explicit single-CPU set
        // such as `3` (from `--cpus 3-3`) does not.
        Ok(1) if count == 1 => "1 CPU".into(),
        Ok(n) if n == count => format!("{n} CPUs"),
        Err(_) if name == "all" => {
            format!("all ({count} CPU{})", if count == 1 { "" } else { "s" })
        }
        _ => format!("CPUs {name}"),
    }
}

/// Cases grouped as (params without cpus) → per-config case, in run order.
pub(crate) struct Grouped<'a> {
    pub(crate) configs: Vec<(String, usize)>,
    pub(crate) rows: Vec<GroupedRow<'a>>,
}

pub(crate) fn group<'a>(cases: &[&'a CaseData]) -> Grouped<'a> {
    let mut configs: Vec<(String, usize)> = Vec::new();
    let mut rows: Vec<GroupedRow<'a>> = Vec::new();
    for c in cases {
        if !configs.iter().any(|(n, _)| *n == c.key.cpus) {
            configs.push((c.key.cpus.clone(), c.cpus.len()));
        }
        let base = CaseKey {
            cpus: String::new(),
            ..c.key.clone()
        };
        match rows.iter_mut().find(|(k, _)| *k == base) {
            Some((_, m)) => {
                m.insert(c.key.cpus.clone(), c);
            }
            None => rows.push((base, BTreeMap::from([(c.key.cpus.clone(), *c)]))),
        }
    }
    Grouped { configs, rows }
}

/// A geometric mean only over a complete column: a column that lost a case
/// (failed, or not run) would otherwise be compared over different cases.
fn complete_geomean(vals: &[f64], rows: usize) -> String {
    if vals.len() != rows {
        return "–".into();
    }
    geomean(vals)
        .map(|v| sig(v, 4))
        .unwrap_or_else(|| "–".into())
}

/// Whether tables give `c` a row: every case but the steps of a capacity
/// search whose answer the run holds — the answer's row is the figure,
/// and its note lists every step.
pub fn shown(run: &RunData, c: &CaseData) -> bool {
    !c.key.is_step_in(
        run.cases
            .iter()
            .map(|a| &a.key)
            .filter(|k| k.searched().is_some()),
    )
}

pub fn run_tables(run: &RunData, cat: &dyn Catalog) -> Vec<Table> {
    let rule = RuleInfo::of(run);
    family_cases(run, cat)
        .iter()
        .map(|(_, cases)| family_table(cases, cat, rule))
        .collect()
}

/// The cases each family table shows, by family in the catalogue's order
/// (families it does not know after).
pub(crate) fn family_cases<'a>(
    run: &'a RunData,
    cat: &dyn Catalog,
) -> Vec<(String, Vec<&'a CaseData>)> {
    let mut by_family: BTreeMap<String, Vec<&CaseData>> = BTreeMap::new();
    for c in run.cases.iter().filter(|c| shown(run, c)) {
        by_family
            .entry(c.key.family().to_string())
            .or_default()
            .push(c);
    }
    families_in_order(cat, by_family.keys())
        .into_iter()
        .filter_map(|f| by_family.remove(&f).map(|cases| (f, cases)))
        .collect()
}

/// The catalogue's families in its display order, then the `found` ones it
/// does not know (a run stored by another version) in the order given:
/// every view lists families alike.
pub(crate) fn families_in_order<'a>(
    cat: &dyn Catalog,
    found: impl IntoIterator<Item = &'a String>,
) -> Vec<String> {
    let mut order = cat.family_order();
    for f in found {
        if !order.contains(f) {
            order.push(f.clone());
        }
    }
    order
}

/// The cases a family's "Geometric mean" row is over: its primary metric,
/// and per configuration (in [`Grouped::configs`] order) the cases with a
/// result there, or `None` where the column lost a case (failed, or not
/// run) and would compare different cases. A case skipped in a
/// configuration is left out of that column's mean. `None` as a whole for
/// a family of one row, or one whose cases' primary metrics differ: only
/// like with like enters it (the seed gives creations and removals each
/// their own).
pub(crate) struct GeomeanCases<'a> {
    pub(crate) metric: String,
    pub(crate) unit: String,
    pub(crate) per_config: Vec<Option<Vec<&'a CaseData>>>,
}

pub(crate) fn geomean_cases<'a>(g: &Grouped<'a>, rule: RuleInfo) -> Option<GeomeanCases<'a>> {
    if g.rows.len() <= 1 {
        return None;
    }
    like_cases(g, rule)
}

/// As [`geomean_cases`], a family of one case included (its "mean" is its
/// value): the decisions table decides a family a noisy study measured on
/// one representative case.
pub(crate) fn like_cases<'a>(g: &Grouped<'a>, rule: RuleInfo) -> Option<GeomeanCases<'a>> {
    let mut units = std::collections::BTreeSet::new();
    for (_, per_cfg) in &g.rows {
        let primary = per_cfg.values().next().and_then(|c| c.primary());
        units.insert((
            primary.map(|m| m.name.clone()).unwrap_or_default(),
            primary.map(|m| m.unit.clone()).unwrap_or_default(),
        ));
    }
    if g.rows.is_empty() || units.len() != 1 {
        return None;
    }
    let (metric, unit) = units.into_iter().next()?;
    let per_config = g
        .configs
        .iter()
        .map(|(cfg, _)| {
            let mut expected = 0;
            let mut cases = Vec::new();
            for (_, per_cfg) in &g.rows {
                let case = per_cfg.get(cfg);
                if case.is_none_or(|c| c.status != CaseStatus::Skipped) {
                    expected += 1;
                }
                let with_result = case.filter(|c| {
                    !matches!(c.status, CaseStatus::Skipped | CaseStatus::Failed)
                        && c.summary(&metric, rule.confidence_pct).n > 0
                });
                cases.extend(with_result.copied());
            }
            (cases.len() == expected).then_some(cases)
        })
        .collect();
    Some(GeomeanCases {
        metric,
        unit,
        per_config,
    })
}

/// A family's table: a column group (value, ±CI, trials) per CPU
/// configuration, a row per case with its secondary metrics under it, each
/// workload's means over its `geomean_over` param, the family's geometric
/// mean, and the notes that explain the rows' marks.
fn family_table(cases: &[&CaseData], cat: &dyn Catalog, rule: RuleInfo) -> Table {
    let first = cat.info(&cases[0].key.workload);
    let g = group(cases);
    let mut headers = vec!["Case".to_string(), "Unit".to_string()];
    for (name, count) in &g.configs {
        headers.extend([cpus_header(name, *count), "±CI".into(), "n".into()]);
    }
    let mut family = FamilyRows {
        table: Table::new(
            format!("{} ({})", first.family_title, first.family),
            headers,
        ),
        configs: &g.configs,
        rule,
        marks: Marks::default(),
    };
    let mut workload_order: Vec<&str> = Vec::new();
    for (k, _) in &g.rows {
        if !workload_order.contains(&k.workload.as_str()) {
            workload_order.push(&k.workload);
        }
    }
    for wid in workload_order {
        let rows: Vec<&GroupedRow> = g.rows.iter().filter(|(k, _)| k.workload == wid).collect();
        family.workload(&cat.info(wid), &rows);
    }
    let FamilyRows {
        mut table, marks, ..
    } = family;
    if let Some(gm) = geomean_cases(&g, rule) {
        table.push(RowKind::Summary, geomean_row(&gm, rule));
    }
    marks.write(&mut table, cases, rule);
    table
}

/// One row of [`Grouped`]: a case's key without its configuration, and
/// the case on each configuration.
type GroupedRow<'a> = (CaseKey, BTreeMap<String, &'a CaseData>);

/// A family table being filled, with what its rows' marks will need said
/// under it.
struct FamilyRows<'a> {
    table: Table,
    configs: &'a [(String, usize)],
    rule: RuleInfo,
    marks: Marks,
}

/// What a family table's notes say, gathered as its rows are filled: how
/// many cases carry each mark, and a line for each case that needs one.
#[derive(Default)]
struct Marks {
    failures: Vec<String>,
    /// Cases whose figures followed what the host took from them.
    host: Vec<String>,
    fitted: usize,
    skipped: Vec<String>,
    not_converged: usize,
    /// The trials a median-of-N run rule takes.
    medians: Option<usize>,
    load_bound: usize,
}

/// The rows of one mean over a workload's `geomean_over` param: the
/// workload's other params, and per configuration the values of its cases
/// there.
struct OverGroup {
    rest: BTreeMap<String, String>,
    per_config: Vec<Vec<f64>>,
    rows: usize,
}

impl FamilyRows<'_> {
    /// One workload's rows: each case with its secondary metrics under it,
    /// then its means over the `geomean_over` param, one per combination
    /// of the other params.
    fn workload(&mut self, info: &WorkloadInfo, rows: &[&GroupedRow]) {
        let configs = self.configs;
        let mut over: Vec<OverGroup> = Vec::new();
        // The unit of the workload's last case heads its means.
        let mut unit = String::new();
        for (key, per_cfg) in rows.iter().copied() {
            let mut rest = key.params.clone();
            if let Some(o) = &info.geomean_over {
                rest.remove(o);
            }
            let gi = match over.iter().position(|o| o.rest == rest) {
                Some(i) => i,
                None => {
                    over.push(OverGroup {
                        rest,
                        per_config: vec![Vec::new(); configs.len()],
                        rows: 0,
                    });
                    over.len() - 1
                }
            };
            over[gi].rows += 1;
            let primary = per_cfg.values().next().and_then(|c| c.primary());
            unit = primary.map(|m| m.unit.clone()).unwrap_or_default();
            let label = case_label(info, key);
            let mut cells = vec![Cell::new(label.clone()), Cell::dim(unit.clone())];
            for (ci, (cfg, _)) in configs.iter().enumerate() {
                let Some(case) = per_cfg.get(cfg) else {
                    cells.extend([Cell::blank(), Cell::blank(), Cell::blank()]);
                    continue;
                };
                let (three, value) = self.config_cells(&label, cfg, case, primary);
                cells.extend(three);
                over[gi].per_config[ci].extend(value);
            }
            self.table.push(RowKind::Data, cells);
            secondary_rows(&mut self.table, info, per_cfg, configs, self.rule);
        }
        if let Some(o) = &info.geomean_over {
            for group in &over {
                self.table
                    .push(RowKind::Summary, over_row(info, o, group, &unit));
            }
        }
    }

    /// A case's three cells on one configuration (value, ±CI, trials), and
    /// its value for the `geomean_over` means where it has one.
    fn config_cells(
        &mut self,
        label: &str,
        cfg: &str,
        case: &CaseData,
        primary: Option<&MetricRow>,
    ) -> ([Cell; 3], Option<f64>) {
        match (case.status, primary) {
            (CaseStatus::Skipped, _) => {
                let s = format!(
                    "skipped: {label}: {}",
                    case.error.as_deref().unwrap_or("not runnable here")
                );
                if !self.marks.skipped.contains(&s) {
                    self.marks.skipped.push(s);
                }
                ([Cell::dim("skipped"), Cell::blank(), Cell::blank()], None)
            }
            (CaseStatus::Failed, _) => {
                self.marks.failures.push(format!(
                    "failed: {label} [cpus {cfg}]: {}",
                    case.error.as_deref().unwrap_or("unknown error")
                ));
                let failed = Cell::tone("failed", Tone::Bad);
                ([failed, Cell::blank(), Cell::blank()], None)
            }
            (_, Some(m)) => self.measured_cells(label, cfg, case, m),
            (_, None) => ([Cell::new("–"), Cell::blank(), Cell::blank()], None),
        }
    }

    /// A measured case's value, its ±CI and its trials, the last marked
    /// with how the case finished and what its figure may not show.
    fn measured_cells(
        &mut self,
        label: &str,
        cfg: &str,
        case: &CaseData,
        m: &MetricRow,
    ) -> ([Cell; 3], Option<f64>) {
        let (s, fit) = case.summary_and_fit(&m.name, self.rule.confidence_pct);
        let mut mark = match (case.rule, case.converged) {
            (RunRule::MedianOf(k), _) => {
                self.marks.medians = Some(k);
                // A capacity answer too spread for the run's interval
                // takes more windows.
                Cell::new(format!("{} median of {}", s.n, s.n.max(k)))
            }
            (_, Some(true)) => Cell::tone(format!("{} ✓", s.n), Tone::Good),
            (_, Some(false)) => {
                self.marks.not_converged += 1;
                self.marks
                    .host
                    .extend(host_notes(case, &m.name, &format!("{label} [cpus {cfg}]")));
                Cell::tone(format!("{} NOT CONVERGED", s.n), Tone::Warn)
            }
            (_, None) => Cell::tone(format!("{} unfinished", s.n), Tone::Warn),
        };
        if case.load_bound() {
            self.marks.load_bound += 1;
            mark = Cell::tone(format!("{} LOAD-BOUND", mark.text), Tone::Warn);
        }
        if fit.is_some() {
            self.marks.fitted += 1;
            mark.text.push('‡');
        }
        if s.n > 0 {
            let ci = Cell::dim(format!("±{}", sig(s.half_width(), 2)));
            ([Cell::new(sig(s.mean, 4)), ci, mark], Some(s.mean))
        } else {
            ([Cell::new("–"), Cell::blank(), mark], None)
        }
    }
}

/// The note lines for a case that did not converge and whose figure
/// followed what the host took from it (steal time, other tasks on its
/// CPUs, its vCPUs' placement), `at` naming the case and configuration:
/// the spread was the host's, not the workload's.
fn host_notes(case: &CaseData, metric: &str, at: &str) -> Vec<String> {
    let links = [
        (
            "steal",
            case.steal_link(metric),
            "the hypervisor took",
            "% of the CPUs during its trials",
            "the host's other work, not the workload, spread its trials (docs/method.md)",
        ),
        (
            "others",
            case.others_link(metric),
            "other tasks ran",
            "% of its CPUs during its trials",
            "another program or a noisy neighbour, not the workload, spread its trials \
             (docs/method.md, \"Others on the trial's CPUs\")",
        ),
        (
            "placement",
            case.line_link(metric),
            "a cache line between two of its CPUs took",
            "ns there and back around its trials",
            "the host moved its vCPUs between cores, which the guest cannot pin \
             (docs/method.md, \"vCPU placement\")",
        ),
    ];
    links
        .into_iter()
        .filter_map(|(kind, link, who, what, why)| {
            let l = link?;
            Some(format!(
                "{kind}: {at}: {who} {:.0}–{:.0} {what} and its figure followed it \
                 (r = {:.2}): {why}",
                l.low, l.high, l.r
            ))
        })
        .collect()
}

/// A summary row over the cases of one [`OverGroup`]: a configuration's
/// mean only where none of its cases is missing.
fn over_row(info: &WorkloadInfo, over: &str, group: &OverGroup, unit: &str) -> Vec<Cell> {
    let label = geomean_over_label(&info.title, &group.rest, over);
    let mut cells = vec![Cell::new(label), Cell::dim(unit)];
    for vals in &group.per_config {
        cells.extend([
            Cell::new(complete_geomean(vals, group.rows)),
            Cell::blank(),
            Cell::blank(),
        ]);
    }
    cells
}

/// `Title p=v — geometric mean over q`: the label of a mean over one
/// param, naming the other params it holds.
pub(crate) fn geomean_over_label(
    title: &str,
    rest: &BTreeMap<String, String>,
    over: &str,
) -> String {
    if rest.is_empty() {
        format!("{title} — geometric mean over {over}")
    } else {
        let r: Vec<String> = rest.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("{title} {} — geometric mean over {over}", r.join(" "))
    }
}

/// The family's "Geometric mean" row over [`geomean_cases`].
fn geomean_row(gm: &GeomeanCases<'_>, rule: RuleInfo) -> Vec<Cell> {
    let mut cells = vec![Cell::new("Geometric mean"), Cell::dim(gm.unit.clone())];
    for cases in &gm.per_config {
        let value = cases.as_ref().and_then(|cs| {
            let means: Vec<f64> = cs
                .iter()
                .map(|c| c.summary(&gm.metric, rule.confidence_pct).mean)
                .collect();
            geomean(&means)
        });
        cells.extend([
            Cell::new(value.map(|v| sig(v, 4)).unwrap_or_else(|| "–".into())),
            Cell::blank(),
            Cell::blank(),
        ]);
    }
    cells
}

impl Marks {
    /// The table's notes: the legend with the marks its rows carry, the
    /// cases' own notes, then the cases the host spread, were skipped or
    /// failed.
    fn write(self, table: &mut Table, cases: &[&CaseData], rule: RuleInfo) {
        let not_converged = self.not_converged;
        table.notes.push(format!(
            "Values: {}. ±CI: half-width of the {}% confidence interval; ✓ converged (full CI width ≤ {}% of the value){}",
            rule.estimator.describe(),
            rule.confidence_pct,
            rule.width_pct,
            if not_converged > 0 { format!("; {not_converged} case(s) NOT CONVERGED") } else { String::new() }
        ));
        if let Some(k) = self.medians {
            table.notes.push(format!(
                "median of {k}: the workload's run rule takes {k} trials and reports their median \
                 (a capacity answer too spread for the run's interval takes more); its ± is half \
                 the range of the trials"
            ));
        }
        if self.fitted > 0 {
            table.notes.push(format!(
                "‡ ({}): the case's trials followed what the host took from it (other tasks on \
                 its CPUs, the vCPUs' placement, steal time); its ± and its convergence are those of \
                 its trials with that part fitted out, at the run's own conditions (the decisions \
                 table says which and at what; docs/method.md, \"Others on the trial's CPUs\")",
                self.fitted
            ));
        }
        if self.load_bound > 0 {
            table.notes.push(format!(
                "LOAD-BOUND ({}): the load generator kept ≥ 90 % of its CPUs busy in the \
                 counted trials, so the figure may be the load's limit rather than the system's \
                 (give it more CPUs or --peer hosts)",
                self.load_bound
            ));
        }
        table.notes.extend(case_notes(cases, |c, n| {
            format!("note: {}: {n}", c.key.workload)
        }));
        table.notes.extend(self.host);
        if !self.skipped.is_empty() {
            table.notes.push(format!(
                "{} case(s) skipped (not runnable on this machine, or left out by the run beside a twin it kept; out of the geometric mean and the scalability), each with why:",
                self.skipped.len()
            ));
        }
        table.notes.extend(self.skipped);
        table.notes.extend(self.failures);
    }
}

/// The cases' own notes, each once, as `line` writes them.
pub(crate) fn case_notes(
    cases: &[&CaseData],
    line: impl Fn(&CaseData, &str) -> String,
) -> Vec<String> {
    let mut notes: Vec<String> = Vec::new();
    for c in cases {
        for n in &c.notes {
            let n = line(c, n);
            if !notes.contains(&n) {
                notes.push(n);
            }
        }
    }
    notes
}

/// One indented row per secondary metric of a case (latency percentiles,
/// service demand …), under its primary row. Metrics the workload's variant
/// table already shows are left to it.
fn secondary_rows(
    table: &mut Table,
    info: &WorkloadInfo,
    per_cfg: &BTreeMap<String, &CaseData>,
    configs: &[(String, usize)],
    rule: RuleInfo,
) {
    let Some(first) = per_cfg.values().next() else {
        return;
    };
    let shown_elsewhere = |name: &str| {
        info.variants
            .as_ref()
            .is_some_and(|v| v.metrics.iter().any(|(m, _)| m == name))
    };
    for m in first
        .metrics
        .iter()
        .filter(|m| !m.primary && !shown_elsewhere(&m.name))
    {
        let mut cells = vec![
            Cell::tone(format!("  · {}", m.name), Tone::Dim),
            Cell::tone(m.unit.clone(), Tone::Dim),
        ];
        for (cfg, _) in configs {
            match per_cfg.get(cfg).filter(|c| c.status == CaseStatus::Done) {
                Some(c) => {
                    let s = c.summary(&m.name, rule.confidence_pct);
                    if s.n > 0 && s.mean.is_finite() {
                        cells.push(Cell::new(sig(s.mean, 4)));
                        cells.push(Cell::tone(
                            format!("±{}", sig(s.half_width(), 2)),
                            Tone::Dim,
                        ));
                    } else {
                        cells.extend([Cell::new("–"), Cell::new("")]);
                    }
                    cells.push(Cell::new(""));
                }
                None => cells.extend([Cell::new(""), Cell::new(""), Cell::new("")]),
            }
        }
        table.push(RowKind::Data, cells);
    }
}

/// Where the CPUs went during each case's counted trials (/proc/stat),
/// one row per case and CPU configuration.
pub fn accounting_table(run: &RunData, cat: &dyn Catalog) -> Option<Table> {
    let mut t = Table::new(
        "CPU accounting (counted trials, CPUs of the configuration; ctxt and intr system-wide)",
        [
            "Case", "CPUs", "user%", "sys%", "idle%", "irq%", "softirq%", "steal%", "ctxt/s",
            "intr/s",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
    );
    for c in run.cases.iter().filter(|c| shown(run, c)) {
        let Some(a) = c.accounting() else { continue };
        let info = cat.info(&c.key.workload);
        let per_s = |x: u64| {
            if a.seconds > 0.0 {
                sig(x as f64 / a.seconds, 3)
            } else {
                "–".into()
            }
        };
        t.push(
            RowKind::Data,
            vec![
                Cell::new(case_label(&info, &c.key)),
                Cell::new(cpus_header(&c.key.cpus, c.cpus.len())),
                Cell::new(format!("{:.1}", a.user_pct)),
                Cell::new(format!("{:.1}", a.system_pct)),
                Cell::new(format!("{:.1}", a.idle_pct)),
                Cell::new(format!("{:.1}", a.irq_pct)),
                Cell::new(format!("{:.1}", a.softirq_pct)),
                Cell::tone(
                    format!("{:.1}", a.steal_pct),
                    if a.steal_pct >= 5.0 {
                        Tone::Warn
                    } else {
                        Tone::Plain
                    },
                ),
                Cell::new(per_s(a.ctxt)),
                Cell::new(per_s(a.intr)),
            ],
        );
    }
    (!t.rows.is_empty()).then_some(t)
}

#[cfg(test)]
mod header_tests {
    #[test]
    fn cpu_headers() {
        assert_eq!(super::cpus_header("1", 1), "1 CPU");
        assert_eq!(super::cpus_header("4", 4), "4 CPUs");
        assert_eq!(super::cpus_header("all", 2), "all (2 CPUs)");
        assert_eq!(super::cpus_header("0", 1), "CPUs 0");
        assert_eq!(super::cpus_header("0-3,8", 5), "CPUs 0-3,8");
        assert_eq!(
            super::cpus_header("4 (4 cores, 1 LLC, node 0)", 4),
            "4 CPUs (4 cores, 1 LLC, node 0)"
        );
        assert_eq!(
            super::cpus_header("1 (1 core, 1 LLC, node 0)", 1),
            "1 CPU (1 core, 1 LLC, node 0)"
        );
        assert_eq!(
            super::cpus_header("all (2 cores × 2 SMT, 1 LLC, node 0)", 4),
            "all (4 CPUs; 2 cores × 2 SMT, 1 LLC, node 0)"
        );
        assert_eq!(
            super::cpus_header("0-1 (1 core × 2 SMT, 1 LLC, node 0)", 2),
            "CPUs 0-1 (1 core × 2 SMT, 1 LLC, node 0)"
        );
    }
}
