//! The kernel-profile views on hand-made profiles: what grew from 1 CPU to
//! all is found and measured per operation, idle is its own share and never
//! a routine, and profiles without operation counts fall back to shares.

mod common;

use kscale_core::profile::{Hit, Profile, ProfileBuilder};
use kscale_core::Direction;
use kscale_report::profile::{
    case_summary, case_table, cpu_growth, diff_table, share_interval, spinlock_chart,
    summary_table, MIN_SAMPLES,
};
use kscale_report::{Catalog, WorkloadInfo};
use kscale_store::{CaseData, RunData};
use std::collections::BTreeMap;

struct Cat;

impl Catalog for Cat {
    fn workload(&self, id: &str) -> Option<WorkloadInfo> {
        Some(WorkloadInfo {
            id: id.into(),
            family: "fam".into(),
            family_title: "A family".into(),
            title: "Some call".into(),
            ..Default::default()
        })
    }
    fn family_order(&self) -> Vec<String> {
        vec!["fam".into()]
    }
}

/// A cpu-clock profile: kernel routines, idle-loop samples, user samples.
fn profile(kernel: &[(&str, u64)], idle: u64, user: u64, ops: Option<u64>) -> Profile {
    let mut b = ProfileBuilder::new("cpu-clock", "997 Hz");
    for (s, n) in kernel {
        b.add_n(
            Hit::Kernel {
                symbol: Some(s),
                comm: "kscale",
            },
            *n,
        );
    }
    b.add_n(
        Hit::Idle {
            symbol: Some("pv_native_safe_halt"),
        },
        idle,
    );
    b.add_n(Hit::User { comm: "kscale" }, user);
    let mut p = b.finish();
    p.ops = ops;
    p
}

fn profiled(id: i64, cpus: &str, p: Profile) -> CaseData {
    let trials = (0..3)
        .map(|_| BTreeMap::from([("latency".to_string(), 1.0)]))
        .collect();
    let mut c = common::case(
        id,
        "fam.call",
        &[],
        cpus,
        vec![common::metric("latency", "µs", Direction::Lower, true)],
        trials,
    );
    c.profiles = vec![p];
    c
}

fn run(ops: Option<u64>) -> RunData {
    common::run_with(vec![
        profiled(
            1,
            "1",
            profile(&[("do_syscall_64", 50), ("schedule", 10)], 0, 40, ops),
        ),
        // On all CPUs: a lock slow path appears, and half the time the
        // CPUs sit in the idle loop.
        profiled(
            2,
            "all",
            profile(
                &[
                    ("do_syscall_64", 50),
                    ("schedule", 10),
                    ("native_queued_spin_lock_slowpath", 40),
                ],
                140,
                40,
                ops,
            ),
        ),
    ])
}

fn cells(t: &kscale_report::Table, row: usize) -> Vec<String> {
    t.rows[row].cells.iter().map(|c| c.text.clone()).collect()
}

#[test]
fn the_lock_slow_path_is_where_the_time_went() {
    let t = cpu_growth(&run(Some(1000)), &Cat).expect("two configurations");
    assert!(t
        .title
        .starts_with("Where did the extra time go? 1 CPU → all (2 CPUs)"));
    // Busy samples per op: 100 → 140 (+40 %); the slow path's 40 samples
    // per 1000 ops are 40 points of the 1-CPU busy time per op.
    assert_eq!(
        cells(&t, 0),
        [
            "fam",
            "+40%",
            "0.0 → 50.0",
            "0.0 → 40.0",
            "native_queued_spin_lock_slowpath",
            "+40.0",
            "–"
        ]
    );
    // Nothing else grew, and idle never appears as a routine.
    assert_eq!(t.rows.len(), 1, "{}", t.to_terminal(false));
    assert!(!t.to_terminal(false).contains("pv_native_safe_halt"));
}

#[test]
fn without_operation_counts_shares_of_busy_samples() {
    let t = cpu_growth(&run(None), &Cat).expect("two configurations");
    let row = cells(&t, 0);
    assert_eq!(row[1], "–");
    // 0 % → 40/140 of busy samples.
    assert_eq!(row[4], "native_queued_spin_lock_slowpath");
    assert_eq!(row[5], "+28.6 †");
    assert!(t.notes.iter().any(|n| n.starts_with("†")));
}

#[test]
fn idle_is_a_share_never_a_routine() {
    let r = run(Some(1000));
    let all = &r.cases[1];
    // pv_native_safe_halt has the most samples, yet the busiest routine
    // is do_syscall_64.
    let summary = case_summary(&Cat, all).unwrap();
    assert!(summary.contains("(top: do_syscall_64 17.9%)"), "{summary}");
    assert!(summary.contains("idle 50.0%"), "{summary}");
    let t = case_table(&Cat, all).unwrap();
    let names: Vec<&str> = t.rows.iter().map(|r| r.cells[0].text.as_str()).collect();
    assert_eq!(
        names,
        [
            "do_syscall_64",
            "native_queued_spin_lock_slowpath",
            "schedule",
            "kernel",
            "user",
            "idle",
            "spin-lock"
        ]
    );
    let s = summary_table(&r, &Cat).unwrap();
    assert!(s.rows.iter().all(|r| !r.cells[7].text.contains("halt")));
}

#[test]
fn one_configuration_has_no_growth() {
    let mut r = run(Some(1000));
    r.cases.truncate(1);
    assert!(cpu_growth(&r, &Cat).is_none());
}

/// A top 10 drawn from fewer than 1,000 samples says so beside it, in
/// every view; one drawn from more says nothing.
#[test]
fn a_ranking_from_few_samples_says_so() {
    let r = run(Some(1000));
    let (one, all) = (&r.cases[0], &r.cases[1]);
    let few = "from 100 samples — too few for a stable ranking";
    assert!(case_table(&Cat, one).unwrap().title.contains(few));
    assert!(case_summary(&Cat, one).unwrap().contains(few));
    let s = summary_table(&r, &Cat).unwrap();
    assert_eq!(s.rows[0].cells[1].text, "100 (few)");
    assert!(s
        .notes
        .iter()
        .any(|n| n.contains("too few for a stable ranking")));
    let g = cpu_growth(&r, &Cat).unwrap();
    assert!(g.notes.iter().any(|n| n.contains("as few as 100 samples")));
    let d = diff_table("diff", "A", "B", clock(one), clock(all), 10);
    assert!(d.title.contains("A from 100 samples") && d.title.contains("B from 280"));

    // Twenty times the samples: enough, and nothing is said.
    let mut big = r.clone();
    for c in &mut big.cases {
        let p = &mut c.profiles[0];
        for n in [
            &mut p.total,
            &mut p.kernel,
            &mut p.user,
            &mut p.idle,
            &mut p.spinlock,
        ] {
            *n *= 20;
        }
        for (_, n) in p.by_symbol.iter_mut().chain(p.by_comm.iter_mut()) {
            *n *= 20;
        }
    }
    assert!(big.cases[0].profiles[0].total >= MIN_SAMPLES);
    assert!(!case_table(&Cat, &big.cases[0])
        .unwrap()
        .title
        .contains("too few"));
    assert!(!summary_table(&big, &Cat)
        .unwrap()
        .to_terminal(false)
        .contains("few"));
    assert!(!cpu_growth(&big, &Cat)
        .unwrap()
        .to_terminal(false)
        .contains("too few"));
}

fn clock(c: &CaseData) -> &Profile {
    &c.profiles[0]
}

/// The spin-lock share is drawn with its interval from the sample count,
/// hollow where the count is too small.
#[test]
fn spin_lock_bars_carry_their_sampling_interval() {
    // 10 of 100 samples: 5.5–17.4 % (Wilson, 95 %).
    let (lo, hi) = share_interval(10.0, 100);
    assert!(
        (lo - 5.52).abs() < 0.01 && (hi - 17.44).abs() < 0.01,
        "{lo} {hi}"
    );
    let (lo, hi) = share_interval(0.0, 100);
    assert!(lo == 0.0 && hi > 3.0);
    assert_eq!(share_interval(5.0, 0), (0.0, 100.0));
    let r = run(Some(1000));
    let svg = spinlock_chart(&[("a", &r)], &Cat).unwrap().to_svg();
    assert_eq!(svg.matches(r#"<g class="point">"#).count(), 2);
    assert_eq!(svg.matches(r#"data-converged="false""#).count(), 2);
    assert!(svg.contains("hollow: a profile of fewer than 1,000 samples"));
}
