//! The gauge before a run and the control through it (docs/method.md,
//! "The gauge and the control"). Before the first trial the gauge reads
//! each CPU the run uses several times over a second, and the run says
//! what that noise means for it; then, between trials, a reading every
//! [`EVERY`] of wall time, and one at the end, all stored with the run. The
//! readings run in a `kscale __gauge` worker, as every trial does.
//!
//! One control lives for one run's execution. A capacity search calls the
//! runner once a step, so the control is held here, per thread, from
//! [`begin`] to [`end`], and the runner's turns only [`tick`] it.

use super::worker::self_exe;
use crate::signals;
use anyhow::{Context, Result};
use kscale_core::noise::{self, Reading};
use kscale_store::Store;
use kscale_workloads::gauge::GaugeRequest;
use std::cell::RefCell;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Wall time between two control readings: two or three a spell of the
/// host's slow drift (20–60 s here), at ~0.1 s each about 1 % of a run.
pub const EVERY: Duration = Duration::from_secs(10);
/// The gauge before a run: readings of every CPU, this far apart.
pub const BEFORE_READINGS: usize = 8;
pub const BEFORE_SPACING_MS: u64 = 100;
/// `KSCALE_NO_GAUGE=1` leaves a run without gauge or control, for tests
/// that count a run's processes or time a bare run.
const OFF_ENV: &str = "KSCALE_NO_GAUGE";

struct Control {
    store_path: String,
    run_id: i64,
    cpus: Vec<usize>,
    seq: i64,
    t0: Instant,
    last: Instant,
    readings: Vec<Reading>,
}

thread_local! {
    static CONTROL: RefCell<Option<Control>> = const { RefCell::new(None) };
    /// Other measuring kscale processes seen at a control reading of the
    /// current run.
    static OTHERS: RefCell<Vec<kscale_sys::process::OtherRun>> = const { RefCell::new(Vec::new()) };
}

/// Other measuring kscale processes seen while this run measured (at its
/// start or at a control reading), each once; the list is cleared.
pub fn others_seen() -> Vec<kscale_sys::process::OtherRun> {
    OTHERS.with(|o| std::mem::take(&mut *o.borrow_mut()))
}

fn look_for_others() {
    let found = kscale_sys::process::other_runs();
    OTHERS.with(|o| {
        let mut o = o.borrow_mut();
        for f in found {
            if !o.iter().any(|x| x.pid == f.pid) {
                o.push(f);
            }
        }
    });
}

/// Runs `kscale __gauge` for `req` and returns its readings.
pub fn take(req: &GaugeRequest) -> Result<Vec<Reading>> {
    use std::os::unix::process::CommandExt;
    let exe = self_exe().map_err(anyhow::Error::msg)?;
    let mut child = Command::new(exe)
        .arg("__gauge")
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start the gauge")?;
    let _registered = signals::Registered::new(child.id() as i32);
    let pid = child.id() as i32;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = writeln!(stdin, "{}", serde_json::to_string(req)?);
    }
    // The gauge's own length plus a margin a loaded machine may need.
    let limit = Duration::from_millis(req.spacing_ms * req.readings as u64)
        + Duration::from_secs(20 + 2 * req.cpus.len() as u64 * req.readings as u64);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(limit) {
        Ok(o) => o.context("waiting for the gauge")?,
        Err(_) => {
            kscale_sys::process::kill_group(pid);
            anyhow::bail!("the gauge did not answer within {} s", limit.as_secs());
        }
    };
    if !out.status.success() {
        anyhow::bail!(
            "the gauge failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap_or("")).context("the gauge sent a bad reply")
}

/// Whether runs take the gauge (not under [`OFF_ENV`]).
pub fn enabled() -> bool {
    std::env::var_os(OFF_ENV).is_none_or(|v| v.is_empty() || v == "0")
}

/// The gauge before run `run_id` on `cpus`, stored as sample 0 (or the
/// next sample of a resumed run); the control starts. Returns the
/// readings, for what the run says of them; `None` when the gauge is off
/// or could not run (said on stderr: the run goes on without it).
pub fn begin(store: &Store, run_id: i64, cpus: &[usize]) -> Option<Vec<Reading>> {
    if !enabled() || cpus.is_empty() {
        return None;
    }
    let seq = store.next_gauge_seq(run_id).unwrap_or(0);
    let t0_s = store
        .gauge(run_id)
        .ok()
        .and_then(|g| g.last().map(|r| r.t_s + 1.0))
        .unwrap_or(0.0);
    let req = GaugeRequest {
        cpus: cpus.to_vec(),
        readings: BEFORE_READINGS,
        spacing_ms: BEFORE_SPACING_MS,
        t0_s,
    };
    OTHERS.with(|o| o.borrow_mut().clear());
    look_for_others();
    let started = Instant::now();
    let readings = match take(&req) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kscale: gauge: {e:#}; the run goes on without a control");
            return None;
        }
    };
    let next = match store.add_gauge(run_id, seq, &readings) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("kscale: gauge: cannot store its readings: {e}");
            seq + BEFORE_READINGS as i64
        }
    };
    CONTROL.with(|c| {
        *c.borrow_mut() = Some(Control {
            store_path: store.location(),
            run_id,
            cpus: cpus.to_vec(),
            seq: next,
            // The run's time zero as the readings count it.
            t0: started
                .checked_sub(Duration::from_secs_f64(t0_s))
                .unwrap_or(started),
            last: Instant::now(),
            readings: readings.clone(),
        })
    });
    Some(readings)
}

/// One control reading of every CPU when [`EVERY`] has passed since the
/// last: called between trials, never during one.
pub fn tick(store: &Store) {
    sample(store, false);
}

fn sample(store: &Store, force: bool) {
    let due = CONTROL.with(|c| {
        c.borrow().as_ref().and_then(|c| {
            (c.store_path == store.location() && (force || c.last.elapsed() >= EVERY)).then(|| {
                GaugeRequest {
                    cpus: c.cpus.clone(),
                    readings: 1,
                    spacing_ms: 0,
                    t0_s: c.t0.elapsed().as_secs_f64(),
                }
            })
        })
    });
    let Some(req) = due else { return };
    look_for_others();
    let got = take(&req);
    CONTROL.with(|c| {
        let mut c = c.borrow_mut();
        let Some(c) = c.as_mut() else { return };
        c.last = Instant::now();
        match got {
            Ok(rs) => {
                match store.add_gauge(c.run_id, c.seq, &rs) {
                    Ok(n) => c.seq = n,
                    Err(e) => {
                        eprintln!("kscale: control: cannot store a reading: {e}");
                        c.seq += 1;
                    }
                }
                c.readings.extend(rs);
            }
            Err(e) => eprintln!("kscale: control: {e:#}"),
        }
    });
}

/// The control's last reading, and its readings over the run; the control
/// ends.
pub fn end(store: &Store) -> Option<Vec<Reading>> {
    sample(store, true);
    CONTROL.with(|c| c.borrow_mut().take().map(|c| c.readings))
}

/// Drops the control without a last reading (an interrupted run).
pub fn abandon() {
    CONTROL.with(|c| c.borrow_mut().take());
}

fn pct(x: f64) -> String {
    format!("{:.0} %", x * 100.0)
}

/// What the noise `readings` show means for a run: one line per CPU, and
/// the trials a case needs at the run's interval.
pub fn describe(readings: &[Reading]) -> Vec<String> {
    noise::per_cpu(readings)
        .iter()
        .map(|n| {
            let mem: Vec<f64> = readings
                .iter()
                .filter(|r| r.cpu == n.cpu)
                .filter_map(|r| r.mem_mbs)
                .collect();
            let wake: Vec<f64> = readings
                .iter()
                .filter(|r| r.cpu == n.cpu)
                .filter_map(|r| r.wake_us)
                .collect();
            let med = |mut v: Vec<f64>| {
                v.sort_by(f64::total_cmp);
                v.get(v.len() / 2).copied()
            };
            let mut s = format!(
                "CPU {}: loop {:.2} ms, CV {}",
                n.cpu,
                n.median_ns / 1e6,
                pct(n.cv)
            );
            if n.drift > 0.0 {
                s += &format!(", drift {}", pct(n.drift));
            }
            if let Some(m) = med(mem) {
                s += &format!("; memory {:.1} GB/s", m / 1000.0);
            }
            if let Some(w) = med(wake) {
                s += &format!("; wake-up {w:.1} µs");
            }
            s
        })
        .collect()
}

/// The noisiest CPU's CV in `readings` (0 when there are none).
pub fn worst_cv(readings: &[Reading]) -> f64 {
    noise::per_cpu(readings)
        .iter()
        .map(|n| n.cv)
        .filter(|c| c.is_finite())
        .fold(0.0, f64::max)
}
