//! Timing helpers shared by the micro families: lmbench's median of short
//! repetitions inside a trial (docs/host.md, "Per-trial estimators") and the
//! CPU clocks. The measured loops themselves stay in their family files.

use crate::TrialCtx;
use anyhow::{Context, Result};
use std::time::Duration;

/// The fewest timed repetitions one trial is split into: lmbench's `TRIES`.
const MIN_REPS: u64 = 11;
/// Target length of one repetition: lmbench's shortest `ENOUGH` interval,
/// which it picks on any machine with a fine-grained clock.
const REP_TIME: Duration = Duration::from_millis(5);

/// How many repetitions a trial of `ctx.trial_time` is split into, so that
/// each lasts about [`REP_TIME`]. Depends only on the trial time, so trials
/// with the warm-up's fixed iteration count split the same way.
pub fn reps(ctx: &TrialCtx) -> u64 {
    let r = (ctx.trial_time.as_secs_f64() / REP_TIME.as_secs_f64()).round() as u64;
    r.max(MIN_REPS)
}

/// Runs `n` operations as up to `reps` calls of `f(share)` and returns the
/// total time and the median time per operation. lmbench's `benchmp` reports
/// the median of repetitions of about 5 ms each: short enough that most run
/// without another process taking the CPU in between, so one busy neighbour
/// does not move the figure. Doing the same inside a trial keeps kscale's
/// trials as steady as the reference's on a shared machine.
pub fn median_of_reps(
    n: u64,
    reps: u64,
    mut f: impl FnMut(u64) -> Result<Duration>,
) -> Result<(Duration, f64)> {
    let reps = n.clamp(1, reps.max(1));
    let (base, extra) = (n / reps, n % reps);
    let mut total = Duration::ZERO;
    let mut per_op = Vec::with_capacity(reps as usize);
    for i in 0..reps {
        let share = (base + u64::from(i < extra)).max(1);
        let t = f(share)?;
        total += t;
        per_op.push(t.as_secs_f64() / share as f64);
    }
    Ok((total, kscale_core::stats::median(&per_op)))
}

/// [`TrialCtx::time_per_op`] whose runs are split as [`median_of_reps`]
/// does; returns (median seconds per op, n).
pub fn median_time_per_op(
    ctx: &TrialCtx,
    mut f: impl FnMut(u64) -> Result<Duration>,
) -> Result<(f64, u64)> {
    let reps = reps(ctx);
    let mut median = 0.0;
    let (_, n) = ctx.time_per_op(|n| {
        let (total, m) = median_of_reps(n, reps, &mut f)?;
        median = m;
        Ok(total)
    })?;
    Ok((median, n))
}

/// CPU time of the calling thread.
pub fn thread_cpu_time() -> Result<Duration> {
    cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID).context("clock_gettime(CLOCK_THREAD_CPUTIME_ID)")
}

/// CPU time of the whole process (every thread).
pub fn process_cpu_time() -> Result<Duration> {
    cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID).context("clock_gettime(CLOCK_PROCESS_CPUTIME_ID)")
}

fn cpu_clock(clock: libc::clockid_t) -> std::io::Result<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer for clock_gettime.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_reps_splits_and_takes_the_middle() {
        let mut calls = Vec::new();
        let (total, median) = median_of_reps(25, MIN_REPS, |k| {
            calls.push(k);
            // The third call is a slow outlier the median must ignore.
            let us = if calls.len() == 3 { 1000 } else { 10 };
            Ok(Duration::from_micros(us * k))
        })
        .unwrap();
        assert_eq!(calls.len() as u64, MIN_REPS);
        assert_eq!(calls.iter().sum::<u64>(), 25);
        assert!((median - 10e-6).abs() < 1e-9, "{median}");
        assert!(total > Duration::from_micros(250));
        let (_, m) = median_of_reps(3, 100, |k| Ok(Duration::from_micros(k))).unwrap();
        assert!((m - 1e-6).abs() < 1e-12);
    }

    #[test]
    fn reps_last_about_5_ms() {
        assert_eq!(reps(&crate::test_ctx(&[], 500)), 100);
        assert_eq!(reps(&crate::test_ctx(&[], 20)), MIN_REPS);
    }

    #[test]
    fn cpu_clocks_advance_with_work() {
        let (t0, p0) = (thread_cpu_time().unwrap(), process_cpu_time().unwrap());
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_millis(20) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(thread_cpu_time().unwrap() > t0);
        assert!(process_cpu_time().unwrap() > p0);
    }
}
