//! Kernel profiles: per case, the top routines by time (idle left out and
//! shown as its own share) with the same routines' share of instructions
//! and cache misses beside them, the kernel / user / idle split and the
//! spin-lock share; what answers "where did the extra time go?" from fewer
//! to more CPUs or from one system to another; and the routine-by-routine
//! difference of two profiles. The method is in docs/report.md.

use crate::format::sig;
use crate::results::{case_label, cpus_header, families_in_order, shown};
use crate::svg::{BarChart, Chart, Point, Uncertainty};
use crate::table::{Cell, RowKind, Table, Tone};
use crate::Catalog;
use kscale_core::profile::{diff, is_idle_routine, Profile};
use kscale_core::CaseKey;
use kscale_store::{CaseData, RunData};
use std::collections::BTreeMap;

/// Routines listed per case.
pub const TOP: usize = 10;
/// Routines listed per family in the "where did the time go" summary.
pub const GROWTH_TOP: usize = 3;
/// Name under which user-mode samples compete with kernel routines there.
pub const USER_MODE: &str = "(user mode)";
/// Samples below which a profile's ranking is not stable: at 1,000, a
/// routine with a 5 % share is known to about ±1.4 points (95 %), enough to
/// tell it from its neighbours in a top 10; at 50 it is ±6 points, and the
/// order of the top routines is largely chance.
pub const MIN_SAMPLES: u64 = 1000;

/// "from 52 samples — too few for a stable ranking" for a profile under
/// [`MIN_SAMPLES`]; `None` for one with enough.
pub fn few_samples(p: &Profile) -> Option<String> {
    (p.total < MIN_SAMPLES).then(|| {
        format!(
            "from {} samples — too few for a stable ranking (fewer than {})",
            p.total,
            sig_count(MIN_SAMPLES)
        )
    })
}

/// A count with thousands separated: 1,000.
fn sig_count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The 95 % Wilson interval of a share of `n` samples, in %: a sampled
/// profile's share is a proportion, known as well as its count allows.
pub fn share_interval(share_pct: f64, n: u64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 100.0);
    }
    let (z, n) = (1.96f64, n as f64);
    let p = (share_pct / 100.0).clamp(0.0, 1.0);
    let d = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / d;
    let half = z / d * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt();
    (
        (100.0 * (centre - half)).clamp(0.0, share_pct),
        (100.0 * (centre + half)).clamp(share_pct, 100.0),
    )
}

/// The case's row label and configuration: `Simple stat [1 CPU]`.
pub fn case_title(cat: &dyn Catalog, c: &CaseData) -> String {
    format!(
        "{} [{}]",
        case_label(&cat.info(&c.key.workload), &c.key),
        cpus_header(&c.key.cpus, c.cpus.len())
    )
}

/// The time-based profile of a case (CPU clock), or its first.
pub fn clock(c: &CaseData) -> Option<&Profile> {
    c.profiles
        .iter()
        .find(|p| p.event == "cpu-clock")
        .or(c.profiles.first())
        .filter(|p| p.total > 0)
}

fn pct1(x: f64) -> String {
    format!("{x:.1}")
}

/// The busiest routine outside the idle loop, `name share%`.
fn top_routine(p: &Profile) -> String {
    p.busy_routines()
        .next()
        .map(|(n, k)| format!("{n} {:.1}%", p.share(*k)))
        .unwrap_or_else(|| "–".into())
}

/// One summary row per profiled case.
pub fn summary_table(run: &RunData, cat: &dyn Catalog) -> Option<Table> {
    let mut t = Table::new(
        "Kernel profiles (profiled trial, CPU clock; % of all samples on the case's CPUs)",
        [
            "Case",
            "samples",
            "kernel%",
            "user%",
            "idle%",
            "spin-lock%",
            "spin % of kernel",
            "top routine (idle aside)",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
    );
    for c in run.cases.iter().filter(|c| shown(run, c)) {
        let Some(p) = clock(c) else { continue };
        let spin = p.spinlock_kernel_share();
        t.push(
            RowKind::Data,
            vec![
                Cell::new(case_title(cat, c)),
                if p.total < MIN_SAMPLES {
                    Cell::tone(format!("{} (few)", p.total), Tone::Warn)
                } else {
                    Cell::new(p.total.to_string())
                },
                Cell::new(pct1(p.kernel_share())),
                Cell::new(pct1(p.user_share())),
                Cell::new(pct1(p.idle_share())),
                Cell::new(pct1(p.spinlock_share())),
                Cell::tone(
                    pct1(spin),
                    if spin >= 10.0 {
                        Tone::Warn
                    } else {
                        Tone::Plain
                    },
                ),
                Cell::new(top_routine(p)),
            ],
        );
    }
    if t.rows.is_empty() {
        return None;
    }
    if run
        .cases
        .iter()
        .filter_map(clock)
        .any(|p| p.total < MIN_SAMPLES)
    {
        t.notes.push(format!(
            "few: a profile of fewer than {} samples — too few for a stable ranking of its \
             routines; profile longer trials (--trial-time) for one",
            sig_count(MIN_SAMPLES)
        ));
    }
    t.notes.push(
        "spin-lock: samples in spin-lock slow paths and spinning mutex/rwsem owners \
         (the seed's stext_lock; list in kscale_core::profile::SPINLOCK_ROUTINES). Idle-loop \
         routines (kscale_core::profile::IDLE_ROUTINES) count as idle, never as the top routine."
            .into(),
    );
    Some(t)
}

/// The top routines of one case by time, idle aside, with their share of
/// the other events beside them (seed figure 5's pairing).
pub fn case_table(cat: &dyn Catalog, c: &CaseData) -> Option<Table> {
    let p = clock(c)?;
    let others: Vec<&Profile> = c.profiles.iter().filter(|o| !std::ptr::eq(*o, p)).collect();
    let mut headers = vec![
        "Routine".to_string(),
        format!("{} %", p.event),
        "samples".into(),
    ];
    if p.ops.is_some() {
        headers.push("samples/Mop".into());
    }
    for o in &others {
        headers.push(format!("{} %", o.event));
    }
    // The sample count stands in the heading, beside the ranking it
    // qualifies, and says so where it is too small to rank by.
    let samples = few_samples(p).unwrap_or_else(|| format!("{} samples", p.total));
    let mut t = Table::new(
        format!(
            "Profile — {}: {} {}, {samples}{}",
            case_title(cat, c),
            p.event,
            p.sample_on,
            p.ops
                .map(|o| format!(", {o} operations"))
                .unwrap_or_default()
        ),
        headers,
    );
    let row = |t: &mut Table, kind: RowKind, name: &str, n: u64, f: &dyn Fn(&Profile) -> u64| {
        let mut cells = vec![
            Cell::new(name),
            Cell::new(pct1(p.share(n))),
            Cell::new(n.to_string()),
        ];
        if p.ops.is_some() {
            cells.push(Cell::new(
                p.per_op(n)
                    .map(|x| sig(x * 1e6, 3))
                    .unwrap_or_else(|| "–".into()),
            ));
        }
        for o in &others {
            cells.push(Cell::new(if o.total == 0 {
                "–".into()
            } else {
                pct1(o.share(f(o)))
            }));
        }
        t.push(kind, cells);
    };
    for (name, n) in p.busy_routines().take(TOP) {
        let name2 = name.clone();
        row(&mut t, RowKind::Data, name, *n, &move |o: &Profile| {
            o.count(&name2)
        });
    }
    row(&mut t, RowKind::Summary, "kernel", p.kernel, &|o| o.kernel);
    row(&mut t, RowKind::Summary, "user", p.user, &|o| o.user);
    row(&mut t, RowKind::Summary, "idle", p.idle, &|o| o.idle);
    row(&mut t, RowKind::Summary, "spin-lock", p.spinlock, &|o| {
        o.spinlock
    });
    if !p.by_comm.is_empty() {
        let users: Vec<String> = p
            .by_comm
            .iter()
            .take(5)
            .map(|(n, k)| format!("{n} {:.1}%", p.share(*k)))
            .collect();
        t.notes.push(format!(
            "user-mode samples by process: {}",
            users.join(", ")
        ));
    }
    t.notes.push(format!(
        "spin-lock share of kernel samples: {:.1}%",
        p.spinlock_kernel_share()
    ));
    if let (Some(v), Some(w)) = (p.value, p.wall_s) {
        let m = c.primary().map(|m| m.name.clone()).unwrap_or_default();
        let s = c.summary(&m, 95.0);
        let change = if s.n > 0 && s.mean != 0.0 {
            format!(
                " ({:+.1}% vs the counted mean {})",
                100.0 * (v / s.mean - 1.0),
                sig(s.mean, 4)
            )
        } else {
            String::new()
        };
        t.notes.push(format!(
            "profiled trial: {m} {}{change}, {:.2} s",
            sig(v, 4),
            w
        ));
    }
    let lost: u64 = c.profiles.iter().map(|p| p.lost).sum();
    if lost > 0 {
        t.notes.push(format!(
            "{lost} samples lost (ring buffer full); shares exclude them"
        ));
    }
    Some(t)
}

/// One line saying what a case's profile holds, for the heading of its
/// collapsed details.
pub fn case_summary(cat: &dyn Catalog, c: &CaseData) -> Option<String> {
    let p = clock(c)?;
    let few = few_samples(p)
        .map(|f| format!(" · {f}"))
        .unwrap_or_default();
    Some(format!(
        "{}: kernel {:.1}% (top: {}) · user {:.1}% · idle {:.1}% · spin-lock {:.1}% of kernel{few}",
        case_title(cat, c),
        p.kernel_share(),
        top_routine(p),
        p.user_share(),
        p.idle_share(),
        p.spinlock_kernel_share()
    ))
}

/// The growth summary, the per-case summary and every profiled case's
/// table (`kscale show`).
pub fn profile_tables(run: &RunData, cat: &dyn Catalog) -> Vec<Table> {
    let mut out: Vec<Table> = cpu_growth(run, cat).into_iter().collect();
    out.extend(summary_table(run, cat));
    out.extend(
        run.cases
            .iter()
            .filter(|c| shown(run, c))
            .filter_map(|c| case_table(cat, c)),
    );
    out
}

// ------------------------------------------------ where did the time go?

/// The same case profiled twice: at fewer and at more CPUs, or on system A
/// and system B.
struct Pair<'a> {
    family: String,
    label: String,
    a: &'a Profile,
    b: &'a Profile,
}

/// How a pair's routines changed. With operation counts on both sides,
/// each routine's change of samples per operation, in points of A's busy
/// (non-idle) samples per operation: the extra CPU time per operation, and
/// the routines' points add up to the busy total's change. Without them,
/// the change of each routine's share of busy samples.
struct PairGrowth {
    /// Busy samples per operation, B ÷ A.
    busy_ratio: Option<f64>,
    routines: BTreeMap<String, f64>,
}

fn routine_counts(p: &Profile) -> BTreeMap<&str, u64> {
    let mut m: BTreeMap<&str, u64> = p.busy_routines().map(|(n, k)| (n.as_str(), *k)).collect();
    m.insert(USER_MODE, p.user);
    m
}

fn pair_growth(a: &Profile, b: &Profile, per_op: bool) -> PairGrowth {
    let (ca, cb) = (routine_counts(a), routine_counts(b));
    let names: std::collections::BTreeSet<&str> = ca.keys().chain(cb.keys()).copied().collect();
    let get = |m: &BTreeMap<&str, u64>, n: &str| m.get(n).copied().unwrap_or(0) as f64;
    let (ops_a, ops_b) = (a.ops.unwrap_or(0) as f64, b.ops.unwrap_or(0) as f64);
    let (busy_a, busy_b) = (a.busy() as f64, b.busy() as f64);
    let mut routines = BTreeMap::new();
    for n in names {
        let d = if per_op {
            let base = busy_a / ops_a;
            (get(&cb, n) / ops_b - get(&ca, n) / ops_a) / base * 100.0
        } else {
            let share = |k: f64, busy: f64| if busy > 0.0 { 100.0 * k / busy } else { 0.0 };
            share(get(&cb, n), busy_b) - share(get(&ca, n), busy_a)
        };
        if d.is_finite() {
            routines.insert(n.to_string(), d);
        }
    }
    PairGrowth {
        busy_ratio: per_op.then(|| (busy_b / ops_b) / (busy_a / ops_a)),
        routines,
    }
}

fn has_ops(p: &Profile) -> bool {
    p.ops.is_some_and(|o| o > 0) && p.busy() > 0
}

/// "Where did the extra time go?" for these pairs, one group of rows per
/// family: the busy time per operation's change, idle and spin-lock
/// shares on both sides, and the routines that grew most.
fn growth_table(
    title: String,
    a_name: &str,
    b_name: &str,
    pairs: &[Pair],
    cat: &dyn Catalog,
) -> Option<Table> {
    if pairs.is_empty() {
        return None;
    }
    let mut t = Table::new(
        title,
        vec![
            "Family".into(),
            "busy time/op".into(),
            "idle %".into(),
            "spin-lock %".into(),
            "grew most".into(),
            "Δ points".into(),
            "most in".into(),
        ],
    );
    let mut any_share = false;
    for f in families_in_order(cat, pairs.iter().map(|p| &p.family)) {
        let fam: Vec<&Pair> = pairs.iter().filter(|p| p.family == f).collect();
        if fam.is_empty() {
            continue;
        }
        let per_op = fam.iter().all(|p| has_ops(p.a) && has_ops(p.b));
        any_share |= !per_op;
        for cells in family_growth(&f, &fam, per_op) {
            t.push(RowKind::Data, cells);
        }
    }
    t.notes.push(format!(
        "busy time/op: CPU time outside the idle loop per operation, {b_name} vs {a_name} \
         (geometric mean over the family's cases). idle %, spin-lock % (of kernel samples): \
         {a_name} → {b_name}. Δ points: a routine's change of busy samples per operation, in \
         points of {a_name}'s busy samples per operation, averaged over the family's cases (the \
         routines' points add up to the busy time's change); most in: the case where it grew \
         most, when not the only one. {USER_MODE} is user-space time of every process on the \
         sampled CPUs. Idle is the CPUs waiting: its own share, never a routine."
    ));
    let fewest = pairs.iter().flat_map(|p| [p.a.total, p.b.total]).min();
    if let Some(n) = fewest.filter(|n| *n < MIN_SAMPLES) {
        t.notes.push(format!(
            "Ranked from profiles of as few as {n} samples — too few for a stable ranking \
             (fewer than {}): read what grew most as a hint, not a finding.",
            sig_count(MIN_SAMPLES)
        ));
    }
    if any_share {
        t.notes.push(
            "†: no operation count in these profiles: change of the routine's share of busy \
             samples instead."
                .into(),
        );
    }
    Some(t)
}

/// One family's rows of the growth table: the routines that grew most, a
/// row each, the first also with the family's busy time, idle and
/// spin-lock shares; "nothing grew" where none did. `per_op`: every pair
/// has operation counts, so changes are per operation, not of shares.
fn family_growth(f: &str, fam: &[&Pair], per_op: bool) -> Vec<Vec<Cell>> {
    let growth: Vec<PairGrowth> = fam.iter().map(|p| pair_growth(p.a, p.b, per_op)).collect();
    let n = fam.len() as f64;
    let mean = |f: &dyn Fn(&Pair) -> f64| fam.iter().map(|p| f(p)).sum::<f64>() / n;
    let busy = if per_op {
        let ratios: Vec<f64> = growth.iter().filter_map(|g| g.busy_ratio).collect();
        kscale_core::stats::geomean(&ratios)
            .map(|r| format!("{:+.0}%", (r - 1.0) * 100.0))
            .unwrap_or_else(|| "–".into())
    } else {
        "–".into()
    };
    let idle = format!(
        "{:.1} → {:.1}",
        mean(&|p| p.a.idle_share()),
        mean(&|p| p.b.idle_share())
    );
    let spin = format!(
        "{:.1} → {:.1}",
        mean(&|p| p.a.spinlock_kernel_share()),
        mean(&|p| p.b.spinlock_kernel_share())
    );
    let family_cells = |first: bool| -> Vec<Cell> {
        if first {
            vec![
                Cell::new(f),
                Cell::new(busy.clone()),
                Cell::new(idle.clone()),
                Cell::new(spin.clone()),
            ]
        } else {
            (0..4).map(|_| Cell::blank()).collect()
        }
    };
    let grown = grew_most(&growth);
    if grown.is_empty() {
        let mut cells = family_cells(true);
        cells.extend([Cell::dim("nothing grew"), Cell::blank(), Cell::blank()]);
        return vec![cells];
    }
    let mark = if per_op { "" } else { " †" };
    let mut rows = Vec::new();
    for (i, (r, d)) in grown.iter().enumerate() {
        let (where_, most) = fam
            .iter()
            .zip(&growth)
            .map(|(p, g)| (p.label.as_str(), g.routines.get(*r).copied().unwrap_or(0.0)))
            .max_by(|x, y| x.1.total_cmp(&y.1))
            .unwrap_or(("", 0.0));
        let mut cells = family_cells(i == 0);
        cells.push(Cell::new(r.to_string()));
        cells.push(Cell::tone(format!("{d:+.1}{mark}"), Tone::Bad));
        cells.push(Cell::new(if fam.len() > 1 && most > *d + 0.05 {
            where_.to_string()
        } else {
            "–".to_string()
        }));
        rows.push(cells);
    }
    rows
}

/// The routines that grew most over the family's pairs, most first (by
/// name where equal), at most [`GROWTH_TOP`]: each routine's mean change
/// over the family's cases, a case where it was never sampled counting as
/// no change.
fn grew_most(growth: &[PairGrowth]) -> Vec<(&str, f64)> {
    let n = growth.len() as f64;
    let mut total: BTreeMap<&str, f64> = BTreeMap::new();
    for g in growth {
        for (r, d) in &g.routines {
            *total.entry(r.as_str()).or_default() += d;
        }
    }
    let mut ranked: Vec<(&str, f64)> = total.into_iter().map(|(r, d)| (r, d / n)).collect();
    ranked.sort_by(|x, y| y.1.total_cmp(&x.1).then_with(|| x.0.cmp(y.0)));
    ranked
        .into_iter()
        .filter(|(_, d)| *d > 0.05)
        .take(GROWTH_TOP)
        .collect()
}

/// Groups of a run's cases by configuration, fewest CPUs first.
fn configs(run: &RunData) -> Vec<(String, usize)> {
    let mut v: Vec<(String, usize)> = Vec::new();
    for c in &run.cases {
        if !v.iter().any(|(n, _)| *n == c.key.cpus) {
            v.push((c.key.cpus.clone(), c.cpus.len()));
        }
    }
    v.sort_by_key(|(_, n)| *n);
    v
}

fn same_case(a: &CaseKey, b: &CaseKey) -> bool {
    a.workload == b.workload && a.params == b.params
}

/// The profiled cases of `run`'s configuration `cfg`, each paired with the
/// case `other` finds for it (at more CPUs, or on another system).
fn pairs<'a>(
    cat: &dyn Catalog,
    run: &'a RunData,
    cfg: &str,
    other: impl Fn(&CaseData) -> Option<&'a CaseData>,
) -> Vec<Pair<'a>> {
    run.cases
        .iter()
        .filter(|c| c.key.cpus == cfg && shown(run, c))
        .filter_map(|ca| {
            let (a, b) = (clock(ca)?, clock(other(ca)?)?);
            let info = cat.info(&ca.key.workload);
            Some(Pair {
                family: info.family.clone(),
                label: case_label(&info, &ca.key),
                a,
                b,
            })
        })
        .collect()
}

/// "Where did the extra time go?" from the run's configuration with the
/// fewest CPUs to the one with the most.
pub fn cpu_growth(run: &RunData, cat: &dyn Catalog) -> Option<Table> {
    let cfgs = configs(run);
    let (lo, hi) = (cfgs.first()?, cfgs.last()?);
    if lo.1 == hi.1 {
        return None;
    }
    let pairs = pairs(cat, run, &lo.0, |ca| {
        run.cases
            .iter()
            .find(|c| c.key.cpus == hi.0 && same_case(&c.key, &ca.key))
    });
    let (a, b) = (cpus_header(&lo.0, lo.1), cpus_header(&hi.0, hi.1));
    growth_table(
        format!(
            "Where did the extra time go? {a} → {b}, {} (run {})",
            run.run.label, run.run.id
        ),
        &a,
        &b,
        &pairs,
        cat,
    )
}

/// "Where did the extra time go?" from system A to system B, per CPU
/// configuration both ran.
pub fn system_growth(
    a: &RunData,
    b: &RunData,
    a_name: &str,
    b_name: &str,
    cat: &dyn Catalog,
) -> Vec<Table> {
    let mut out = Vec::new();
    for (cfg, count) in configs(a) {
        let pairs = pairs(cat, a, &cfg, |ca| b.cases.iter().find(|c| c.key == ca.key));
        out.extend(growth_table(
            format!(
                "Where did the extra time go? {a_name} → {b_name}, {}",
                cpus_header(&cfg, count)
            ),
            a_name,
            b_name,
            &pairs,
            cat,
        ));
    }
    out
}

/// The seed's figures 11 and 12 for every case at once: the spin-lock share
/// of kernel time, a bar per system and CPU configuration.
pub fn spinlock_chart(runs: &[(&str, &RunData)], cat: &dyn Catalog) -> Option<Chart> {
    let mut cases: Vec<(String, CaseKey)> = Vec::new();
    let mut series: Vec<(String, Vec<(CaseKey, Point)>)> = Vec::new();
    for (name, run) in runs {
        for (cfg, count) in configs(run) {
            let label = if runs.len() > 1 {
                format!("{name} [{}]", cpus_header(&cfg, count))
            } else {
                cpus_header(&cfg, count)
            };
            let mut vals = Vec::new();
            for c in run
                .cases
                .iter()
                .filter(|c| c.key.cpus == cfg && shown(run, c))
            {
                let Some(p) = clock(c) else { continue };
                let mut key = c.key.clone();
                key.cpus.clear();
                if !cases.iter().any(|(_, k)| *k == key) {
                    let info = cat.info(&c.key.workload);
                    cases.push((case_label(&info, &key), key.clone()));
                }
                let share = p.spinlock_kernel_share();
                let (lo, hi) = share_interval(share, p.kernel);
                let point = Point::new(share, lo, hi, p.total >= MIN_SAMPLES)
                    .with_label(format!("{} samples", p.total));
                vals.push((key, point));
            }
            if !vals.is_empty() {
                series.push((label, vals));
            }
        }
    }
    if cases.is_empty() {
        return None;
    }
    Some(Chart::Bar(BarChart {
        title: "Spin-lock share of kernel time, per case (the seed's stext_lock)".into(),
        y_label: "% of kernel samples spent spinning on locks".into(),
        categories: cases.iter().map(|(l, _)| l.clone()).collect(),
        series: series
            .into_iter()
            .map(|(name, vals)| {
                (
                    name,
                    cases
                        .iter()
                        .map(|(_, k)| vals.iter().find(|(vk, _)| vk == k).map(|(_, v)| v.clone()))
                        .collect(),
                )
            })
            .collect(),
        reference: None,
        uncertainty: Uncertainty {
            interval: "the share's 95 % interval from the profile's kernel samples (Wilson)".into(),
            hollow: format!(
                "a profile of fewer than {} samples — too few for a stable share",
                sig_count(MIN_SAMPLES)
            ),
        },
    }))
}

/// Which routines grew and which shrank from `a` to `b` (same event), the
/// biggest change of share first; `n` rows.
pub fn diff_table(
    title: &str,
    a_name: &str,
    b_name: &str,
    a: &Profile,
    b: &Profile,
    n: usize,
) -> Table {
    // Where a side is too small to rank by, the heading says so beside the
    // ranking.
    let few: Vec<String> = [(a_name, a), (b_name, b)]
        .iter()
        .filter_map(|(n, p)| few_samples(p).map(|f| format!("{n} {f}")))
        .collect();
    let title = if few.is_empty() {
        title.to_string()
    } else {
        format!("{title} — {}", few.join("; "))
    };
    let mut t = Table::new(
        title,
        vec![
            "Routine".into(),
            format!("{a_name} %"),
            format!("{b_name} %"),
            "Δ points".into(),
            format!("{a_name} /Mop"),
            format!("{b_name} /Mop"),
            "per op B/A".into(),
        ],
    );
    let per = |x: Option<f64>| x.map(|v| sig(v * 1e6, 3)).unwrap_or_else(|| "–".into());
    for d in diff(a, b)
        .into_iter()
        .filter(|d| !is_idle_routine(&d.name))
        .take(n)
    {
        let delta = d.share_delta();
        let tone = if delta > 0.0 {
            Tone::Bad
        } else if delta < 0.0 {
            Tone::Good
        } else {
            Tone::Plain
        };
        t.push(
            RowKind::Data,
            vec![
                Cell::new(d.name.clone()),
                Cell::new(pct1(d.share_a)),
                Cell::new(pct1(d.share_b)),
                Cell::tone(format!("{delta:+.1}"), tone),
                Cell::new(per(d.per_op_a)),
                Cell::new(per(d.per_op_b)),
                Cell::new(
                    d.per_op_ratio()
                        .map(|r| format!("{:.0}%", 100.0 * r))
                        .unwrap_or_else(|| "–".into()),
                ),
            ],
        );
    }
    for (name, fa, fb) in [
        ("kernel", a.kernel_share(), b.kernel_share()),
        ("user", a.user_share(), b.user_share()),
        ("idle", a.idle_share(), b.idle_share()),
        ("spin-lock", a.spinlock_share(), b.spinlock_share()),
    ] {
        t.push(
            RowKind::Summary,
            vec![
                Cell::new(name),
                Cell::new(pct1(fa)),
                Cell::new(pct1(fb)),
                Cell::new(format!("{:+.1}", fb - fa)),
                Cell::new(""),
                Cell::new(""),
                Cell::new(""),
            ],
        );
    }
    t.notes.push(format!(
        "{} samples ({}) vs {} samples ({}); Δ > 0: the routine grew from {a_name} to {b_name}; \
         /Mop: samples per million operations of the profiled trial.",
        a.total, a.sample_on, b.total, b.sample_on
    ));
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use kscale_core::profile::{Hit, ProfileBuilder};

    fn prof(event: &str, syms: &[(&str, u64)], user: u64, ops: u64) -> Profile {
        let mut b = ProfileBuilder::new(event, "997 Hz");
        for (s, n) in syms {
            b.add_n(
                Hit::Kernel {
                    symbol: Some(s),
                    comm: "kscale",
                },
                *n,
            );
        }
        b.add_n(Hit::User { comm: "kscale" }, user);
        let mut p = b.finish();
        p.ops = Some(ops);
        p
    }

    #[test]
    fn diff_table_lists_growth_first_with_per_op() {
        let a = prof(
            "cpu-clock",
            &[("do_syscall_64", 50), ("osq_lock", 10)],
            40,
            1000,
        );
        let b = prof(
            "cpu-clock",
            &[("do_syscall_64", 50), ("osq_lock", 30)],
            20,
            500,
        );
        let t = diff_table("t", "A", "B", &a, &b, 10);
        assert_eq!(t.rows[0].cells[0].text, "osq_lock");
        assert_eq!(t.rows[0].cells[3].text, "+20.0");
        assert_eq!(t.rows[0].cells[6].text, "600%");
        let spin = t
            .rows
            .iter()
            .find(|r| r.cells[0].text == "spin-lock")
            .unwrap();
        assert_eq!(spin.cells[3].text, "+20.0");
    }
}
