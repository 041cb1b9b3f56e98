//! The machine's own speed over a run, from the gauge before it and the
//! control through it (docs/noise.md, "The gauge and the control"): the
//! table `show` and the report print beside the cases measured in the same
//! minutes, so that a case's spread can be read against the machine's.

use crate::format::sig;
use crate::table::{Cell, RowKind, Table, Tone};
use kscale_core::noise::{per_cpu, Reading, MOMENT_S};

/// A CPU-loop spread above this is called out: at 10 % a 10 % interval
/// already needs ~18 trials a case (docs/method.md).
const NOISY_CV: f64 = 0.10;

/// One row per CPU (readings, CPU loop median and range, CV, drift between
/// [`MOMENT_S`] windows, memory and wake-up medians) and one row per
/// window of the run's time with each CPU's loop median, so the machine's
/// speed can be followed over the run. `None` for a run without readings.
/// A spread, marked when it is above [`NOISY_CV`].
fn cv_cell(cv: f64) -> Cell {
    Cell::tone(
        format!("{:.1} %", cv * 100.0),
        if cv > NOISY_CV {
            Tone::Warn
        } else {
            Tone::Plain
        },
    )
}

pub fn machine_table(readings: &[Reading]) -> Option<Table> {
    if readings.is_empty() {
        return None;
    }
    let mut t = Table::new(
        "The machine over the run (gauge before the first trial, control between trials)",
        [
            "CPU",
            "readings",
            "loop ms",
            "min",
            "max",
            "CV",
            "drift",
            "memory GB/s",
            "wake-up µs",
            "syscall ns",
            "syscall CV",
            "syscall drift",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
    );
    let med = |mut v: Vec<f64>| -> Option<f64> {
        v.sort_by(f64::total_cmp);
        (!v.is_empty()).then(|| v[v.len() / 2])
    };
    for n in per_cpu(readings) {
        let mine: Vec<&Reading> = readings.iter().filter(|r| r.cpu == n.cpu).collect();
        let ns: Vec<f64> = mine.iter().map(|r| r.cpu_ns).collect();
        let lo = ns.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = ns.iter().copied().fold(0.0, f64::max);
        let opt = |v: Option<f64>, scale: f64| v.map_or("–".to_string(), |x| sig(x * scale, 3));
        t.push(
            RowKind::Data,
            vec![
                Cell::new(n.cpu.to_string()),
                Cell::new(n.readings.to_string()),
                Cell::new(sig(n.median_ns / 1e6, 3)),
                Cell::new(sig(lo / 1e6, 3)),
                Cell::new(sig(hi / 1e6, 3)),
                cv_cell(n.cv),
                Cell::new(format!("{:.1} %", n.drift * 100.0)),
                Cell::new(opt(
                    med(mine.iter().filter_map(|r| r.mem_mbs).collect()),
                    1e-3,
                )),
                Cell::new(opt(
                    med(mine.iter().filter_map(|r| r.wake_us).collect()),
                    1.0,
                )),
                Cell::new(opt(
                    n.sys_median_ns.is_finite().then_some(n.sys_median_ns),
                    1.0,
                )),
                cv_cell(n.sys_cv),
                Cell::new(format!("{:.1} %", n.sys_drift * 100.0)),
            ],
        );
    }
    // The CPU loop over the run's time, a row per window.
    let cpus: Vec<usize> = per_cpu(readings).iter().map(|n| n.cpu).collect();
    let last = readings.iter().map(|r| r.t_s).fold(0.0, f64::max);
    let windows = (last / MOMENT_S).floor() as usize + 1;
    if windows > 1 {
        let mut series = Vec::new();
        for w in 0..windows {
            let (a, b) = (w as f64 * MOMENT_S, (w + 1) as f64 * MOMENT_S);
            let cells: Vec<String> = cpus
                .iter()
                .map(|&c| {
                    med(readings
                        .iter()
                        .filter(|r| r.cpu == c && r.t_s >= a && r.t_s < b)
                        .map(|r| r.cpu_ns)
                        .collect())
                    .map_or("–".into(), |ns| sig(ns / 1e6, 3))
                })
                .collect();
            series.push(format!(
                "{:>4.0}–{:<4.0} s: {}",
                a,
                b,
                cpus.iter()
                    .zip(&cells)
                    .map(|(c, v)| format!("CPU {c} {v} ms"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        t.notes
            .push("The CPU loop's median over the run, by 20 s window:".into());
        t.notes.extend(series);
    }
    t.notes.push(
        "loop: one fixed CPU-bound loop (the median of 3 repetitions a reading); CV over the \
         readings; drift: the largest ratio − 1 between two 20 s windows' medians. A case \
         whose spread is near the machine's CV cannot be narrower than the machine allows."
            .into(),
    );
    Some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_per_cpu_and_the_loop_over_time() {
        let rs: Vec<Reading> = (0..8)
            .flat_map(|i| {
                (0..2).map(move |cpu| Reading {
                    t_s: i as f64 * 10.0,
                    cpu,
                    cpu_ns: if cpu == 1 && i >= 4 { 3.0e6 } else { 2.0e6 },
                    mem_mbs: Some(9000.0),
                    wake_us: Some(12.5),
                    sys_ns: Some(110.0),
                    cpu_mean_ns: None,
                    cpu_thread_ns: None,
                    sys_thread_ns: None,
                })
            })
            .collect();
        let t = machine_table(&rs).expect("readings make a table");
        assert_eq!(t.rows.len(), 2);
        let text = t.to_terminal(false);
        assert!(text.contains("50.0 %"), "CPU 1's drift: {text}");
        assert!(
            text.contains("CPU 1 3 ms") || text.contains("CPU 1 3.00 ms"),
            "{text}"
        );
        assert!(machine_table(&[]).is_none());
    }
}
