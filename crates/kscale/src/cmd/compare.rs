//! `kscale compare A B [C…]`: systems side by side, seed 003's layout.

use crate::engine::gate;
use crate::error::user;
use anyhow::Result;
use kscale_core::noise::{self, Reading};
use kscale_report::compare::{compare_metric, decide, tables, SideSpread};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(after_help = "Examples:
  kscale compare 6.1.0 6.8.0              the latest runs of two labels
  kscale compare 3 4 5 --format md        three runs, as a Markdown table")]
pub struct Args {
    /// Runs to compare (ids, labels or `latest`); the first is the baseline A.
    #[arg(value_name = "RUN", num_args = 2.., required = true)]
    runs: Vec<String>,
    /// Compare on this metric (e.g. `p99`, `sd_server`) instead of each
    /// case's primary one; `kscale list` shows every workload's metrics.
    #[arg(long, value_name = "NAME")]
    metric: Option<String>,
    /// The change within which two systems are "the same", in % (`5%` or
    /// `5`): each case and each family gets a verdict at it
    /// (docs/verdicts.md).
    #[arg(long, value_name = "PCT", default_value = "5%")]
    threshold: String,
    /// Output format.
    #[arg(long, value_enum, default_value = "terminal")]
    format: crate::output::Format,
}

pub fn run(args: Args, db: Option<PathBuf>) -> Result<ExitCode> {
    let threshold = super::check::parse_threshold(&args.threshold)?;
    let store = super::open_existing(db)?;
    let mut ids = Vec::new();
    let mut labels = Vec::new();
    for spec in &args.runs {
        ids.push(store.resolve(spec)?);
        labels.push(named_by_label(spec));
    }
    print_comparison(
        &store,
        &ids,
        &labels,
        args.metric.as_deref(),
        threshold,
        args.format,
    )?;
    Ok(ExitCode::SUCCESS)
}

/// The line that says which runs the verdicts read, where a side stands
/// on more than the run its column shows.
fn sides_note(data: &[kscale_store::RunData], sides: &[Vec<i64>]) -> Option<String> {
    if sides.iter().all(|s| s.len() < 2) {
        return None;
    }
    let each: Vec<String> = data
        .iter()
        .zip(sides)
        .map(|(d, s)| match s.len() {
            0 | 1 => format!("{}: run {}", d.run.label, d.run.id),
            n => format!("{}: {n} runs", d.run.label),
        })
        .collect();
    Some(format!(
        "Verdicts read each side's runs on its machine, their mean ({}); the columns show the latest.",
        each.join("; ")
    ))
}

/// Whether a side was named by its label rather than a run (an id or
/// `latest`): its verdict then reads every run of that label.
fn named_by_label(spec: &str) -> bool {
    let spec = spec.trim();
    spec != "latest" && spec.parse::<i64>().is_err()
}

/// Prints the runs `ids` side by side with a verdict per case at
/// `threshold`: what `kscale compare` prints, for the commands that end
/// with a comparison of the runs they stored (`kscale vm --compare`).
/// A side whose `by_label` is true is its label's runs on its machine:
/// the columns show the latest, the verdict their mean.
pub fn print_comparison(
    store: &kscale_store::Store,
    ids: &[i64],
    by_label: &[bool],
    metric: Option<&str>,
    threshold: f64,
    format: crate::output::Format,
) -> Result<()> {
    let mut data = Vec::new();
    for &id in ids {
        data.push(store.load_run(id)?);
    }
    let refs: Vec<&kscale_store::RunData> = data.iter().collect();
    let mut cmp =
        compare_metric(&refs, &super::Registry, metric).map_err(|e| user(e.to_string()))?;
    let sides = verdicts(store, &data, by_label, &mut cmp, threshold)?;
    let mut tables = tables(&cmp);
    // How the machine itself moved between the runs, from their gauge
    // readings (docs/noise.md, "The gauge and the control"): a ratio
    // within that is not the system's.
    let gauges = data
        .iter()
        .map(|d| store.gauge(d.run.id))
        .collect::<Result<Vec<_>, _>>()?;
    let any = gauges.iter().any(|g| !g.is_empty());
    // Cases timed on their thread's CPU clock meet the machine on that
    // clock, which leaves out the time other tasks took from their CPUs
    // (docs/host.md, "The thread's own clock").
    let on_thread_clock = data.iter().flat_map(|d| &d.cases).any(|c| {
        kscale_workloads::find(&c.key.workload)
            .is_some_and(|w| w.clock == kscale_workloads::Clock::Thread)
    });
    if let Some(last) = tables.last_mut().filter(|_| any) {
        for (i, g) in gauges.iter().enumerate().skip(1) {
            let line = match noise::machine_move(&gauges[0], g, &[]) {
                Some(m) => format!(
                    "The machine: its CPU loop (the gauge) ran {:.1} % {} in run {} than in run {}; its spread between moments, ±{:.1} %, is not the system's{}.",
                    ((m.slower - 1.0) * 100.0).abs(),
                    if m.slower >= 1.0 { "slower" } else { "faster" },
                    data[i].run.id,
                    data[0].run.id,
                    m.between_cv * 100.0,
                    on_thread(&gauges[0], g, &m, on_thread_clock),
                ),
                None => format!(
                    "The machine: run {} or run {} has no gauge readings, so how much the machine itself moved between them is unknown.",
                    data[0].run.id, data[i].run.id
                ),
            };
            last.notes.push(line);
        }
    }
    if let Some(last) = tables.last_mut() {
        if let Some(line) = sides_note(&data, &sides) {
            last.notes.push(line);
        }
    }
    super::print_result(&cmp, &tables, format)
}

/// Gives each case and family its verdict at `threshold`, from each
/// side's spread between runs of the case on that side's host and kernel
/// (docs/verdicts.md), and the runs each side's verdicts read: a side
/// named by its label (`by_label`) stands on every run of it there, so the
/// runs a "cannot tell" asks for are ones a user can add; an empty list
/// is the one run shown.
fn verdicts(
    store: &kscale_store::Store,
    data: &[kscale_store::RunData],
    by_label: &[bool],
    cmp: &mut kscale_report::compare::Comparison,
    threshold: f64,
) -> Result<Vec<Vec<i64>>> {
    let mut workloads: Vec<String> = cmp
        .families
        .iter()
        .flat_map(|f| f.rows.iter().map(|r| r.workload.clone()))
        .collect();
    workloads.sort();
    workloads.dedup();
    let stored = store.series(&workloads)?;
    // Systems on one host and kernel share one machine index.
    let machine: Vec<usize> = (0..data.len())
        .map(|i| {
            (0..=i)
                .find(|&j| gate::same_machine(&data[j].run.snapshot, &data[i].run.snapshot))
                .unwrap_or(i)
        })
        .collect();
    let sides: Vec<Vec<i64>> = data
        .iter()
        .enumerate()
        .map(|(i, d)| match by_label.get(i) {
            Some(true) => gate::label_runs(&stored, &d.run.snapshot, &d.run.label),
            _ => Vec::new(),
        })
        .collect();
    let target = |i: usize, row: &kscale_report::compare::CompareRow| gate::Target {
        workload: row.workload.clone(),
        params: row.params.clone(),
        cpus: data[i]
            .cases
            .iter()
            .find(|c| {
                c.key.workload == row.workload
                    && c.key.params == row.params
                    && kscale_core::cpus::base_name(&c.key.cpus)
                        == kscale_core::cpus::base_name(&row.cpus)
            })
            .map_or(row.cpus.clone(), |c| c.key.cpus.clone()),
        metric: row.metric.clone(),
        unit: row.unit.clone(),
        direction: row.direction,
    };
    decide(cmp, threshold, |i, rows| {
        let targets: Vec<gate::Target> = rows.iter().map(|r| target(i, r)).collect();
        let snapshot = &data[i].run.snapshot;
        let runs: Vec<f64> = if sides[i].len() > 1 {
            gate::levels_here(&stored, snapshot, &targets)
                .into_iter()
                .filter(|(id, _, _)| sides[i].contains(id))
                .map(|(_, level, _)| level)
                .collect()
        } else {
            Vec::new()
        };
        Some(SideSpread {
            spread: gate::spread_here(&stored, snapshot, &targets)?,
            machine: machine[i],
            // One run of the label is the run shown.
            runs: if runs.len() > 1 { runs } else { Vec::new() },
        })
    });
    Ok(sides)
}

/// The loop's move on the thread's CPU clock, for the cases timed on it
/// (`wanted`), where it differs from the wall's (`wall`, the same runs'
/// move on the wall) by a point or more: under
/// a neighbour the wall's loop moves with the neighbour's phases and the
/// thread clock's does not.
fn on_thread(base: &[Reading], now: &[Reading], wall: &noise::Move, wanted: bool) -> String {
    let (Some(b), Some(n)) = (
        noise::on_thread_clock(base).filter(|_| wanted),
        noise::on_thread_clock(now),
    ) else {
        return String::new();
    };
    let Some(t) = noise::machine_move(&b, &n, &[]) else {
        return String::new();
    };
    let pct = |m: &noise::Move| (m.slower - 1.0) * 100.0;
    if (pct(&t) - pct(wall)).abs() < 1.0 {
        return String::new();
    }
    format!(
        "; on the thread's CPU clock, which the cases timed on it meet, {:.1} % {} (spread ±{:.1} %)",
        pct(&t).abs(),
        if t.slower >= 1.0 { "slower" } else { "faster" },
        t.between_cv * 100.0
    )
}

#[cfg(test)]
mod tests {
    use super::{noise, on_thread, Reading};

    fn at(cpu_ns: f64, thread: f64) -> Vec<Reading> {
        (0..8)
            .map(|i| Reading {
                t_s: i as f64,
                cpu_ns,
                cpu_thread_ns: Some(thread),
                ..Default::default()
            })
            .collect()
    }

    /// A neighbour doubled the loop on the wall: the note says the thread
    /// clock did not move, for runs with cases timed on it, and says
    /// nothing where the clocks agree or no case is on the thread's.
    #[test]
    fn the_machine_note_adds_the_thread_clock_where_it_differs() {
        let note = |base: &[Reading], now: &[Reading], wanted: bool| {
            let wall = noise::machine_move(base, now, &[]).unwrap();
            on_thread(base, now, &wall, wanted)
        };
        let line = note(&at(100.0, 100.0), &at(200.0, 100.0), true);
        assert!(line.contains("on the thread's CPU clock"), "{line}");
        assert!(line.contains("0.0 % slower"), "{line}");
        assert_eq!(note(&at(100.0, 100.0), &at(200.0, 100.0), false), "");
        assert_eq!(note(&at(100.0, 100.0), &at(110.0, 110.0), true), "");
        let mut old = at(200.0, 100.0);
        old[0].cpu_thread_ns = None;
        assert_eq!(note(&at(100.0, 100.0), &old, true), "");
    }
}
