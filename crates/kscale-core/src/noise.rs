//! The machine's own noise, from the gauge: a short fixed-work probe per
//! CPU taken before a run and again through it as a control
//! (docs/method.md, "The gauge and the control"). The figures a run states
//! at its start (the CPU loop's spread, its drift, the trials a case will
//! need) and the between-run component that `check` adds to a comparison
//! (Kalibera and Jones's run-level variance) are computed here, from
//! stored readings, so they can be recomputed and tested without a machine.

use crate::stats::Estimate;
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, FisherSnedecor, StudentsT};

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
    /// in it, where the median steps past it (docs/method.md, "Where the
    /// line does not apply"); `None` in readings taken before it existed.
    #[serde(default)]
    pub cpu_mean_ns: Option<f64>,
    /// The CPU loop and the kernel crossing on the calling thread's CPU
    /// clock (the medians of the same repetitions): the machine as a case
    /// timed on that clock meets it, with the time another task held the
    /// CPU left out (docs/method.md, "The thread's own clock"); `None` in
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
    /// (docs/method.md, "The thread's own clock"): the thread-clock
    /// probes', or [`CpuNoise::plan_cv`] where the readings have none.
    pub fn plan_thread_cv(&self) -> f64 {
        self.thread_cv.unwrap_or_else(|| self.plan_cv())
    }

    /// The larger drift of the two, as [`CpuNoise::plan_cv`].
    pub fn plan_drift(&self) -> f64 {
        self.drift.max(self.sys_drift)
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
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
            let mut ns: Vec<f64> = mine.iter().map(|r| r.cpu_ns).collect();
            let mem: Vec<f64> = mine.iter().filter_map(|r| r.mem_mbs).collect();
            let wake: Vec<f64> = mine.iter().filter_map(|r| r.wake_us).collect();
            let mut sys: Vec<f64> = mine.iter().filter_map(|r| r.sys_ns).collect();
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
                sys_median_ns: median(&mut sys),
                cpu,
                readings: mine.len(),
                mem_cv: winsorized_cv(&mem),
                wake_cv: winsorized_cv(&wake),
                cv: winsorized_cv(&ns),
                drift: drift(&mine, Probe::Loop),
                median_ns: median(&mut ns),
            }
        })
        .collect()
}

/// `readings` as a case timed on its thread's CPU clock meets the machine
/// (docs/method.md, "The thread's own clock"): each reading's CPU loop
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
    let meds: Vec<f64> = windows.into_values().map(|mut v| median(&mut v)).collect();
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

/// The fewest earlier runs of a case from which its own between-run
/// spread is estimated ([`between_runs`]); with fewer, `check` takes the
/// machine's from the gauge.
pub const MIN_RUNS: usize = 3;

/// A case's own between-run spread, from its estimates in `runs` (each
/// run's center and standard error) on one machine: Kalibera and Jones's
/// run-level variance component, var(ln center) − mean((se ÷ center)²),
/// never below 0 — what the runs' means spread beyond what their own
/// trials explain. It holds everything that moves a case from run to run
/// (the host's minute-scale spells on the kernel's paths, where it placed
/// the vCPUs, the page cache), which no probe taken beside the trials
/// sees whole. Returns the relative spread and its degrees of freedom
/// (runs − 1); `None` under [`MIN_RUNS`] runs or with a value ≤ 0.
pub fn between_runs(runs: &[(f64, f64)]) -> Option<(f64, f64)> {
    if runs.len() < MIN_RUNS
        || runs
            .iter()
            .any(|(c, s)| !(c.is_finite() && *c > 0.0 && s.is_finite()))
    {
        return None;
    }
    let logs: Vec<f64> = runs.iter().map(|(c, _)| c.ln()).collect();
    let (_, sd) = mean_sd(&logs);
    let within = runs.iter().map(|(c, s)| (s / c).powi(2)).sum::<f64>() / runs.len() as f64;
    Some(((sd * sd - within).max(0.0).sqrt(), (runs.len() - 1) as f64))
}

/// A case's between-run spread from its own few runs, pooled with the
/// machine's as the gauge read it (`prior`: the spread per run and its
/// degrees of freedom, the readings behind it less one a run), as one
/// pooled variance: (df_own·own² + df_prior·prior²) ÷ (df_own + df_prior),
/// on df_own + df_prior degrees of freedom. A handful of runs alone leaves
/// so few degrees of freedom that the t quantile, not the spread, holds
/// the detectable change above any change worth gating on (at three runs
/// and the gate's α, t ≈ 14); the gauge has read the same machine's spread
/// between moments many times over. It stands aside where the case's own
/// runs spread beyond it — F = own² ÷ prior² above its 95 % quantile —
/// as a case whose runs move more than the CPU loop does (a page cache, a
/// network path) cannot borrow the loop's calm. Without own runs the prior
/// alone. Returns the spread and its degrees of freedom; `None` when
/// neither is known.
pub fn pool_between(own: Option<(f64, f64)>, prior: Option<(f64, f64)>) -> Option<(f64, f64)> {
    let prior = prior.filter(|(g, df)| g.is_finite() && *g > 0.0 && *df >= 1.0);
    match (own, prior) {
        (own, None) => own,
        (None, Some(p)) => Some(p),
        (Some((b, dfo)), Some((g, dfg))) => {
            let beyond = FisherSnedecor::new(dfo.max(1.0), dfg)
                .map(|f| b * b / (g * g) > f.inverse_cdf(0.95))
                .unwrap_or(true);
            if beyond {
                Some((b, dfo))
            } else {
                let pooled = ((dfo * b * b + dfg * g * g) / (dfo + dfg)).sqrt();
                Some((pooled, dfo + dfg))
            }
        }
    }
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

/// A two-run comparison whose spread includes the machine's between-run
/// component, on the log scale where the machine's noise is
/// multiplicative (a host spell slows every operation by a share, not by
/// nanoseconds): d = ln(now ÷ base), with variance (se_base ÷ base)² +
/// (se_now ÷ now)² + b²÷k_base + b²÷k_now, b being `between_cv` and k the
/// moments each side spans. Returns the two-sided p of Welch's t on d
/// (the within parts' Welch–Satterthwaite degrees of freedom, at least 2)
/// and the minimum detectable change at `alpha` and `power`, as a
/// fraction of the baseline.
#[allow(clippy::too_many_arguments)]
pub fn across_runs(
    base: Estimate,
    now: Estimate,
    between_cv: f64,
    between_df: Option<f64>,
    moments_base: f64,
    moments_now: f64,
    alpha: f64,
    power: f64,
) -> Option<(f64, f64)> {
    if !(base.center.is_finite() && now.center.is_finite())
        || base.center <= 0.0
        || now.center <= 0.0
    {
        return None;
    }
    let (ra, rb) = (base.se / base.center, now.se / now.center);
    let (va, vb) = (ra * ra, rb * rb);
    let between = between_cv.powi(2) * (1.0 / moments_base.max(1.0) + 1.0 / moments_now.max(1.0));
    let var = va + vb + between;
    let d = (now.center / base.center).ln();
    if var == 0.0 {
        return Some((if d == 0.0 { 1.0 } else { 0.0 }, 0.0));
    }
    // The between part is counted as known as well as the within part
    // with more degrees of freedom: conservative enough, never below 2.
    let within = va + vb;
    let df = match between_df {
        // Estimated from a case's earlier runs: Welch–Satterthwaite over
        // all three parts, the between part known to its runs − 1.
        Some(k) if between > 0.0 => (var.powi(2)
            / (va.powi(2) / base.df.max(1.0)
                + vb.powi(2) / now.df.max(1.0)
                + between.powi(2) / k.max(1.0)))
        .max(2.0),
        _ if within > 0.0 => (within.powi(2)
            / (va.powi(2) / base.df.max(1.0) + vb.powi(2) / now.df.max(1.0)))
        .max(2.0),
        _ => base.df.max(now.df).max(2.0),
    };
    let t = StudentsT::new(0.0, 1.0, df).ok()?;
    let se = var.sqrt();
    let p = (2.0 * (1.0 - t.cdf(d.abs() / se))).clamp(0.0, 1.0);
    let k = t.inverse_cdf(1.0 - alpha / 2.0) + t.inverse_cdf(power);
    Some((p, (k * se).exp() - 1.0))
}

/// The mean of ln `probe` over the readings on `cpus` (every CPU when
/// empty): the machine's level through one run, as the control read it.
/// `None` with fewer than [`MIN_LEVEL_READINGS`] readings, too few to
/// average a moment's spread away.
pub fn control_level(readings: &[Reading], cpus: &[usize], probe: Probe) -> Option<f64> {
    let logs = control_logs(readings, cpus, |r| probe.of(r))?;
    Some(logs.iter().sum::<f64>() / logs.len() as f64)
}

/// ln `value` of the readings on `cpus` (every CPU when empty), when
/// there are at least [`MIN_LEVEL_READINGS`] of them.
fn control_logs(
    readings: &[Reading],
    cpus: &[usize],
    value: impl Fn(&Reading) -> Option<f64>,
) -> Option<Vec<f64>> {
    let logs: Vec<f64> = readings
        .iter()
        .filter(|r| cpus.is_empty() || cpus.contains(&r.cpu))
        .filter_map(value)
        .filter(|v| v.is_finite() && *v > 0.0)
        .map(f64::ln)
        .collect();
    (logs.len() >= MIN_LEVEL_READINGS).then_some(logs)
}

/// The spread of ln `probe` over one run's readings on `cpus` (every CPU
/// when empty): how much the machine's speed jumped within the run. `None`
/// with fewer than [`MIN_LEVEL_READINGS`] readings.
pub fn control_spread(readings: &[Reading], cpus: &[usize], probe: Probe) -> Option<f64> {
    control_logs(readings, cpus, |r| probe.of(r)).map(|logs| sd(&logs))
}

/// How much a run's machine jumped within it, as [`Regime`] compares runs:
/// the larger of two spreads over the run's readings on `cpus`, each
/// seeing what the other misses.
/// - The SD of ln the loop's *median* ([`control_spread`]): a phase, or a
///   burst that stalls two of a reading's three repetitions, moves it; a
///   single stalled repetition does not.
/// - The interquartile spread (IQR ÷ 1.349) of ln the loop's *mean* over
///   its repetitions: a burst that stalls one repetition counts in the
///   mean, and where a quarter of the readings or more met one the upper
///   quartile moves, while one preempted reading of a quiet run leaves
///   the quartiles where they were (the mean's SD would not).
///
/// Under `scripts/noisy-neighbour --duty 25` with SCHED_FIFO bursts, runs
/// read 20–45 % by the first and 1–8 % by the second where few readings
/// were hit, and the other way round (57–90 % against 20–46 %) where many
/// were; quiet runs read 1–6 % and 1–8 % (docs/validation.md). `None`
/// where the readings have no mean (stored before it existed): the caller
/// then compares every run by [`control_spread`] alone.
pub fn burst_spread(readings: &[Reading], cpus: &[usize]) -> Option<f64> {
    let mut logs = control_logs(readings, cpus, |r| r.cpu_mean_ns)?;
    logs.sort_by(f64::total_cmp);
    let iqr = (quantile_sorted(&logs, 0.75) - quantile_sorted(&logs, 0.25)) / 1.349;
    let median_sd = control_spread(readings, cpus, Probe::Loop).unwrap_or(0.0);
    Some(iqr.max(median_sd))
}

/// How much a case's own trials jumped within one run: the SD of ln its
/// counted trials' values, `None` with fewer than [`MIN_TRIAL_SPREAD`].
/// The case's trials take every burst that lands in them in full, where
/// the control's readings, a few milliseconds each between trials, sample
/// a low phase's rare bursts far less often: under
/// `scripts/noisy-neighbour --duty 25` a run whose control spread 2.0 %
/// had trials spread 22 %, and the quiet VM's runs' trials spread 0.7–5.5
/// % (docs/validation.md). [`Regime`] compares runs by this too.
pub fn trial_spread(values: &[f64]) -> Option<f64> {
    let logs: Vec<f64> = values
        .iter()
        .copied()
        .filter(|v| v.is_finite() && *v > 0.0)
        .map(f64::ln)
        .collect();
    (logs.len() >= MIN_TRIAL_SPREAD).then(|| sd(&logs))
}

/// The fewest counted trials a run's [`trial_spread`] is read from: the
/// quick rule's first judgement.
pub const MIN_TRIAL_SPREAD: usize = 5;

/// The `q` quantile of sorted `v` (linear between order statistics).
fn quantile_sorted(v: &[f64], q: f64) -> f64 {
    let at = q * (v.len() - 1) as f64;
    let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (at - lo as f64)
}

fn sd(v: &[f64]) -> f64 {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0).max(1.0)).sqrt()
}

/// How many times the label runs' typical spread a run's control may
/// spread within it and still be of the regime the line was fitted on.
/// The quiet VM's runs spread 2.4–8 % (10th–90th percentile, median 3.6
/// %); under `scripts/noisy-neighbour --duty 25` the median run spreads 24
/// % (docs/validation.md).
pub const REGIME_FACTOR: f64 = 2.0;
/// Below this a run's spread counts as quiet whatever the label's: a
/// history of unusually still runs does not make a 4 % run foreign.
pub const REGIME_FLOOR: f64 = 0.05;

/// The regime the control's line describes: how much the machine jumped
/// within the baseline label's runs, and within the runs now (docs/
/// method.md, "Where the line does not apply"). The line relates a case to
/// the control's *level*; it says nothing of a machine whose speed jumps
/// within a run more than in any run it was fitted on. There the case and
/// the control need not move together: the control's readings are medians
/// of repetitions a few milliseconds long, which step past a preemption
/// burst that a case's trial takes in full.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Regime {
    /// The median spread of the label's runs' control readings.
    pub label: f64,
    /// The mean spread of the runs now.
    pub now: f64,
    /// The spread of the baseline the runs now are compared with, when it
    /// was read: taken at the same hour in a gate, it tells of the hour as
    /// much as they do.
    pub baseline: Option<f64>,
    /// The largest spread of the regime: `label` × [`REGIME_FACTOR`], at
    /// least [`REGIME_FLOOR`].
    pub bound: f64,
}

impl Regime {
    /// The label's runs (`spreads`, each run's [`control_spread`]) against
    /// the runs now and the baseline: `None` without label runs or runs
    /// now.
    pub fn of(label: &[f64], now: &[f64], baseline: Option<f64>) -> Option<Regime> {
        let mut l: Vec<f64> = label.iter().copied().filter(|v| v.is_finite()).collect();
        let n: Vec<f64> = now.iter().copied().filter(|v| v.is_finite()).collect();
        if l.is_empty() || n.is_empty() {
            return None;
        }
        l.sort_by(f64::total_cmp);
        let mid = l.len() / 2;
        let label = if l.len() % 2 == 1 {
            l[mid]
        } else {
            (l[mid - 1] + l[mid]) / 2.0
        };
        Some(Regime {
            label,
            // The mean, not the median: one run now in a burst phase pulls
            // the mean of the runs' estimates off the line on its own.
            now: n.iter().sum::<f64>() / n.len() as f64,
            baseline: baseline.filter(|b| b.is_finite()),
            bound: (label * REGIME_FACTOR).max(REGIME_FLOOR),
        })
    }

    /// A run of the label whose spread is within the regime: only these
    /// are fitted.
    pub fn admits(&self, spread: f64) -> bool {
        spread.is_finite() && spread <= self.bound
    }

    /// The runs now, or the baseline, jumped more than the line's runs: it
    /// does not apply. The runs now by their mean, not their median: one
    /// run in a burst phase moves their mean estimate off the line alone.
    /// The baseline too: under the neighbour, runs whose control read
    /// quiet still ran 30–50 % off the line (the control's medians step
    /// past bursts), so a quiet-reading run now at a noisy hour is not
    /// proof of a quiet machine.
    pub fn noisier(&self) -> bool {
        self.now > self.bound || self.baseline.is_some_and(|b| b > self.bound)
    }
}

/// Readings a run's control level needs: a paced run of a minute reads
/// the control about once a second, an unpaced one every ten.
pub const MIN_LEVEL_READINGS: usize = 10;

/// The fewest runs of the baseline's label the covariate test fits its
/// line to: two parameters and a residual spread need several more.
pub const MIN_COVARIATE_RUNS: usize = 6;

/// One run of a case as the covariate test sees it: ln of its estimate
/// and the control's level through the run ([`control_level`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LevelRun {
    pub y: f64,
    pub x: f64,
}

/// The covariate test's answer for one case.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CovariateTest {
    /// ln(now ÷ what the baseline runs predict at the machine's level
    /// now): positive when the case takes longer (or does more) than the
    /// line says.
    pub d: f64,
    /// Its standard error: the runs' residual spread about the line, with
    /// the line's own uncertainty at the level now.
    pub se: f64,
    /// How much of the control's move a case follows: the line's slope on
    /// the log scale (1 would divide by the control, 0 ignore it).
    pub slope: f64,
    /// The runs' residual spread about the line (relative).
    pub residual: f64,
    /// The spread of the same runs without the line (relative): what the
    /// control took out is the difference.
    pub plain: f64,
    pub runs: usize,
    /// The runs measured now whose mean was tested.
    pub now_runs: usize,
    /// Two-sided p of Student's t on `d`, with runs − 2 degrees of freedom.
    pub p: f64,
    /// The smallest change the test sees at `alpha` and `power`, as a
    /// fraction.
    pub mdc: f64,
    /// The line's own share of the variance at the level now, in units of
    /// the residual's: 1/k + (x̄ₙ − x̄)²/Sxx.
    pub line_var: f64,
    /// The t quantiles behind `mdc`: α/2 and `power`.
    pub q: f64,
}

impl CovariateTest {
    /// The runs now whose mean would see a change of `threshold` (a
    /// fraction) at the test's α and power, at the machine's level now,
    /// if no more than `max`: what `check --repeat` would need. `None`
    /// where more runs now cannot get there because the line itself is
    /// too uncertain (only more runs of the baseline's label would), or
    /// where it takes more than `max`.
    pub fn repeats_for(&self, threshold: f64, max: usize) -> Option<usize> {
        if threshold.is_nan() || threshold <= 0.0 || self.q.is_nan() || self.q <= 0.0 {
            return None;
        }
        if self.residual <= 0.0 {
            return Some(1);
        }
        let se = (1.0 + threshold).ln() / self.q;
        let room = (se / self.residual).powi(2) - self.line_var;
        if room <= 0.0 {
            return None;
        }
        // Less a rounding's worth: at exactly one run's MDC, one run.
        let n = (1.0 / room * (1.0 - 1e-9)).ceil();
        (n <= max as f64).then_some((n as usize).max(1))
    }
}

/// Kalibera and Jones's between-run spread, with the control as a
/// covariate (docs/method.md, "The control as a covariate"): over the
/// baseline label's runs a line through (control level, ln estimate) takes
/// out the part of the runs' spread that follows the machine's level, and
/// the runs just measured are tested against the line's prediction at
/// their own levels — a prediction interval, so the baseline runs'
/// residual spread and the line's uncertainty are both in it. Each run
/// measured now brings its own draw of that residual spread; their mean
/// deviation from the line has 1/m of its variance (`check --repeat`:
/// the runs' deviations about the line hardly correlate from one run to
/// the next, docs/method.md). `None` without runs now, under
/// [`MIN_COVARIATE_RUNS`] baseline runs, with levels that do not vary, or
/// with the mean level now outside the runs' by more than their range
/// (the line would be extrapolated far past what it was fitted on;
/// nearer, the prediction interval widens with the distance by itself).
pub fn covariate_test(
    runs: &[LevelRun],
    now: &[LevelRun],
    alpha: f64,
    power: f64,
) -> Option<CovariateTest> {
    let k = runs.len();
    if k < MIN_COVARIATE_RUNS
        || now.is_empty()
        || !runs
            .iter()
            .chain(now)
            .all(|r| r.x.is_finite() && r.y.is_finite())
    {
        return None;
    }
    let now_count = now.len();
    let m = now_count as f64;
    let now = LevelRun {
        x: now.iter().map(|r| r.x).sum::<f64>() / m,
        y: now.iter().map(|r| r.y).sum::<f64>() / m,
    };
    let kf = k as f64;
    let mx = runs.iter().map(|r| r.x).sum::<f64>() / kf;
    let my = runs.iter().map(|r| r.y).sum::<f64>() / kf;
    let sxx: f64 = runs.iter().map(|r| (r.x - mx).powi(2)).sum();
    let sxy: f64 = runs.iter().map(|r| (r.x - mx) * (r.y - my)).sum();
    let syy: f64 = runs.iter().map(|r| (r.y - my).powi(2)).sum();
    let (lo, hi) = runs
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), r| {
            (a.min(r.x), b.max(r.x))
        });
    if sxx <= 0.0 || now.x < lo - (hi - lo) || now.x > hi + (hi - lo) {
        return None;
    }
    let slope = sxy / sxx;
    let df = kf - 2.0;
    let rss = (syy - slope * sxy).max(0.0);
    let residual = (rss / df).sqrt();
    let line_var = 1.0 / kf + (now.x - mx).powi(2) / sxx;
    let se = residual * (1.0 / m + line_var).sqrt();
    let d = now.y - (my + slope * (now.x - mx));
    let t = StudentsT::new(0.0, 1.0, df).ok()?;
    let p = if se > 0.0 {
        (2.0 * (1.0 - t.cdf(d.abs() / se))).clamp(0.0, 1.0)
    } else if d == 0.0 {
        1.0
    } else {
        0.0
    };
    let q = t.inverse_cdf(1.0 - alpha / 2.0) + t.inverse_cdf(power);
    Some(CovariateTest {
        d,
        se,
        slope,
        residual,
        plain: (syy / (kf - 1.0)).sqrt(),
        runs: k,
        now_runs: now_count,
        p,
        mdc: (q * se).exp() - 1.0,
        line_var,
        q,
    })
}

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
/// clock meets the machine's noise on that clock (docs/method.md, "The
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

    #[test]
    fn a_cases_trials_spread_within_a_run() {
        assert_eq!(trial_spread(&[1.0; 4]), None);
        assert_eq!(trial_spread(&[1.0; 8]), Some(0.0));
        // A burst that stalls half the trials to three times their length
        // spreads them far beyond a quiet run's few %.
        let jumped: Vec<f64> = (0..8).map(|i| if i % 2 == 0 { 1.0 } else { 3.0 }).collect();
        assert!(trial_spread(&jumped).is_some_and(|s| s > 0.5));
        let quiet: Vec<f64> = (0..8).map(|i| 1.0 + 0.02 * (i % 3) as f64).collect();
        assert!(trial_spread(&quiet).is_some_and(|s| s < 0.02));
        // Values a failed trial leaves are not counted.
        assert_eq!(trial_spread(&[1.0, 1.0, 1.0, 1.0, 0.0, f64::NAN]), None);
    }

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
    fn a_few_runs_borrow_the_gauges_spread_unless_they_spread_beyond_it() {
        // Nothing known, or the prior alone.
        assert_eq!(pool_between(None, None), None);
        assert_eq!(pool_between(None, Some((0.02, 16.0))), Some((0.02, 16.0)));
        assert_eq!(pool_between(Some((0.03, 2.0)), None), Some((0.03, 2.0)));
        // An unusable prior is none.
        assert_eq!(
            pool_between(Some((0.03, 2.0)), Some((0.0, 16.0))),
            Some((0.03, 2.0))
        );
        // Three runs that agree with the gauge: pooled, on both's degrees
        // of freedom, between the two spreads.
        let (b, df) = pool_between(Some((0.03, 2.0)), Some((0.02, 16.0))).expect("pooled");
        assert_eq!(df, 18.0);
        assert!(b > 0.02 && b < 0.03, "{b}");
        assert!((b * b - (2.0 * 0.0009 + 16.0 * 0.0004) / 18.0).abs() < 1e-12);
        // Runs spreading five times the loop's: their own, not the loop's.
        assert_eq!(
            pool_between(Some((0.10, 4.0)), Some((0.02, 16.0))),
            Some((0.10, 4.0))
        );
        // The pooled test sees a 10 % change that the runs alone cannot.
        let e = |c: f64| Estimate {
            center: c,
            se: c * 0.005,
            df: 2.0,
        };
        let alpha = 0.005;
        let (p_own, _) =
            across_runs(e(1.0), e(1.1), 0.02, Some(2.0), 1.0, 1.0, alpha, 0.8).expect("own");
        let (b, df) = pool_between(Some((0.02, 2.0)), Some((0.02, 16.0))).expect("pooled");
        let (p_pooled, _) =
            across_runs(e(1.0), e(1.1), b, Some(df), 1.0, 1.0, alpha, 0.8).expect("pooled");
        assert!(p_own > alpha && p_pooled < alpha, "{p_own} {p_pooled}");
    }

    #[test]
    fn a_case_between_run_spread_is_what_its_runs_spread_beyond_their_trials() {
        // Too few runs, or a bad value: no estimate.
        assert_eq!(between_runs(&[(1.0, 0.01), (1.1, 0.01)]), None);
        assert_eq!(between_runs(&[(1.0, 0.01), (0.0, 0.01), (1.1, 0.01)]), None);
        // Runs whose means differ exactly as their own errors say: none.
        let quiet = [(1.0, 0.05), (1.0, 0.05), (1.0, 0.05), (1.0, 0.05)];
        assert_eq!(between_runs(&quiet), Some((0.0, 3.0)));
        // Means 10 % apart with tight trials: about the means' own spread.
        let (b, df) = between_runs(&[(1.0, 0.001), (1.1, 0.001), (1.0, 0.001), (1.1, 0.001)])
            .expect("four runs");
        assert!((b - 0.055).abs() < 0.002, "{b}");
        assert_eq!(df, 3.0);
        // Known from few runs, it widens the test more than the same spread
        // taken as known.
        let e = |c: f64, se: f64| Estimate {
            center: c,
            se,
            df: 30.0,
        };
        let (p_known, mdc_known) =
            across_runs(e(1.0, 0.01), e(1.1, 0.01), 0.03, None, 1.0, 1.0, 0.05, 0.8).expect("p");
        let (p_few, mdc_few) = across_runs(
            e(1.0, 0.01),
            e(1.1, 0.01),
            0.03,
            Some(2.0),
            1.0,
            1.0,
            0.05,
            0.8,
        )
        .expect("p");
        assert!(p_few > p_known && mdc_few > mdc_known, "{p_few} {p_known}");
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
    fn a_machine_that_moved_between_runs_widens_the_between_run_spread() {
        let base: Vec<Reading> = (0..6).map(|i| r(i as f64, 0, 100.0 + i as f64)).collect();
        let same: Vec<Reading> = (0..6).map(|i| r(i as f64, 0, 101.0 + i as f64)).collect();
        let slow: Vec<Reading> = (0..6).map(|i| r(i as f64, 0, 120.0 + i as f64)).collect();
        let m = machine_move(&base, &same, &[]).unwrap();
        assert!(m.between_cv < 0.03, "{m:?}");
        let s = machine_move(&base, &slow, &[0]).unwrap();
        assert!((s.slower - 1.19).abs() < 0.01, "{s:?}");
        assert!(s.between_cv >= 0.09, "{s:?}");
        assert!(machine_move(&base, &slow, &[1]).is_none());
    }

    #[test]
    fn the_between_run_component_keeps_a_drift_from_looking_significant() {
        let e = |c: f64, se: f64| Estimate {
            center: c,
            se,
            df: 4.0,
        };
        // Two tight runs 20 % apart: on their own trials, certain.
        let (p0, mdc0) = across_runs(
            e(0.12, 0.001),
            e(0.144, 0.001),
            0.0,
            None,
            1.0,
            1.0,
            0.05,
            0.8,
        )
        .unwrap();
        assert!(p0 < 1e-3 && mdc0 < 0.05, "{p0} {mdc0}");
        // With a machine that moves 12 % between moments, not so.
        let (p1, mdc1) = across_runs(
            e(0.12, 0.001),
            e(0.144, 0.001),
            0.12,
            None,
            1.0,
            1.0,
            0.05,
            0.8,
        )
        .unwrap();
        assert!(p1 > 0.05 && mdc1 > 0.2, "{p1} {mdc1}");
        // A case spanning many moments averages the machine out.
        let (p2, _) = across_runs(
            e(0.12, 0.001),
            e(0.144, 0.001),
            0.12,
            None,
            25.0,
            25.0,
            0.05,
            0.8,
        )
        .unwrap();
        assert!(p2 < 0.01, "{p2}");
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
    #[test]
    fn the_covariate_test_takes_out_what_follows_the_control() {
        // Six runs whose level follows the control at slope 0.3, with a
        // residual of ±1 %.
        let xs = [0.0, 0.2, -0.1, 0.3, 0.1, -0.2];
        let e = [0.01, -0.01, 0.01, -0.01, 0.0, 0.0];
        let runs: Vec<LevelRun> = xs
            .iter()
            .zip(e)
            .map(|(x, e)| LevelRun {
                y: 1.0 + 0.3 * x + e,
                x: *x,
            })
            .collect();
        // The same binary at a slow moment: explained by the line.
        let same = covariate_test(
            &runs,
            &[LevelRun {
                y: 1.0 + 0.3 * 0.25,
                x: 0.25,
            }],
            0.01,
            0.8,
        )
        .unwrap();
        assert!((same.slope - 0.3).abs() < 0.05, "{same:?}");
        assert!(
            same.residual < 0.012 && same.plain > 3.0 * same.residual,
            "{same:?}"
        );
        assert!(same.p > 0.3 && same.d.abs() < 0.01, "{same:?}");
        // 10 % slower than the line predicts: seen.
        let slower = covariate_test(
            &runs,
            &[LevelRun {
                y: 1.0 + 0.075 + 0.1,
                x: 0.25,
            }],
            0.01,
            0.8,
        )
        .unwrap();
        assert!(slower.p < 0.01 && slower.d > 0.09, "{slower:?}");
        assert!(slower.mdc < 0.1, "{slower:?}");
        // Three runs now, each off the line by its own residual draw: the
        // mean's deviation is tested with a third of a run's variance, so
        // the same slowdown is seen more surely and a smaller one becomes
        // detectable.
        let three = covariate_test(
            &runs,
            &[
                LevelRun {
                    y: 1.0 + 0.3 * 0.2 + 0.1 + 0.01,
                    x: 0.2,
                },
                LevelRun {
                    y: 1.0 + 0.3 * 0.3 + 0.1 - 0.01,
                    x: 0.3,
                },
                LevelRun {
                    y: 1.0 + 0.3 * 0.25 + 0.1,
                    x: 0.25,
                },
            ],
            0.01,
            0.8,
        )
        .unwrap();
        assert_eq!(three.now_runs, 3);
        assert!((three.d - 0.1).abs() < 0.01, "{three:?}");
        assert!(three.se < 0.75 * slower.se, "{three:?} {slower:?}");
        assert!(three.mdc < slower.mdc && three.p < slower.p, "{three:?}");
        assert!(covariate_test(&runs, &[], 0.01, 0.8).is_none());
        // What `--repeat` would need to see a change of the MDC of one
        // run: one; of the three runs' MDC: three (or, rounding, two).
        assert_eq!(slower.repeats_for(slower.mdc, 20), Some(1), "{slower:?}");
        let n = slower.repeats_for(three.mdc, 20);
        assert!(matches!(n, Some(2 | 3)), "{n:?} {three:?}");
        // Smaller than the line's own uncertainty allows: no number of
        // runs now, nor past the cap.
        assert_eq!(slower.repeats_for(0.001, 1000), None);
        let tiny = (three.q * three.residual * three.line_var.sqrt() * 1.5).exp() - 1.0;
        assert_eq!(slower.repeats_for(tiny, 2), None, "{tiny}");
        assert!(
            slower.repeats_for(tiny, 1000).is_some_and(|n| n > 2),
            "{tiny}"
        );
        // Too few runs, a flat control, or a level far outside the runs':
        // no test.
        assert!(covariate_test(&runs[..5], &runs[..1], 0.01, 0.8).is_none());
        let flat: Vec<LevelRun> = runs.iter().map(|r| LevelRun { x: 0.0, ..*r }).collect();
        assert!(covariate_test(&flat, &runs[..1], 0.01, 0.8).is_none());
        assert!(covariate_test(&runs, &[LevelRun { y: 1.0, x: 2.0 }], 0.01, 0.8).is_none());
    }

    #[test]
    fn the_line_applies_only_in_the_regime_of_its_runs() {
        let label = [0.03, 0.035, 0.04, 0.036, 0.5, 0.033, 0.038];
        // Quiet runs now: within; the label's one wild run is left out of
        // the fit.
        let quiet = Regime::of(&label, &[0.03, 0.045, 0.04], Some(0.05)).unwrap();
        assert!((quiet.label - 0.036).abs() < 1e-12, "{quiet:?}");
        assert!((quiet.bound - 0.072).abs() < 1e-12, "{quiet:?}");
        assert!(!quiet.noisier());
        assert!(quiet.admits(0.04) && !quiet.admits(0.5) && !quiet.admits(f64::NAN));
        // One run of three in a burst phase: the mean is beyond.
        assert!(Regime::of(&label, &[0.03, 0.3, 0.04], None)
            .unwrap()
            .noisier());
        // Quiet runs now against a baseline taken in a burst phase.
        assert!(Regime::of(&label, &[0.03, 0.03, 0.04], Some(0.3))
            .unwrap()
            .noisier());
        // A history of still runs: a 4 % run now is not foreign.
        let still = Regime::of(&[0.01; 8], &[0.045], None).unwrap();
        assert_eq!(still.bound, REGIME_FLOOR);
        assert!(!still.noisier());
        assert!(Regime::of(&[], &[0.1], None).is_none() && Regime::of(&label, &[], None).is_none());
    }

    #[test]
    fn a_control_spread_is_the_spread_of_its_logs() {
        let rs: Vec<Reading> = (0..10)
            .map(|i| Reading {
                t_s: 0.0,
                cpu: 0,
                cpu_ns: if i % 2 == 0 { 100.0 } else { 200.0 },
                mem_mbs: None,
                wake_us: None,
                sys_ns: None,
                cpu_mean_ns: None,
                cpu_thread_ns: None,
                sys_thread_ns: None,
            })
            .collect();
        let s = control_spread(&rs, &[0], Probe::Loop).unwrap();
        let want = 2f64.ln() / 2.0 * (10.0f64 / 9.0).sqrt();
        assert!((s - want).abs() < 1e-12, "{s} {want}");
        assert!(control_spread(&rs[..9], &[0], Probe::Loop).is_none());
        assert!(control_spread(&rs, &[1], Probe::Loop).is_none());
    }

    #[test]
    fn a_burst_spread_sees_bursts_the_medians_step_past_and_not_one() {
        // Twenty readings whose medians are all 100; `hit` of them had a
        // repetition preempted, their mean three times the median.
        let run = |hit: usize| -> Vec<Reading> {
            (0..20)
                .map(|i| Reading {
                    t_s: i as f64,
                    cpu: 0,
                    cpu_ns: 100.0,
                    mem_mbs: None,
                    wake_us: None,
                    sys_ns: None,
                    cpu_mean_ns: Some(if i < hit {
                        300.0
                    } else {
                        100.0 + i as f64 * 0.1
                    }),
                    cpu_thread_ns: None,
                    sys_thread_ns: None,
                })
                .collect()
        };
        for hit in [0, 1, 8] {
            let rs = run(hit);
            assert!(control_spread(&rs, &[0], Probe::Loop).unwrap() < 1e-12);
            let b = burst_spread(&rs, &[0]).unwrap();
            if hit < 2 {
                // One preempted reading of a quiet run is not a noisy run.
                assert!(b < 0.01, "{hit}: {b}");
            } else {
                // Eight of twenty: the upper quartile is a hit reading.
                assert!(b > 0.3, "{hit}: {b}");
            }
        }
        // A phase the medians follow counts though the means' quartiles
        // stay: half the readings twice as slow in both.
        let phase: Vec<Reading> = run(0)
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                let k = if i % 2 == 0 { 2.0 } else { 1.0 };
                Reading {
                    cpu_ns: r.cpu_ns * k,
                    cpu_mean_ns: r.cpu_mean_ns.map(|m| m * k),
                    ..r
                }
            })
            .collect();
        let b = burst_spread(&phase, &[0]).unwrap();
        let sd = control_spread(&phase, &[0], Probe::Loop).unwrap();
        assert!(b >= sd && sd > 0.3, "{b} {sd}");
        // Without the mean (readings stored before it), no figure.
        let old: Vec<Reading> = run(8)
            .into_iter()
            .map(|r| Reading {
                cpu_mean_ns: None,
                ..r
            })
            .collect();
        assert!(burst_spread(&old, &[0]).is_none());
        assert!(burst_spread(&run(8)[..9], &[0]).is_none());
    }

    #[test]
    fn a_control_level_needs_readings_on_the_cases_cpus() {
        let r = |cpu, ns| Reading {
            t_s: 0.0,
            cpu,
            cpu_ns: ns,
            mem_mbs: None,
            wake_us: None,
            sys_ns: None,
            cpu_mean_ns: None,
            cpu_thread_ns: None,
            sys_thread_ns: None,
        };
        let rs: Vec<Reading> = (0..12)
            .map(|i| r(i % 2, if i % 2 == 0 { 100.0 } else { 200.0 }))
            .collect();
        let l0 = control_level(&rs, &[0], Probe::Loop);
        assert!(l0.is_none(), "six readings on CPU 0 are too few");
        let all = control_level(&rs, &[], Probe::Loop).unwrap();
        assert!((all - (100f64.ln() + 200f64.ln()) / 2.0).abs() < 1e-12);
        assert!(control_level(&rs, &[], Probe::Syscall).is_none());
    }
}
