//! The gauge before a run and the control through it (docs/noise.md,
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
use kscale_workloads::machine_probe::GaugeRequest;
use std::cell::RefCell;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Wall time between two control readings: two or three a spell of the
/// host's slow drift (20–60 s here), at ~0.1 s each about 1 % of a run.
pub const EVERY: Duration = Duration::from_secs(10);
/// Wall time between two control readings while a paced run waits for its
/// next trial (`--span`): such a run sleeps most of its time, so a
/// reading a second costs it nothing, and the run's machine table has the
/// machine's state next to every trial (docs/noise.md, "The gauge and
/// the control").
pub const PACED_EVERY: Duration = Duration::from_secs(1);
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
    /// When [`tick`] last looked for other runs.
    static LOOKED: RefCell<Option<Instant>> = const { RefCell::new(None) };
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

/// Runs `kscale __gauge` for `req` and returns its readings, its time
/// drawn on the budget's ledger as the control's.
pub fn take(req: &GaugeRequest) -> Result<Vec<Reading>> {
    let started = Instant::now();
    let got = take_now(req);
    super::budget::draw(
        super::budget::Spender::ControlReadings,
        started.elapsed().as_secs_f64(),
    );
    got
}

fn take_now(req: &GaugeRequest) -> Result<Vec<Reading>> {
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

/// The readings a run plans with: [`BEFORE_READINGS`] of each CPU, and
/// where those read the machine noisier than [`LOOK_AGAIN_CV`], as many again,
/// all of them kept (docs/noise.md, "The gauge and the control"). Eight
/// readings span under a second: one spell of the host or a neighbour
/// that covers two of them reads as a CV of 30–50 % through the 20 %
/// winsorizing, while the cases, whose trials span minutes and whose
/// estimators trim such spells, see a few per cent; a spell that lasts
/// shows in the second look as well.
fn first_look(cpus: &[usize], t0_s: f64) -> Result<Vec<Reading>> {
    let req = GaugeRequest {
        cpus: cpus.to_vec(),
        readings: BEFORE_READINGS,
        spacing_ms: BEFORE_SPACING_MS,
        t0_s,
    };
    let started = Instant::now();
    let mut readings = take(&req)?;
    let first = worst_cv(&readings).max(worst_thread_cv(&readings));
    if first > LOOK_AGAIN_CV {
        std::thread::sleep(Duration::from_millis(BEFORE_SPACING_MS));
        readings.extend(take(&GaugeRequest {
            t0_s: t0_s + started.elapsed().as_secs_f64(),
            ..req
        })?);
        eprintln!(
            "kscale: gauge: {BEFORE_READINGS} readings a CPU read a CV of {}, so it read {BEFORE_READINGS} more: the {} read {}",
            pct(first),
            2 * BEFORE_READINGS,
            pct(worst_cv(&readings).max(worst_thread_cv(&readings)))
        );
    }
    Ok(readings)
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
    // Readings taken for the plan, before the run existed: stored as its
    // gauge, at the run's time zero.
    if let Some(readings) = PRESET.with(|p| p.borrow_mut().take()) {
        return start_control(store, run_id, cpus, seq, 0.0, Instant::now(), readings);
    }
    let t0_s = store
        .gauge(run_id)
        .ok()
        .and_then(|g| g.last().map(|r| r.t_s + 1.0))
        .unwrap_or(0.0);
    OTHERS.with(|o| o.borrow_mut().clear());
    look_for_others();
    let started = Instant::now();
    let readings = match first_look(cpus, t0_s) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kscale: gauge: {e:#}; the run goes on without a control");
            return None;
        }
    };
    start_control(store, run_id, cpus, seq, t0_s, started, readings)
}

/// Stores the gauge's `readings` from `seq` on and starts the control.
fn start_control(
    store: &Store,
    run_id: i64,
    cpus: &[usize],
    seq: i64,
    t0_s: f64,
    started: Instant,
    readings: Vec<Reading>,
) -> Option<Vec<Reading>> {
    let next = match store.add_gauge(run_id, seq, &readings) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("kscale: gauge: cannot store its readings: {e}");
            seq + readings.len() as i64
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
    // Another run is looked for more often than the machine is read, and
    // often enough to see a run that lives a second: a /proc scan costs
    // well under a millisecond.
    let due = LOOKED.with(|l| {
        let mut l = l.borrow_mut();
        let due = l.is_none_or(|t: Instant| t.elapsed() >= Duration::from_millis(250));
        if due {
            *l = Some(Instant::now());
        }
        due
    });
    if due && CONTROL.with(|c| c.borrow().is_some()) {
        look_for_others();
    }
    sample(store, Some(EVERY), 1);
}

/// One control reading of every CPU when [`PACED_EVERY`] has passed since
/// the last: called by a paced run when no trial is due yet.
pub fn tick_paced(store: &Store) {
    sample(store, Some(PACED_EVERY), 1);
}

/// `readings` control readings when `every` has passed since the last
/// one, or now (`None`).
fn sample(store: &Store, every: Option<Duration>, readings: usize) {
    let due = CONTROL.with(|c| {
        c.borrow().as_ref().and_then(|c| {
            let due = every.is_none_or(|e| c.last.elapsed() >= e);
            (c.store_path == store.location() && due).then(|| GaugeRequest {
                cpus: c.cpus.clone(),
                readings,
                spacing_ms: 0,
                t0_s: c.t0.elapsed().as_secs_f64(),
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
/// ends. A run too short for a reading between its trials (an unpaced
/// quick run of a second or two: the gauge's eight and this one) ends
/// with as many as bring each CPU to [`noise::MIN_LEVEL_READINGS`], so
/// that the machine's level through the run is known on a one-CPU case's
/// CPU as well as on every CPU (docs/noise.md, "The gauge and the
/// control"). About 0.1 s a reading.
pub fn end(store: &Store) -> Option<Vec<Reading>> {
    let short = CONTROL.with(|c| {
        c.borrow().as_ref().map_or(0, |c| {
            c.cpus
                .iter()
                .map(|cpu| c.readings.iter().filter(|r| r.cpu == *cpu).count())
                .min()
                .map_or(0, |have| noise::MIN_LEVEL_READINGS.saturating_sub(have))
        })
    });
    sample(store, None, short.max(1));
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
            if n.sys_median_ns.is_finite() {
                s += &format!(
                    "; system call {:.0} ns, CV {}",
                    n.sys_median_ns,
                    pct(n.sys_cv)
                );
                if n.sys_drift > 0.0 {
                    s += &format!(", drift {}", pct(n.sys_drift));
                }
            }
            if let Some(m) = med(mem) {
                s += &format!("; memory {:.1} GB/s, CV {}", m / 1000.0, pct(n.mem_cv));
            }
            if let Some(w) = med(wake) {
                s += &format!("; wake-up {w:.1} µs, CV {}", pct(n.wake_cv));
            }
            if let Some(t) = n.thread_cv {
                s += &format!("; on the thread's CPU clock CV {}", pct(t));
            }
            s
        })
        .collect()
}

/// The noisiest CPU's CV in `readings`, the CPU loop's or the kernel
/// crossing's, whichever is larger (0 when there are none).
pub fn worst_cv(readings: &[Reading]) -> f64 {
    worst(readings, noise::CpuNoise::plan_cv)
}

/// The noisiest CPU's CPU-loop CV on the wall's clock alone (0 without
/// readings): what says whether the host gives the guest's cores their
/// speed, apart from its kernel crossings ([`whole_plan`]).
pub fn worst_loop_cv(readings: &[Reading]) -> f64 {
    worst(readings, |n| n.cv)
}

/// Whether a study measures its whole plan at what `readings` show: where
/// the gauge's plan spread ([`plan_wall_cv`]) is at most [`QUIET_CV`], or
/// where the CPU loop reads at most [`QUIET_LOOP_CV`] whatever the kernel
/// crossing reads ([`loop_keeps_whole`]).
pub fn whole_plan(readings: &[Reading]) -> bool {
    plan_wall_cv(readings) <= QUIET_CV || loop_keeps_whole(readings)
}

/// Whether the plan is kept whole by a steady CPU loop over a kernel
/// crossing spread past [`QUIET_CV`].
pub fn loop_keeps_whole(readings: &[Reading]) -> bool {
    plan_wall_cv(readings) > QUIET_CV && worst_loop_cv(readings) <= QUIET_LOOP_CV
}

/// The spreads cases are planned at, on the wall's clock and on the
/// thread's: [`plan_wall_cv`] and [`worst_thread_cv`], or the CPU loop's
/// on both where it keeps the plan whole ([`loop_keeps_whole`]). A plan
/// that trusts the loop predicts what the loop says; planned at a crossing
/// spread 16–18 %, three such studies predicted 26–31 % converged, and
/// the pilots of all three read 100 % (docs/validation.md).
pub fn planned_cvs(readings: &[Reading]) -> (f64, f64) {
    if loop_keeps_whole(readings) {
        let l = worst_loop_cv(readings);
        (l, l)
    } else {
        (plan_wall_cv(readings), worst_thread_cv(readings))
    }
}

/// The spread a case timed on the wall is planned at: the wall's
/// ([`worst_cv`]), or where the thread's CPU clock read the same probes
/// steadier, the thread clock's. The CPU clock counts the hypervisor's
/// steal and the host's spells as the wall does, so what the wall reads
/// beyond it is time other tasks in the guest took from the probe — which
/// every trial records (others' share of its CPUs) and the runner fits out
/// of a case's interval (docs/host.md, "Others on the trial's CPUs").
/// Under `noisy-neighbour --duty 25` a gauge read 57 % on the wall and
/// 1 % on the CPU clock; planned at 57 % the study kept 20 of its 130
/// cases and predicted half of them converged, and all did.
pub fn plan_wall_cv(readings: &[Reading]) -> f64 {
    worst_cv(readings).min(worst_thread_cv(readings))
}

/// [`worst_cv`] on the thread's CPU clock: the spread cases timed on it
/// are planned at (docs/host.md, "The thread's own clock").
pub fn worst_thread_cv(readings: &[Reading]) -> f64 {
    worst(readings, noise::CpuNoise::plan_thread_cv)
}

/// The largest of `cv` over the CPUs `readings` cover (0 without any).
fn worst(readings: &[Reading], cv: fn(&noise::CpuNoise) -> f64) -> f64 {
    noise::per_cpu(readings)
        .iter()
        .map(cv)
        .filter(|c| c.is_finite())
        .fold(0.0, f64::max)
}

/// The spread a case of `w` is planned at: the gauge's on its clock.
pub fn case_cv(w: &kscale_workloads::WorkloadDef, wall: f64, thread: f64) -> f64 {
    match w.clock {
        kscale_workloads::Clock::Wall => wall,
        kscale_workloads::Clock::Thread => thread,
    }
}

thread_local! {
    /// Readings taken before the run exists (a noise-planned study),
    /// stored as the run's gauge instead of reading again.
    static PRESET: RefCell<Option<Vec<Reading>>> = const { RefCell::new(None) };
}

/// The gauge before a run whose plan is not made yet: every CPU of
/// `opts`'s plan read as [`begin`] reads it. The next [`begin`] stores
/// these readings instead of taking its own.
pub fn before_plan(opts: &super::args::RunOptions) -> Option<Vec<Reading>> {
    let cpus = used_cpus(opts);
    if !enabled() || cpus.is_empty() {
        return None;
    }
    match first_look(&cpus, 0.0) {
        Ok(r) => {
            PRESET.with(|p| *p.borrow_mut() = Some(r.clone()));
            Some(r)
        }
        Err(e) => {
            eprintln!("kscale: gauge: {e:#}; the study is planned without it");
            None
        }
    }
}

/// Every CPU a case of the run may use: what the gauge reads.
pub fn used_cpus(opts: &super::args::RunOptions) -> Vec<usize> {
    let mut cpus: Vec<usize> = opts
        .plan
        .iter()
        .flat_map(|e| e.cpus.iter().copied())
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    cpus
}

/// The plan fitted to the noise `readings` show (docs/planning.md, "Planning
/// to the noise"): when the budget cannot decide every converging case at
/// the noisiest CPU's spread, each workload keeps its representative
/// sizes (the middle of its sweep, then its ends, then midpoints) and the
/// rest are left out, one param combination on every configuration at a
/// time, until the outlook decides what is kept; past that, workloads'
/// representatives go too, down to one case a family. Cases that do not
/// converge (median of N) and capacity searches are always kept; their
/// time and the profiles' share come off the budget first. Returns the
/// left-out cases, one line per workload, and the outlook of the plan;
/// the cases themselves go to `opts.held`, which the run takes back from
/// after its pilot where the kept cases' spread leaves room
/// (docs/planning.md, "Taking cases back"). With `fit` false the plan is left whole and only its outlook returned.
pub fn fit_to_noise(
    opts: &mut super::args::RunOptions,
    readings: &[Reading],
    fit: bool,
) -> (Vec<String>, Option<noise::Outlook>) {
    let Some(budget_s) = opts.budget_s else {
        return (Vec::new(), None);
    };
    let (cv, thread_cv) = planned_cvs(readings);
    let rule = opts.rule;
    let costs = super::costs::guessed_costs(opts);
    let searched = opts.capacity && opts.plan.iter().any(super::plan::searched);
    let mut fixed_s = 0.0;
    // Converging cases, in plan order, with their groups and ranks.
    let mut cands = Vec::new();
    let mut index = Vec::new();
    let mut groups: Vec<(String, std::collections::BTreeMap<String, String>)> = Vec::new();
    let mut cost = costs.iter();
    for (i, e) in opts.plan.iter().enumerate() {
        let Some(w) = kscale_workloads::find(&e.workload) else {
            continue;
        };
        if searched && super::plan::param_of(w).is_some() {
            continue;
        }
        if let Some(s) = super::costs::guessed_median_cost(w, opts) {
            fixed_s += s;
            continue;
        }
        let Some(&(per_s, once_s)) = cost.next() else {
            break;
        };
        let g = groups
            .iter()
            .position(|g| g.0 == e.workload && g.1 == e.params)
            .unwrap_or_else(|| {
                groups.push((e.workload.clone(), e.params.clone()));
                groups.len() - 1
            });
        cands.push(noise::Candidate {
            group: g,
            rank: 0,
            per_s,
            fixed_s: once_s,
            cv: case_cv(w, cv, thread_cv),
        });
        index.push(i);
    }
    // Each workload's groups ranked along its sweep (plan::ranks).
    let ranks = super::plan::ranks(index.iter().map(|&i| &opts.plan[i]));
    for (c, r) in cands.iter_mut().zip(ranks) {
        c.rank = r;
    }
    let share = super::budget::cases_share(opts.profile_share(), searched);
    let left = (budget_s * share - fixed_s).max(0.0);
    // A quiet machine measures the whole plan.
    if whole_plan(readings) || !fit {
        let o = noise::outlook_each(
            cv,
            rule.width_pct / 100.0,
            rule.confidence_pct / 100.0,
            rule.max_trials,
            &cands
                .iter()
                .map(|c| (c.per_s, c.fixed_s, c.cv))
                .collect::<Vec<_>>(),
            Some(left),
        );
        return (Vec::new(), Some(o));
    }
    let (keep, o) = noise::choose(
        &cands,
        cv,
        rule.width_pct / 100.0,
        rule.confidence_pct / 100.0,
        rule.max_trials,
        left,
    );
    let dropped: std::collections::BTreeSet<usize> = index
        .iter()
        .zip(&keep)
        .filter(|(_, k)| !**k)
        .map(|(i, _)| *i)
        .collect();
    if dropped.is_empty() {
        return (Vec::new(), Some(o));
    }
    // Every case keeps its place in the whole plan, so that one taken
    // back after the pilot is stored among its sweep's neighbours.
    for (i, e) in opts.plan.iter_mut().enumerate() {
        e.seq.get_or_insert(i as i64);
    }
    let rank_of: std::collections::BTreeMap<usize, u32> = index
        .iter()
        .zip(&cands)
        .map(|(&i, c)| (i, c.rank))
        .collect();
    let mut held = Vec::new();
    let mut i = 0;
    opts.plan.retain(|e| {
        let k = !dropped.contains(&i);
        if !k {
            held.push(super::plan::HeldCase {
                rank: rank_of.get(&i).copied().unwrap_or(u32::MAX),
                entry: e.clone(),
            });
        }
        i += 1;
        k
    });
    let lines = super::plan::held_lines(held.iter().map(|h| &h.entry));
    opts.held = held;
    (lines, Some(o))
}

/// A first look's spread above which the gauge reads as many again
/// before the plan: above it the outlook plans more trials a case than a
/// quiet machine's three, and a spell over two of eight readings, gone in
/// the second look, would make it predict too few cases converged (a plain
/// study's first look read the system call at 10 % on one CPU, the CPU loop
/// at 1 %, and predicted 82 % converged; all were). The second look costs
/// about a second.
pub const LOOK_AGAIN_CV: f64 = 0.05;

/// A gauge spread ([`plan_wall_cv`]: the larger of the CPU loop's and the
/// kernel crossing's) at or under which a study measures its whole plan.
/// The outlook plans every case at the machine's spread, but most cases
/// converge in a few trials where the machine is moderately quiet: at a
/// gauge CV of 13 %, a study trimmed to 38 of its 130 cases (the outlook
/// deciding all of them) converged 72 % of those it kept. Below this the
/// budget planner's own futility stops leave out what cannot converge.
pub const QUIET_CV: f64 = 0.10;

/// A CPU-loop spread at or under which a study measures its whole plan
/// whatever the kernel crossing reads. At an hour when the host spread
/// the gauge's 3 ms crossings by 14–17 % and the loop by 1 %, three quick
/// studies planned at the crossing kept 22–26 of their 130 cases, and
/// their pilots read those cases at 1–5 %: the crossing's readings, a
/// second of the machine, spoke for a spread the cases' longer trials
/// did not meet. Where a kernel path does spread its case, the pilot
/// leaves that case out (docs/planning.md, "Planning to the noise").
pub const QUIET_LOOP_CV: f64 = 0.05;
