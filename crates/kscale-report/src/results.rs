//! The tables of one run (`kscale show`, and after `kscale run`): one per
//! family in the layout of seed 003, a row per case, a column group per CPU
//! configuration, then the geometric-mean rows the seed reports.

use crate::format::sig;
use crate::table::{Cell, RowKind, Table, Tone};
use crate::{Catalog, WorkloadInfo};
use kscale_core::stats::geomean;
use kscale_core::{CaseKey, RunRule};
use kscale_store::{CaseData, CaseStatus, RunData};
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
    pub(crate) rows: Vec<(CaseKey, BTreeMap<String, &'a CaseData>)>,
}

pub(crate) fn group<'a>(cases: &[&'a CaseData]) -> Grouped<'a> {
    let mut configs: Vec<(String, usize)> = Vec::new();
    let mut rows: Vec<(CaseKey, BTreeMap<String, &'a CaseData>)> = Vec::new();
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

/// Params other than the `geomean_over` one → per-configuration means.
type GeomeanGroups = Vec<(BTreeMap<String, String>, Vec<Vec<f64>>)>;

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
    let mut order = cat.family_order();
    for f in by_family.keys() {
        if !order.contains(f) {
            order.push(f.clone());
        }
    }
    order
        .into_iter()
        .filter_map(|f| by_family.remove(&f).map(|cases| (f, cases)))
        .collect()
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

fn family_table(cases: &[&CaseData], cat: &dyn Catalog, rule: RuleInfo) -> Table {
    let first = cat.info(&cases[0].key.workload);
    let g = group(cases);
    let mut headers = vec!["Case".to_string(), "Unit".to_string()];
    for (name, count) in &g.configs {
        let h = cpus_header(name, *count);
        headers.push(h);
        headers.push("±CI".into());
        headers.push("n".into());
    }
    let mut table = Table::new(
        format!("{} ({})", first.family_title, first.family),
        headers,
    );
    let mut failures = Vec::new();
    let mut stolen: Vec<String> = Vec::new();
    let mut fitted = 0;
    let mut skipped = Vec::new();
    let mut not_converged = 0;
    let (mut medians, mut load_bound) = (None, 0);

    let mut workload_order: Vec<String> = Vec::new();
    for (k, _) in &g.rows {
        if !workload_order.contains(&k.workload) {
            workload_order.push(k.workload.clone());
        }
    }
    for wid in &workload_order {
        let info = cat.info(wid);
        let rows: Vec<&(CaseKey, BTreeMap<String, &CaseData>)> =
            g.rows.iter().filter(|(k, _)| &k.workload == wid).collect();
        // Geomean groups: params other than `geomean_over` → per-config values.
        let mut gm: GeomeanGroups = Vec::new();
        let mut gm_rows: Vec<usize> = Vec::new();
        let mut unit = String::new();
        for (key, per_cfg) in &rows {
            let mut cells = vec![Cell::new(case_label(&info, key))];
            let primary = per_cfg.values().next().and_then(|c| c.primary().cloned());
            unit = primary.as_ref().map(|m| m.unit.clone()).unwrap_or_default();
            cells.push(Cell::tone(unit.clone(), Tone::Dim));
            let mut rest = key.params.clone();
            if let Some(o) = &info.geomean_over {
                rest.remove(o);
            }
            let gi = match gm.iter().position(|(p, _)| *p == rest) {
                Some(i) => i,
                None => {
                    gm.push((rest, vec![Vec::new(); g.configs.len()]));
                    gm_rows.push(0);
                    gm.len() - 1
                }
            };
            gm_rows[gi] += 1;
            for (ci, (cfg, _)) in g.configs.iter().enumerate() {
                let Some(case) = per_cfg.get(cfg) else {
                    cells.extend([Cell::new(""), Cell::new(""), Cell::new("")]);
                    continue;
                };
                match (case.status, &primary) {
                    (CaseStatus::Skipped, _) => {
                        cells.extend([
                            Cell::tone("skipped", Tone::Dim),
                            Cell::new(""),
                            Cell::new(""),
                        ]);
                        let s = format!(
                            "skipped: {}: {}",
                            case_label(&info, key),
                            case.error.as_deref().unwrap_or("not runnable here")
                        );
                        if !skipped.contains(&s) {
                            skipped.push(s);
                        }
                    }
                    (CaseStatus::Failed, _) => {
                        cells.extend([
                            Cell::tone("failed", Tone::Bad),
                            Cell::new(""),
                            Cell::new(""),
                        ]);
                        failures.push(format!(
                            "failed: {} [cpus {cfg}]: {}",
                            case_label(&info, key),
                            case.error.as_deref().unwrap_or("unknown error")
                        ));
                    }
                    (_, Some(m)) => {
                        let (s, fit) = case.summary_and_fit(&m.name, rule.confidence_pct);
                        let mut mark = match (case.rule, case.converged) {
                            (RunRule::MedianOf(k), _) => {
                                medians = Some(k);
                                // A capacity answer too spread for the
                                // run's interval takes more windows.
                                Cell::new(format!("{} median of {}", s.n, s.n.max(k)))
                            }
                            (_, Some(true)) => Cell::tone(format!("{} ✓", s.n), Tone::Good),
                            (_, Some(false)) => {
                                not_converged += 1;
                                if let Some(l) = case.steal_link(&m.name) {
                                    stolen.push(format!(
                                        "steal: {} [cpus {cfg}]: the hypervisor took {:.0}–{:.0} % \
                                         of the CPUs during its trials and its figure followed it \
                                         (r = {:.2}): the host's other work, not the workload, \
                                         spread its trials (docs/method.md)",
                                        case_label(&info, key),
                                        l.low,
                                        l.high,
                                        l.r
                                    ));
                                }
                                if let Some(l) = case.others_link(&m.name) {
                                    stolen.push(format!(
                                        "others: {} [cpus {cfg}]: other tasks ran {:.0}–{:.0} % \
                                         of its CPUs during its trials and its figure followed it \
                                         (r = {:.2}): another program or a noisy neighbour, not \
                                         the workload, spread its trials (docs/method.md, \
                                         \"Others on the trial's CPUs\")",
                                        case_label(&info, key),
                                        l.low,
                                        l.high,
                                        l.r
                                    ));
                                }
                                if let Some(l) = case.line_link(&m.name) {
                                    stolen.push(format!(
                                        "placement: {} [cpus {cfg}]: a cache line between two \
                                         of its CPUs took {:.0}–{:.0} ns there and back around \
                                         its trials and its figure followed it (r = {:.2}): the \
                                         host moved its vCPUs between cores, which the guest \
                                         cannot pin (docs/method.md, \"vCPU placement\")",
                                        case_label(&info, key),
                                        l.low,
                                        l.high,
                                        l.r
                                    ));
                                }
                                Cell::tone(format!("{} NOT CONVERGED", s.n), Tone::Warn)
                            }
                            (_, None) => Cell::tone(format!("{} unfinished", s.n), Tone::Warn),
                        };
                        if case.load_bound() {
                            load_bound += 1;
                            mark = Cell::tone(format!("{} LOAD-BOUND", mark.text), Tone::Warn);
                        }
                        if fit.is_some() {
                            fitted += 1;
                            mark.text.push('‡');
                        }
                        if s.n > 0 {
                            cells.push(Cell::new(sig(s.mean, 4)));
                            cells.push(Cell::tone(
                                format!("±{}", sig(s.half_width(), 2)),
                                Tone::Dim,
                            ));
                            gm[gi].1[ci].push(s.mean);
                        } else {
                            cells.extend([Cell::new("–"), Cell::new("")]);
                        }
                        cells.push(mark);
                    }
                    (_, None) => cells.extend([Cell::new("–"), Cell::new(""), Cell::new("")]),
                }
            }
            table.push(RowKind::Data, cells);
            secondary_rows(&mut table, &info, per_cfg, &g.configs, rule);
        }
        if let Some(over) = &info.geomean_over {
            for ((rest, per_cfg), rows) in gm.iter().zip(&gm_rows) {
                let label = if rest.is_empty() {
                    format!("{} — geometric mean over {over}", info.title)
                } else {
                    let r: Vec<String> = rest.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    format!(
                        "{} {} — geometric mean over {over}",
                        info.title,
                        r.join(" ")
                    )
                };
                let mut cells = vec![Cell::new(label), Cell::tone(unit.clone(), Tone::Dim)];
                for vals in per_cfg {
                    cells.push(Cell::new(complete_geomean(vals, *rows)));
                    cells.push(Cell::new(""));
                    cells.push(Cell::new(""));
                }
                table.push(RowKind::Summary, cells);
            }
        }
    }
    if let Some(gm) = geomean_cases(&g, rule) {
        let mut cells = vec![Cell::new("Geometric mean"), Cell::tone(gm.unit, Tone::Dim)];
        for cases in &gm.per_config {
            let value = cases.as_ref().and_then(|cs| {
                let means: Vec<f64> = cs
                    .iter()
                    .map(|c| c.summary(&gm.metric, rule.confidence_pct).mean)
                    .collect();
                geomean(&means)
            });
            cells.push(Cell::new(
                value.map(|v| sig(v, 4)).unwrap_or_else(|| "–".into()),
            ));
            cells.push(Cell::new(""));
            cells.push(Cell::new(""));
        }
        table.push(RowKind::Summary, cells);
    }
    table.notes.push(format!(
        "Values: {}. ±CI: half-width of the {}% confidence interval; ✓ converged (full CI width ≤ {}% of the value){}",
        rule.estimator.describe(),
        rule.confidence_pct,
        rule.width_pct,
        if not_converged > 0 { format!("; {not_converged} case(s) NOT CONVERGED") } else { String::new() }
    ));
    if let Some(k) = medians {
        table.notes.push(format!(
            "median of {k}: the workload's run rule takes {k} trials and reports their median \
             (a capacity answer too spread for the run's interval takes more); its ± is half \
             the range of the trials"
        ));
    }
    if fitted > 0 {
        table.notes.push(format!(
            "‡ ({fitted}): the case's trials followed what the host took from it (other tasks on \
             its CPUs, the vCPUs' placement, steal time); its ± and its convergence are those of \
             its trials with that part fitted out, at the run's own conditions (the decisions \
             table says which and at what; docs/method.md, \"Others on the trial's CPUs\")"
        ));
    }
    if load_bound > 0 {
        table.notes.push(format!(
            "LOAD-BOUND ({load_bound}): the load generator kept ≥ 90 % of its CPUs busy in the \
             counted trials, so the figure may be the load's limit rather than the system's \
             (give it more CPUs or --peer hosts)"
        ));
    }
    let mut notes: Vec<String> = Vec::new();
    for c in cases {
        for n in &c.notes {
            let n = format!("note: {}: {n}", c.key.workload);
            if !notes.contains(&n) {
                notes.push(n);
            }
        }
    }
    table.notes.extend(notes);
    table.notes.extend(stolen);
    if !skipped.is_empty() {
        table.notes.push(format!(
            "{} case(s) skipped (not runnable on this machine; left out of the geometric mean):",
            skipped.len()
        ));
    }
    table.notes.extend(skipped);
    table.notes.extend(failures);
    table
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
