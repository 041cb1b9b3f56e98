//! Kernel profile tables and charts (SPEC §6, seed 000 figures 2, 5, 11,
//! 12): per case, the top routines by time with the same routines' share of
//! instructions (and cache misses) beside them, the kernel / user / idle
//! split and the spin-lock share; and the routine-by-routine difference of
//! two profiles.

use crate::format::sig;
use crate::results::{case_label, cpus_header};
use crate::svg::{BarChart, Chart};
use crate::table::{Cell, RowKind, Table, Tone};
use crate::{Catalog, WorkloadInfo};
use kscale_core::profile::{diff, Profile};
use kscale_store::{CaseData, RunData};

/// Routines listed per case.
pub const TOP: usize = 10;

fn info_for(cat: &dyn Catalog, id: &str) -> WorkloadInfo {
    cat.workload(id).unwrap_or_else(|| WorkloadInfo {
        id: id.into(),
        family: id.split('.').next().unwrap_or(id).into(),
        family_title: id.into(),
        title: id.into(),
        param_order: vec![],
        geomean_over: None,
    })
}

/// `Simple syscall [1 CPU]`.
pub fn case_title(cat: &dyn Catalog, c: &CaseData) -> String {
    let info = info_for(cat, &c.key.workload);
    format!(
        "{} [{}]",
        case_label(&info, &c.key),
        cpus_header(&c.key.cpus, c.cpus.len())
    )
}

fn clock(c: &CaseData) -> Option<&Profile> {
    c.profiles
        .iter()
        .find(|p| p.event == "cpu-clock")
        .or(c.profiles.first())
}

fn pct1(x: f64) -> String {
    format!("{x:.1}")
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
            "top routine",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
    );
    for c in &run.cases {
        let Some(p) = clock(c) else { continue };
        let top = p
            .top(1)
            .first()
            .map(|(n, k)| format!("{n} {:.1}%", p.share(*k)))
            .unwrap_or_else(|| "–".into());
        let spin = p.spinlock_kernel_share();
        t.push(
            RowKind::Data,
            vec![
                Cell::new(case_title(cat, c)),
                Cell::new(p.total.to_string()),
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
                Cell::new(top),
            ],
        );
    }
    if t.rows.is_empty() {
        return None;
    }
    t.notes.push(
        "spin-lock: samples in spin-lock slow paths and spinning mutex/rwsem owners \
         (the seed's stext_lock; list in kscale_core::profile::SPINLOCK_ROUTINES)."
            .into(),
    );
    Some(t)
}

/// The top routines of one case by time, with their share of the other
/// events beside them (seed figure 5's pairing).
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
    let mut t = Table::new(
        format!(
            "Profile — {}: {} {}, {} samples{}",
            case_title(cat, c),
            p.event,
            p.sample_on,
            p.total,
            p.ops.map(|o| format!(", {o} ops")).unwrap_or_default()
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
    for (name, n) in p.top(TOP) {
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
        let m = c.primary().map(|m| m.name.as_str()).unwrap_or("value");
        let counted = c.values(m);
        let mean = counted.iter().sum::<f64>() / counted.len().max(1) as f64;
        let change = if mean != 0.0 && !counted.is_empty() {
            format!(
                " ({:+.1}% vs the counted mean {})",
                100.0 * (v / mean - 1.0),
                sig(mean, 4)
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

/// The summary and every profiled case's table.
pub fn profile_tables(run: &RunData, cat: &dyn Catalog) -> Vec<Table> {
    let mut out: Vec<Table> = summary_table(run, cat).into_iter().collect();
    out.extend(run.cases.iter().filter_map(|c| case_table(cat, c)));
    out
}

/// Bars of the top routines' shares of each profiled case: time and, where
/// sampled, instructions side by side.
pub fn profile_charts(run: &RunData, cat: &dyn Catalog) -> Vec<Chart> {
    let mut out = Vec::new();
    for c in &run.cases {
        let Some(p) = clock(c) else { continue };
        let top = p.top(TOP);
        if top.is_empty() {
            continue;
        }
        let series = c
            .profiles
            .iter()
            .filter(|o| o.total > 0)
            .map(|o| {
                (
                    o.event.clone(),
                    top.iter().map(|(n, _)| Some(o.share(o.count(n)))).collect(),
                )
            })
            .collect();
        out.push(Chart::Bar(BarChart {
            title: format!(
                "Kernel profile — {} (run {})",
                case_title(cat, c),
                run.run.id
            ),
            y_label: "% of samples".into(),
            categories: top.iter().map(|(n, _)| n.clone()).collect(),
            series,
            reference: None,
        }));
    }
    out
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
    for d in diff(a, b).into_iter().take(n) {
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
