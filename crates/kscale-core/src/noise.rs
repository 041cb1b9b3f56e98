//! The machine's own noise, from the gauge: a short fixed-work probe per
//! CPU taken before a run and again through it as a control
//! (docs/noise.md, "The gauge and the control"). The figures a run states
//! at its start (the CPU loop's spread, its drift, the trials a case will
//! need) and the machine's move between two runs that `check` and
//! `compare` show beside their verdicts are computed here, from stored
//! readings, so they can be recomputed and tested without a machine.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// One gauge reading of one CPU: what a fixed amount of work took there at
/// one moment of the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    /// Seconds since the run's first reading.
    pub t_s: f64,
    pub cpu: usize,
    /// Nanoseconds one fixed CPU loop took (the median of the reading's
    /// repetitions).
    pub cpu_ns: f64,
    /// MB/s of one pass over a buffer larger than the caches.
    pub mem_mbs: Option<f64>,
    /// Microseconds of one cross-CPU wake-up round trip to the next CPU of
    /// the set; `None` on a one-CPU set.
    pub wake_us: Option<f64>,
    /// Nanoseconds of one kernel crossing (`getppid`, the median of the
    /// reading's repetitions): the host's spells that slow every system
    /// call's entry and exit (its exits, its cache and TLB pressure) move
    /// it many times more than a loop that stays in registers; `None` in
    /// readings taken before it existed.
    #[serde(default)]
    pub sys_ns: Option<f64>,
    /// Nanoseconds of the CPU loop as the mean of the reading's
    /// repetitions: a preemption burst that lands in one repetition counts
    /// in it, where the median steps past it (docs/noise.md, "The gauge and
    /// the control"); `None` in readings taken before it existed.
    #[serde(default)]
    pub cpu_mean_ns: Option<f64>,
    /// The CPU loop and the kernel crossing on the calling thread's CPU
    /// clock (the medians of the same repetitions): the machine as a case
    /// timed on that clock meets it, with the time another task held the
    /// CPU left out (docs/host.md, "The thread's own clock"); `None` in
    /// readings taken before it existed.
    #[serde(default)]
    pub cpu_thread_ns: Option<f64>,
    #[serde(default)]
    pub sys_thread_ns: Option<f64>,
}

/// Seconds within which the control's readings count as one moment of the
/// machine: the host's spells last from a fraction of a second to tens of
/// seconds (docs/method.md), so readings further apart than this sample
/// different spells.
pub const MOMENT_S: f64 = 20.0;

/// The noise of one CPU, as the gauge read it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CpuNoise {
    pub cpu: usize,
    pub readings: usize,
    /// The CPU loop's coefficient of variation over the readings
    /// ([`winsorized_cv`]).
    pub cv: f64,
    /// The largest ratio − 1 between the medians of two of the readings'
    /// [`MOMENT_S`] windows (0 with fewer than two windows).
    pub drift: f64,
    /// The CPU loop's median, ns.
    pub median_ns: f64,
    /// The memory pass's and the wake-up's spreads ([`winsorized_cv`];
    /// 0 without readings): a host's other tenants that share the caches
    /// and memory slow a kernel path (a system call's data, a page's
    /// struct) without slowing a loop that stays in registers.
    pub mem_cv: f64,
    pub wake_cv: f64,
    /// The kernel crossing's spread ([`winsorized_cv`]) and drift (as
    /// [`CpuNoise::drift`]), and its median in ns (NaN without readings).
    pub sys_cv: f64,
    pub sys_drift: f64,
    pub sys_median_ns: f64,
    /// The larger of the CPU loop's and the kernel crossing's spreads on
    /// the thread's CPU clock ([`winsorized_cv`]); `None` without such
    /// readings.
    pub thread_cv: Option<f64>,
}

impl CpuNoise {
    /// The spread a case on this CPU is planned at: the larger of the CPU
    /// loop's and the kernel crossing's, since a case's trials cross the
    /// kernel as well as run code.
    pub fn plan_cv(&self) -> f64 {
        self.cv.max(self.sys_cv)
    }

    /// The spread a case timed on its thread's CPU clock is planned at
    /// (docs/host.md, "The thread's own clock"): the thread-clock
    /// probes', or [`CpuNoise::plan_cv`] where the readings have none.
    pub fn plan_thread_cv(&self) -> f64 {
        self.thread_cv.unwrap_or_else(|| self.plan_cv())
    }

    /// The larger drift of the two, as [`CpuNoise::plan_cv`].
    pub fn plan_drift(&self) -> f64 {
        self.drift.max(self.sys_drift)
    }
}

fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    if v.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let m = v.iter().sum::<f64>() / n;
    if v.len() < 2 {
        return (m, 0.0);
    }
    let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0);
    (m, var.sqrt())
}

/// The 20 % winsorized standard deviation over the 20 % trimmed mean: the
/// spread kscale's default estimator sees (docs/method.md, "Host spells
/// and the estimator"), so that one reading taken while the host ran
/// something else does not make a quiet machine read noisy, as it does not
/// widen a case's interval. Below five values nothing is trimmed.
pub fn winsorized_cv(values: &[f64]) -> f64 {
    let n = values.len();
    if n < 2 {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let g = if n >= 5 {
        (0.2 * n as f64).floor() as usize
    } else {
        0
    };
    let trimmed = &v[g..n - g];
    let center = trimmed.iter().sum::<f64>() / trimmed.len() as f64;
    let (lo, hi) = (v[g], v[n - 1 - g]);
    let w: Vec<f64> = v.iter().map(|x| x.clamp(lo, hi)).collect();
    let (_, sd) = mean_sd(&w);
    if center > 0.0 {
        sd / center
    } else {
        f64::NAN
    }
}

/// The level of the gauge's user-space CPU loop over one run's `readings`:
/// the 20 % trimmed mean of its time on the thread's CPU clock (the wall
/// clock's in readings taken before that existed), which a neighbour's
/// preemption leaves out as it does for a case timed on that clock. It
/// runs no kernel code, so a slower kernel path cannot move it: the
/// machine's own move beside a gate's verdicts (`verdict::beside_machine`).
/// `None` without a reading.
pub fn loop_level(readings: &[Reading]) -> Option<f64> {
    let v: Vec<f64> = readings
        .iter()
        .map(|r| {
            r.cpu_thread_ns
                .filter(|t| t.is_finite() && *t > 0.0)
                .unwrap_or(r.cpu_ns)
        })
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    (!v.is_empty()).then(|| trimmed_mean(&v))
}

/// The 20 % trimmed mean (the mean below five values).
fn trimmed_mean(values: &[f64]) -> f64 {
    let n = values.len();
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let g = if n >= 5 {
        (0.2 * n as f64).floor() as usize
    } else {
        0
    };
    let t = &v[g..n - g];
    t.iter().sum::<f64>() / t.len().max(1) as f64
}

/// Each CPU's noise over `readings`, in CPU order.
pub fn per_cpu(readings: &[Reading]) -> Vec<CpuNoise> {
    let mut cpus: Vec<usize> = readings.iter().map(|r| r.cpu).collect();
    cpus.sort_unstable();
    cpus.dedup();
    cpus.into_iter()
        .map(|cpu| {
            let mine: Vec<&Reading> = readings.iter().filter(|r| r.cpu == cpu).collect();
            let ns: Vec<f64> = mine.iter().map(|r| r.cpu_ns).collect();
            let mem: Vec<f64> = mine.iter().filter_map(|r| r.mem_mbs).collect();
            let wake: Vec<f64> = mine.iter().filter_map(|r| r.wake_us).collect();
            let sys: Vec<f64> = mine.iter().filter_map(|r| r.sys_ns).collect();
            let on_thread = |v: Vec<f64>| (v.len() >= 2).then(|| winsorized_cv(&v));
            let thread_cv = match (
                on_thread(mine.iter().filter_map(|r| r.cpu_thread_ns).collect()),
                on_thread(mine.iter().filter_map(|r| r.sys_thread_ns).collect()),
            ) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            CpuNoise {
                thread_cv,
                sys_cv: winsorized_cv(&sys),
                sys_drift: drift(&mine, Probe::Syscall),
                sys_median_ns: crate::stats::median(&sys),
                cpu,
                readings: mine.len(),
                mem_cv: winsorized_cv(&mem),
                wake_cv: winsorized_cv(&wake),
                cv: winsorized_cv(&ns),
                drift: drift(&mine, Probe::Loop),
                median_ns: crate::stats::median(&ns),
            }
        })
        .collect()
}

/// `readings` as a case timed on its thread's CPU clock meets the machine
/// (docs/host.md, "The thread's own clock"): each reading's CPU loop
/// and kernel crossing on that clock, which counts the host's spells and
/// steal as the wall does but not the time other tasks in the guest held
/// the CPU, as the case's own trials do not. The loop's mean over its
/// repetitions is the wall's, so it is left out. `None` where a reading
/// has no thread-clock loop (readings taken before it existed).
pub fn on_thread_clock(readings: &[Reading]) -> Option<Vec<Reading>> {
    readings
        .iter()
        .map(|r| {
            Some(Reading {
                cpu_ns: r.cpu_thread_ns?,
                sys_ns: r.sys_thread_ns,
                cpu_mean_ns: None,
                ..*r
            })
        })
        .collect()
}

/// Which of a reading's probes a figure is read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Probe {
    /// The CPU loop: the core's speed as the host gives it.
    Loop,
    /// The kernel crossing: a system call's entry and exit on this machine.
    Syscall,
}

impl Probe {
    /// The probe's time in `r` (larger: slower), when it was read.
    pub fn of(self, r: &Reading) -> Option<f64> {
        let v = match self {
            Probe::Loop => Some(r.cpu_ns),
            Probe::Syscall => r.sys_ns,
        };
        v.filter(|v| v.is_finite() && *v > 0.0)
    }

    pub fn name(self) -> &'static str {
        match self {
            Probe::Loop => "CPU loop",
            Probe::Syscall => "kernel crossing",
        }
    }
}

/// The largest ratio − 1 between two [`MOMENT_S`] windows' medians of
/// `probe`.
fn drift(readings: &[&Reading], probe: Probe) -> f64 {
    let mut windows: std::collections::BTreeMap<i64, Vec<f64>> = Default::default();
    for r in readings {
        if let Some(v) = probe.of(r) {
            windows
                .entry((r.t_s / MOMENT_S).floor() as i64)
                .or_default()
                .push(v);
        }
    }
    let meds: Vec<f64> = windows
        .into_values()
        .map(|v| crate::stats::median(&v))
        .collect();
    if meds.len() < 2 {
        return 0.0;
    }
    let lo = meds.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = meds.iter().copied().fold(0.0, f64::max);
    if lo > 0.0 {
        hi / lo - 1.0
    } else {
        0.0
    }
}

/// Counted trials a case needs for a full interval of `width` (a fraction
/// of the value) at `confidence` when its trials spread by `cv`: the
/// smallest n with 2·t(n−1)·cv/√n ≤ width, at least 3; `cap` when not even
/// that many would do.
pub fn trials_needed(cv: f64, width: f64, confidence: f64, cap: usize) -> usize {
    if !(cv.is_finite() && cv >= 0.0 && width > 0.0) {
        return cap;
    }
    let q = 1.0 - (1.0 - confidence) / 2.0;
    (3..=cap)
        .find(|&n| {
            let t = StudentsT::new(0.0, 1.0, (n - 1) as f64)
                .map(|d| d.inverse_cdf(q))
                .unwrap_or(f64::INFINITY);
            2.0 * t * cv / (n as f64).sqrt() <= width
        })
        .unwrap_or(cap)
}

/// How the machine moved between two runs, from their control readings on
/// the same CPUs: the ratio of the later run's CPU loop to the earlier's
/// (above 1: the machine ran slower), and the relative spread of one
/// moment of the machine, pooled over both runs' readings, which is what a
/// case measured within one moment carries from run to run.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Move {
    /// now ÷ baseline of the CPU loop's 20 % trimmed mean time (> 1:
    /// slower now).
    pub slower: f64,
    /// The CPU loop's relative standard deviation between moments, pooled
    /// over both runs' readings around their own levels ([`winsorized_cv`]),
    /// and never below half the shift between the runs (a shift of the
    /// machine between runs is itself between-run spread).
    pub between_cv: f64,
    /// The pooled spread between moments alone, without the shift: what
    /// is left once the shift itself is divided out of a case.
    pub moment_cv: f64,
    /// Readings on each side.
    pub n_base: usize,
    pub n_now: usize,
    /// The standard error of ln(`slower`) from the two sides' readings:
    /// what dividing a case's ratio by `slower` adds to its spread.
    pub ratio_se: f64,
}

/// The move between `base` and `now` on `cpus` (all their CPUs when
/// empty) by the CPU loop; `None` when either side has no reading there.
pub fn machine_move(base: &[Reading], now: &[Reading], cpus: &[usize]) -> Option<Move> {
    probe_move(base, now, cpus, Probe::Loop)
}

/// The move by `probe`, as [`machine_move`] reads the loop.
pub fn probe_move(base: &[Reading], now: &[Reading], cpus: &[usize], probe: Probe) -> Option<Move> {
    let pick = |rs: &[Reading]| -> Vec<f64> {
        rs.iter()
            .filter(|r| cpus.is_empty() || cpus.contains(&r.cpu))
            .filter_map(|r| probe.of(r))
            .collect()
    };
    let (a, b) = (pick(base), pick(now));
    if a.is_empty() || b.is_empty() {
        return None;
    }
    // Trimmed levels and winsorized spreads, as the default estimator
    // reads a case: one reading the host interrupted moves neither.
    let slower = trimmed_mean(&b) / trimmed_mean(&a);
    let dfa = a.len().saturating_sub(1) as f64;
    let dfb = b.len().saturating_sub(1) as f64;
    let pooled = if dfa + dfb > 0.0 {
        ((dfa * winsorized_cv(&a).powi(2) + dfb * winsorized_cv(&b).powi(2)) / (dfa + dfb)).sqrt()
    } else {
        0.0
    };
    let shift = (slower - 1.0).abs() / 2.0;
    let se = |v: &[f64]| winsorized_cv(v).powi(2) / v.len() as f64;
    Some(Move {
        slower,
        between_cv: pooled.max(shift),
        moment_cv: pooled,
        ratio_se: (se(&a) + se(&b)).sqrt(),
        n_base: a.len(),
        n_now: b.len(),
    })
}

/// How many independent moments of the machine a case's trials span: its
/// trials' time span over [`MOMENT_S`], at least 1. The between-run
/// component of its mean shrinks with √ of it, as any average does.
pub fn moments(span_s: f64) -> f64 {
    if span_s.is_finite() && span_s > MOMENT_S {
        span_s / MOMENT_S
    } else {
        1.0
    }
}

/// Readings a run's control level needs: a paced run of a minute reads
/// the control about once a second, an unpaced one every ten.
pub const MIN_LEVEL_READINGS: usize = 10;

/// What a run can expect at this noise: the trials a case needs for its
/// interval, and how many of `costs` (each case's seconds a trial, in the
/// order the budget funds them) that buys within `budget_s`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Outlook {
    /// The CV a case is planned at: the noisiest CPU's.
    pub cv: f64,
    pub trials: usize,
    /// Cases the budget can decide, of `of`.
    pub decidable: usize,
    pub of: usize,
}

/// The outlook of a run whose cases each cost `costs[i]` seconds a trial,
/// plus `fixed_s[i]` once (a warm-up), when its noisiest CPU reads `cv`.
/// A case is counted when the trials the noise needs fit, cheapest first.
pub fn outlook(
    cv: f64,
    width: f64,
    confidence: f64,
    cap: usize,
    costs: &[(f64, f64)],
    budget_s: Option<f64>,
) -> Outlook {
    let each: Vec<(f64, f64, f64)> = costs.iter().map(|&(p, f)| (p, f, cv)).collect();
    outlook_each(cv, width, confidence, cap, &each, budget_s)
}

/// [`outlook`] where each case is planned at its own spread: `cases[i]` is
/// (seconds a trial, seconds once, CV) — a case timed on its thread's
/// clock meets the machine's noise on that clock (docs/host.md, "The
/// thread's own clock"). `cv` is the figure the outlook states.
pub fn outlook_each(
    cv: f64,
    width: f64,
    confidence: f64,
    cap: usize,
    cases: &[(f64, f64, f64)],
    budget_s: Option<f64>,
) -> Outlook {
    let trials = trials_needed(cv, width, confidence, cap);
    // Each case's need in seconds; infinite where it cannot converge.
    let mut need: Vec<f64> = cases
        .iter()
        .map(|&(per, fixed, c)| {
            let n = trials_needed(c, width, confidence, cap);
            if n >= cap {
                f64::INFINITY
            } else {
                fixed + per * n as f64
            }
        })
        .collect();
    need.sort_by(f64::total_cmp);
    let decidable = match budget_s {
        None => need.iter().filter(|n| n.is_finite()).count(),
        Some(b) => {
            let mut left = b;
            let mut k = 0;
            for n in need {
                if n > left {
                    break;
                }
                left -= n;
                k += 1;
            }
            k
        }
    };
    Outlook {
        cv,
        trials,
        decidable,
        of: cases.len(),
    }
}

/// One case a noise-planned run may measure or leave out.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    /// Cases of one group (one param combination on every CPU
    /// configuration) are kept or left out together, so scalability keeps
    /// both sides.
    pub group: usize,
    /// The order in which groups are left out, highest first; 0 is a
    /// workload's representative and is never left out.
    pub rank: u32,
    /// Seconds a counted trial, and seconds once (its warm-up).
    pub per_s: f64,
    pub fixed_s: f64,
    /// The spread it is planned at: the gauge's on the clock it is timed
    /// by.
    pub cv: f64,
}

/// Which candidates a run measures, each at its own spread (`cv` is the
/// one the outlook states), within `budget_s`:
/// all of them when the outlook decides them all; else groups are left
/// out, highest rank first (costliest first within a rank), until every
/// kept case is one the budget can decide, or only representatives are
/// left. Returns a keep flag per candidate and the outlook of the kept set.
pub fn choose(
    cands: &[Candidate],
    cv: f64,
    width: f64,
    confidence: f64,
    cap: usize,
    budget_s: f64,
) -> (Vec<bool>, Outlook) {
    let mut keep = vec![true; cands.len()];
    let look = |keep: &[bool]| {
        let costs: Vec<(f64, f64, f64)> = cands
            .iter()
            .zip(keep)
            .filter(|(_, k)| **k)
            .map(|(c, _)| (c.per_s, c.fixed_s, c.cv))
            .collect();
        outlook_each(cv, width, confidence, cap, &costs, Some(budget_s))
    };
    // Groups in the order they are left out.
    let mut groups: Vec<(u32, f64, usize)> = Vec::new();
    for c in cands {
        match groups.iter_mut().find(|g| g.2 == c.group) {
            Some(g) => g.1 += c.per_s,
            None => groups.push((c.rank, c.per_s, c.group)),
        }
    }
    groups.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.total_cmp(&a.1)));
    let mut o = look(&keep);
    for (rank, _, group) in groups {
        if o.decidable >= o.of || rank == 0 {
            break;
        }
        for (k, c) in keep.iter_mut().zip(cands) {
            if c.group == group {
                *k = false;
            }
        }
        o = look(&keep);
    }
    (keep, o)
}

/// The order in which a sweep of `n` values is kept: its middle value
/// first (the representative), then its ends, then the midpoints of the
/// gaps left, so that any prefix spans the sweep as evenly as it can. The
/// rank of value i is its place in that order.
pub fn sweep_ranks(n: usize) -> Vec<u32> {
    let mut rank = vec![u32::MAX; n];
    if n == 0 {
        return rank;
    }
    let mut next = 0u32;
    let mut put = |i: usize, rank: &mut Vec<u32>| {
        if rank[i] == u32::MAX {
            rank[i] = next;
            next += 1;
        }
    };
    put(n / 2, &mut rank);
    put(0, &mut rank);
    put(n - 1, &mut rank);
    // Midpoints of the widest gaps between kept values, repeatedly.
    loop {
        let kept: Vec<usize> = (0..n).filter(|&i| rank[i] != u32::MAX).collect();
        let gap = kept
            .windows(2)
            .filter(|w| w[1] - w[0] > 1)
            .max_by_key(|w| (w[1] - w[0], std::cmp::Reverse(w[0])));
        match gap {
            Some(w) => put((w[0] + w[1]) / 2, &mut rank),
            None => break,
        }
    }
    rank
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(t_s: f64, cpu: usize, cpu_ns: f64) -> Reading {
        Reading {
            t_s,
            cpu,
            cpu_ns,
            ..Default::default()
        }
    }

    /// A neighbour's bursts lengthen the loop on the wall, not on the
    /// thread's clock: the thread-clock view moves with the host alone.
    #[test]
    fn the_thread_clock_view_leaves_other_tasks_time_out() {
        let rs: Vec<Reading> = (0..6)
            .map(|i| Reading {
                cpu_thread_ns: Some(100.0),
                sys_thread_ns: Some(50.0),
                sys_ns: Some(if i % 2 == 0 { 50.0 } else { 90.0 }),
                cpu_mean_ns: Some(200.0),
                ..r(i as f64, 0, if i % 2 == 0 { 100.0 } else { 180.0 })
            })
            .collect();
        let t = on_thread_clock(&rs).unwrap();
        assert!(t
            .iter()
            .all(|x| x.cpu_ns == 100.0 && x.sys_ns == Some(50.0)));
        assert!(t.iter().all(|x| x.cpu_mean_ns.is_none()));
        assert!(t
            .iter()
            .zip(&rs)
            .all(|(x, y)| x.t_s == y.t_s && x.cpu == y.cpu));
        assert_eq!(per_cpu(&t)[0].cv, 0.0);
        assert!(per_cpu(&rs)[0].cv > 0.2);
        // Older readings have no thread clock: no view.
        let mut old = rs.clone();
        old[3].cpu_thread_ns = None;
        assert_eq!(on_thread_clock(&old), None);
        assert_eq!(on_thread_clock(&[]), Some(Vec::new()));
    }

    #[test]
    fn a_steady_cpu_has_no_spread_and_a_drifting_one_says_how_far() {
        let mut rs = Vec::new();
        for i in 0..10 {
            rs.push(r(i as f64 * 5.0, 0, 100.0));
            // CPU 1 runs 30 % slower in its second 20 s window.
            rs.push(r(i as f64 * 5.0, 1, if i < 4 { 100.0 } else { 130.0 }));
        }
        let n = per_cpu(&rs);
        assert_eq!(n.len(), 2);
        assert_eq!(n[0].cv, 0.0);
        assert_eq!(n[0].drift, 0.0);
        assert!((n[1].drift - 0.3).abs() < 1e-9, "{:?}", n[1]);
        assert!(n[1].cv > 0.1);
    }

    #[test]
    fn one_preempted_reading_does_not_make_a_quiet_cpu_noisy() {
        let mut v = vec![100.0, 101.0, 99.0, 100.5, 99.5, 100.0, 100.2, 99.8];
        assert!(winsorized_cv(&v) < 0.01);
        v[3] = 300.0;
        assert!(winsorized_cv(&v) < 0.01, "{}", winsorized_cv(&v));
        // A machine slow a third of the time is noisy, however it is read.
        let w = [
            100.0, 130.0, 100.0, 130.0, 100.0, 130.0, 100.0, 100.0, 130.0,
        ];
        assert!(winsorized_cv(&w) > 0.1);
        assert_eq!(winsorized_cv(&[5.0]), 0.0);
    }

    #[test]
    fn trials_needed_follows_the_t_interval() {
        // No spread: the minimum.
        assert_eq!(trials_needed(0.0, 0.1, 0.95, 1000), 3);
        // CV 10 % at a 10 % full width: 2·t·0.1/√n ≤ 0.1 → n ≈ 18.
        let n = trials_needed(0.10, 0.10, 0.95, 1000);
        assert!((17..=19).contains(&n), "{n}");
        // Four times the spread, about sixteen times the trials (fewer: t
        // shrinks as n grows).
        let m = trials_needed(0.40, 0.10, 0.95, 1000);
        assert!(m > 12 * n && m < 16 * n, "{m} vs {n}");
        assert_eq!(trials_needed(5.0, 0.1, 0.95, 100), 100);
    }

    #[test]
    fn a_sweep_keeps_its_middle_then_its_ends_then_midpoints() {
        assert_eq!(sweep_ranks(1), vec![0]);
        assert_eq!(sweep_ranks(2), vec![1, 0]);
        let r = sweep_ranks(9);
        assert_eq!(r[4], 0);
        assert_eq!((r[0], r[8]), (1, 2));
        let mut sorted = r.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..9).collect::<Vec<u32>>());
    }

    #[test]
    fn a_noisy_machine_keeps_fewer_groups_and_never_the_last_representative() {
        // Ten workloads of eight sizes on two configurations.
        let mut cands = Vec::new();
        for w in 0..10 {
            let ranks = sweep_ranks(8);
            for (i, r) in ranks.iter().enumerate() {
                for _cfg in 0..2 {
                    cands.push(Candidate {
                        group: w * 8 + i,
                        rank: *r,
                        per_s: 0.1,
                        fixed_s: 0.1,
                        cv: f64::NAN,
                    });
                }
            }
        }
        let kept = |cv: f64| {
            let cands: Vec<Candidate> = cands.iter().map(|c| Candidate { cv, ..*c }).collect();
            let (k, o) = choose(&cands, cv, 0.1, 0.95, 100, 120.0);
            (k.iter().filter(|k| **k).count(), o)
        };
        let (quiet, oq) = kept(0.03);
        let (mid, om) = kept(0.15);
        let (noisy, on) = kept(0.60);
        assert_eq!(quiet, 160);
        assert_eq!(oq.decidable, oq.of);
        assert!(mid < quiet && noisy <= mid, "{quiet} {mid} {noisy}");
        assert_eq!(om.decidable, om.of, "{om:?}");
        // Past what any budget decides, the representatives stay: one
        // group per workload, both configurations.
        assert_eq!(noisy, 20, "{on:?}");
    }

    #[test]
    fn each_case_is_planned_at_the_spread_of_its_clock() {
        // Half the cases timed on the wall at 60 %, half on their thread's
        // clock at 2 %: with time to spare only the quiet half decides.
        let cases: Vec<(f64, f64, f64)> = (0..100)
            .map(|i| (0.1, 0.1, if i % 2 == 0 { 0.60 } else { 0.02 }))
            .collect();
        let o = outlook_each(0.60, 0.1, 0.95, 100, &cases, Some(1000.0));
        assert_eq!((o.decidable, o.of), (50, 100));
        assert_eq!(o.trials, 100, "the stated figure is the wall's");
        // The gauge's thread-clock probes give each CPU its own spread.
        let r = |i: usize, wall: f64, thread: f64| Reading {
            t_s: i as f64 * 0.1,
            cpu: 0,
            cpu_ns: wall,
            mem_mbs: None,
            wake_us: None,
            sys_ns: None,
            cpu_mean_ns: None,
            cpu_thread_ns: Some(thread),
            sys_thread_ns: None,
        };
        let rs: Vec<Reading> = (0..8)
            .map(|i| r(i, if i % 2 == 0 { 1.0e6 } else { 2.0e6 }, 1.0e6 + i as f64))
            .collect();
        let n = per_cpu(&rs)[0];
        assert!(n.plan_cv() > 0.3, "{n:?}");
        assert!(n.plan_thread_cv() < 0.01, "{n:?}");
        // Readings stored before the thread's clock plan at the wall's.
        let old: Vec<Reading> = rs
            .iter()
            .map(|x| Reading {
                cpu_thread_ns: None,
                ..*x
            })
            .collect();
        let n = per_cpu(&old)[0];
        assert_eq!(n.plan_thread_cv(), n.plan_cv());
    }

    #[test]
    fn the_outlook_counts_what_the_budget_buys_at_the_noise() {
        let costs = vec![(0.1, 0.1); 100];
        let quiet = outlook(0.02, 0.1, 0.95, 1000, &costs, Some(60.0));
        let noisy = outlook(0.30, 0.1, 0.95, 1000, &costs, Some(60.0));
        assert_eq!(quiet.decidable, 100);
        assert!(noisy.decidable < quiet.decidable, "{noisy:?}");
        assert!(noisy.trials > 100);
    }
}
