//! The kernel-profile views on hand-made profiles: what grew from 1 CPU to
//! all is found and measured per operation, idle is its own share and never
//! a routine, and profiles without operation counts fall back to shares.

mod common;

use kscale_core::profile::{Hit, Profile, ProfileBuilder};
use kscale_core::Direction;
use kscale_report::profile::{case_summary, case_table, cpu_growth, summary_table};
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
