//! The gauge: a short fixed-work probe of each CPU a run uses, taken
//! before the run and again through it as a control (docs/noise.md, "The
//! gauge and the control"). It measures the machine: a CPU-bound loop (no
//! system call, no memory traffic beyond L1), one pass over a buffer
//! larger than the caches, a cross-CPU wake-up round trip, and a kernel
//! crossing (the cheapest system call). The crossing is the one probe that
//! runs kernel code: on this kind of VM the host's spells slow every
//! system call by 10–30 % for tens of seconds while the loop moves 2 %, so
//! a gauge without it reads a quiet machine where the cases see a noisy
//! one. Between two runs of different kernels it measures the kernels too,
//! and `check` reads it as the machine's only when the kernel is the same.
//! The parent runs it in a worker process like any trial, so that no
//! measured code runs in the orchestrating process.
use anyhow::{Context, Result};
use kscale_core::noise::Reading;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// What the parent asks of one gauge process.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GaugeRequest {
    pub cpus: Vec<usize>,
    /// Readings of every CPU, taken `spacing_ms` apart: several spread over
    /// a second see the host's sub-second spells, which one cannot.
    pub readings: usize,
    pub spacing_ms: u64,
    /// Seconds since the run's first reading, for the readings' `t_s`.
    pub t0_s: f64,
}

/// Iterations of the CPU loop: about 1–3 ms on a current core, long
/// against the clock and short against a host's spell.
const LOOP_ITERS: u64 = 1 << 20;
/// The CPU loop's repetitions in one reading; the reading is their median,
/// so one preempted repetition does not make the reading.
const LOOP_REPS: usize = 3;
/// Larger than the last-level caches of the machines kscale meets, so a
/// pass reads memory, not cache.
const MEM_BYTES: usize = 64 << 20;
/// Round trips of one wake-up probe.
const WAKES: u32 = 200;
/// System calls of one kernel-crossing repetition: about 2 ms at the
/// ~0.1 µs a crossing takes in a VM, as long as the CPU loop.
const CROSSINGS: u32 = 20_000;

/// A fixed chain of dependent integer operations the compiler cannot fold:
/// its time ([`on_both_clocks`]) is the core's speed as the host gives it
/// now. `iters` iterations: [`LOOP_ITERS`] a gauge reading.
fn cpu_loop(iters: u64) {
    let mut x: u64 = std::hint::black_box(0x9e37_79b9_7f4a_7c15);
    for _ in 0..iters {
        // xorshift64: three dependent operations an iteration.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    std::hint::black_box(x);
}

/// Links of one chain of the pace's loop ([`chains`]).
const CHAIN_LINKS: u32 = 100;
/// Chains of one unit of a pace reading: about 0.5 ms.
const PACE_CHAINS: u64 = 10_000;

/// `n` independent chains of [`CHAIN_LINKS`] dependent multiply-adds,
/// each a loop whose exit ends the chain. A core runs the next chain
/// beside the last one only as far as its branch predictor foresees that
/// exit, so the loop's time is the state the host leaves the predictor in
/// as well as the core's speed. On a 2-vCPU AMD EPYC VM the host's spells
/// moved the time of `getppid` by 7 % (sd over 2-second bins) and this
/// loop with it (r = 0.98, slope 1.0, 1.3 % left over), where one long
/// dependent chain moved 1 % (r = 0.7): the kernel crossing's cost is
/// largely its predicted branches and returns (docs/verdicts.md, "The
/// pace beside each trial").
#[cfg(target_arch = "x86_64")]
fn chains(n: u64) {
    let mut sum: u64 = 0;
    for i in 0..std::hint::black_box(n) {
        let mut x = i;
        let mut links = CHAIN_LINKS;
        // SAFETY: registers only: no memory, no stack, no flags read after.
        unsafe {
            std::arch::asm!(
                "2:",
                "lea {x}, [{x} + {x}*2 + 1]",
                "sub {links:e}, 1",
                "jne 2b",
                x = inout(reg) x,
                links = inout(reg) links,
                options(nomem, nostack),
            )
        };
        std::hint::black_box(links);
        sum = sum.wrapping_add(x);
    }
    std::hint::black_box(sum);
}

/// Elsewhere the chains are the dependent loop's: a pace of the core's
/// speed alone.
#[cfg(not(target_arch = "x86_64"))]
fn chains(n: u64) {
    cpu_loop(n * u64::from(CHAIN_LINKS));
}

/// A pace reading's share of its trial's time, on each side of it.
const PACE_SHARE: f64 = 0.01;

/// The pace the host gives this thread's core now: nanoseconds of
/// [`PACE_CHAINS`] of the pace's [`chains`] on the thread's CPU clock,
/// timed over about 1 % of a trial of `trial_s` (1–16 units; a mean, so a
/// run's pace follows the host's spells in the proportion its trials met
/// them). The worker reads it just before and just after each trial on
/// the trial's thread; it runs no system call between its two clock
/// readings, so no kernel path it could be checking moves it. `None`
/// where the thread's clock cannot be read.
pub fn pace_ns(trial_s: f64) -> Option<f64> {
    let units = ((trial_s * PACE_SHARE / 0.0005).round() as u64).clamp(1, 16);
    let counted = units * PACE_CHAINS;
    let (_, on_thread) = on_both_clocks(|| chains(counted * test_pace_factor()));
    let ns = on_thread / units as f64;
    (ns.is_finite() && ns > 0.0).then_some(ns)
}

/// `KSCALE_TEST_PACE=F`: the pace reading runs F times the iterations it
/// counts, so a test can make the pace read F times slower while the case
/// stays where it is.
fn test_pace_factor() -> u64 {
    std::env::var("KSCALE_TEST_PACE")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|f| (1..=100).contains(f))
        .unwrap_or(1)
}

/// `n` kernel crossings ([`CROSSINGS`] a reading): `getppid`, the system
/// call with the least work inside the kernel (glibc does not cache it), so its time is
/// the entry and exit the host lets a guest's system call have.
fn crossing(n: u32) {
    for _ in 0..n {
        std::hint::black_box(nix::unistd::getppid());
    }
}

/// Nanoseconds `f` took on the wall's clock and on the calling thread's
/// CPU clock (NaN where that clock cannot be read).
fn on_both_clocks(f: impl FnOnce()) -> (f64, f64) {
    let cpu0 = crate::timing::thread_cpu_time().ok();
    let start = Instant::now();
    f();
    let wall = start.elapsed().as_secs_f64() * 1e9;
    let cpu = match (cpu0, crate::timing::thread_cpu_time().ok()) {
        (Some(a), Some(b)) => b.saturating_sub(a).as_secs_f64() * 1e9,
        _ => f64::NAN,
    };
    (wall, cpu)
}

/// [`LOOP_REPS`] repetitions of `f`, each in ns on the wall's clock and
/// on the thread's ([`on_both_clocks`]).
fn repeated(mut f: impl FnMut()) -> (Vec<f64>, Vec<f64>) {
    (0..LOOP_REPS).map(|_| on_both_clocks(&mut f)).unzip()
}

/// The median of repetitions read on the thread's clock; `None` where
/// that clock could not be read.
fn thread_median(v: &[f64]) -> Option<f64> {
    Some(kscale_core::stats::median(v)).filter(|m| m.is_finite())
}

/// One pass of reads over `buf`, in MB/s.
fn mem_pass(buf: &[u64]) -> f64 {
    let start = Instant::now();
    let mut acc = [0u64; 4];
    for chunk in buf.chunks_exact(4) {
        for i in 0..4 {
            acc[i] = acc[i].wrapping_add(chunk[i]);
        }
    }
    std::hint::black_box(acc);
    let s = start.elapsed().as_secs_f64();
    (std::mem::size_of_val(buf) as f64 / 1e6) / s
}

/// Mean round trip, µs, of a one-byte wake-up between this thread (pinned
/// to `a`) and a thread pinned to `b`, each blocking in `read` on its pipe
/// until the other writes: the scheduler's cross-CPU wake-up as every
/// pipe-based benchmark meets it.
fn wake_round_trip(a: usize, b: usize) -> Result<f64> {
    let pipe = || -> Result<(std::fs::File, std::fs::File)> {
        let (r, w) = nix::unistd::pipe().context("cannot make the gauge's pipe")?;
        Ok((r.into(), w.into()))
    };
    let (mut to_b_r, mut to_b_w) = pipe()?;
    let (mut to_a_r, mut to_a_w) = pipe()?;
    let partner = std::thread::Builder::new()
        .name("kscale-gauge".into())
        .spawn(move || -> Result<()> {
            kscale_sys::affinity::pin_one(b)?;
            let mut byte = [0u8];
            for _ in 0..=WAKES {
                to_b_r.read_exact(&mut byte)?;
                to_a_w.write_all(&byte)?;
            }
            Ok(())
        })
        .context("cannot start the gauge's wake-up partner")?;
    kscale_sys::affinity::pin_one(a)?;
    let mut byte = [1u8];
    // One untimed trip: both threads are running and pinned.
    to_b_w.write_all(&byte)?;
    to_a_r.read_exact(&mut byte)?;
    let start = Instant::now();
    for _ in 0..WAKES {
        to_b_w.write_all(&byte)?;
        to_a_r.read_exact(&mut byte)?;
    }
    let us = start.elapsed().as_secs_f64() * 1e6 / f64::from(WAKES);
    partner
        .join()
        .map_err(|_| anyhow::anyhow!("the gauge's wake-up partner panicked"))??;
    Ok(us)
}

/// Test-only: `KSCALE_TEST_GAUGE_JUMP=F` runs every other reading's CPU
/// loop F times over, so the control reads a machine whose speed jumps
/// within the run (docs/fleet.md, "Testing it"): real work, as a noisy
/// neighbour's bursts would take, not an edited figure.
/// `KSCALE_TEST_GAUGE_JUMP=crossing:F` makes every other reading's kernel
/// crossings F times as many instead (F ≥ 1, fractional), the CPU loop
/// left alone: the hour when the host spread the gauge's crossing 14–17 %
/// while the loop and the cases read 1–5 % (docs/planning.md, "Planning to
/// the noise"). Read once.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Jump {
    Loop(u32),
    Crossing(f64),
}

fn test_jump() -> Option<Jump> {
    parse_jump(&std::env::var("KSCALE_TEST_GAUGE_JUMP").ok()?)
}

fn parse_jump(v: &str) -> Option<Jump> {
    match v.strip_prefix("crossing:") {
        Some(f) => {
            let f: f64 = f.parse().ok()?;
            (f.is_finite() && f > 1.0).then_some(Jump::Crossing(f))
        }
        None => {
            let f: u32 = v.parse().ok()?;
            (f > 1).then_some(Jump::Loop(f))
        }
    }
}

/// Takes the readings `req` asks for. The calling thread is pinned to each
/// CPU in turn; a reading of one CPU is taken while the others only wait.
pub fn take(req: &GaugeRequest) -> Result<Vec<Reading>> {
    anyhow::ensure!(!req.cpus.is_empty(), "the gauge needs at least one CPU");
    let mut buf = vec![0u64; MEM_BYTES / 8];
    for (i, v) in buf.iter_mut().enumerate() {
        *v = i as u64;
    }
    let jump = test_jump();
    let clock = Instant::now();
    let mut out = Vec::with_capacity(req.readings * req.cpus.len());
    for k in 0..req.readings.max(1) {
        if k > 0 {
            std::thread::sleep(Duration::from_millis(req.spacing_ms));
        }
        for (i, &cpu) in req.cpus.iter().enumerate() {
            kscale_sys::affinity::pin_one(cpu)
                .with_context(|| format!("the gauge cannot run on CPU {cpu}"))?;
            let t_s = req.t0_s + clock.elapsed().as_secs_f64();
            let (times, crossings_n) = match jump {
                Some(Jump::Loop(f)) if k % 2 == 1 => (f, CROSSINGS),
                Some(Jump::Crossing(f)) if k % 2 == 1 => {
                    (1, (f64::from(CROSSINGS) * f).round() as u32)
                }
                _ => (1, CROSSINGS),
            };
            // Each repetition on both clocks: the wall's for cases timed
            // on it, the thread's for cases timed on their thread's CPU
            // clock (docs/host.md, "The thread's own clock").
            let (mut reps, on_thread) = repeated(|| {
                for _ in 0..times {
                    cpu_loop(LOOP_ITERS);
                }
            });
            let cpu_mean_ns = Some(reps.iter().sum::<f64>() / reps.len() as f64);
            reps.sort_by(f64::total_cmp);
            let cpu_ns = reps[reps.len() / 2];
            let cpu_thread_ns = thread_median(&on_thread);
            let per_crossing = |v: Vec<f64>| -> Vec<f64> {
                v.into_iter().map(|ns| ns / f64::from(CROSSINGS)).collect()
            };
            let (crossings, crossings_on_thread) = repeated(|| crossing(crossings_n));
            let sys_ns = Some(kscale_core::stats::median(&per_crossing(crossings)));
            let sys_thread_ns = thread_median(&per_crossing(crossings_on_thread));
            let mem_mbs = Some(mem_pass(&buf));
            let partner = req.cpus[(i + 1) % req.cpus.len()];
            let wake_us = if partner != cpu {
                wake_round_trip(cpu, partner).ok()
            } else {
                None
            };
            out.push(Reading {
                t_s,
                cpu,
                cpu_ns,
                mem_mbs,
                wake_us,
                sys_ns,
                cpu_mean_ns,
                cpu_thread_ns,
                sys_thread_ns,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pace is a time per unit of chains whatever the trial's length,
    /// so runs of short and long trials read on one scale.
    #[test]
    fn the_pace_reads_one_scale_at_any_trial_length() {
        let short = pace_ns(0.05).expect("the thread's clock");
        let long = pace_ns(0.5).expect("the thread's clock");
        assert!(short > 0.0 && long > 0.0);
        assert!(short / long < 3.0 && long / short < 3.0, "{short} {long}");
    }

    #[test]
    fn a_reading_of_each_cpu_with_its_three_probes() {
        let cpus = kscale_sys::affinity::available_cpus().unwrap_or_else(|_| vec![0]);
        let cpus: Vec<usize> = cpus.into_iter().take(2).collect();
        let rs = take(&GaugeRequest {
            cpus: cpus.clone(),
            readings: 2,
            spacing_ms: 1,
            t0_s: 10.0,
        })
        .expect("the gauge runs on the CPUs this test may use");
        assert_eq!(rs.len(), 2 * cpus.len());
        for r in &rs {
            assert!(cpus.contains(&r.cpu));
            assert!(r.t_s >= 10.0);
            // 2^20 iterations of three dependent operations take more
            // than 0.1 ms on any core and less than a second.
            assert!(r.cpu_ns > 1e5 && r.cpu_ns < 1e9, "{r:?}");
            assert!(r.mem_mbs.is_some_and(|m| m > 10.0), "{r:?}");
            assert_eq!(r.wake_us.is_some(), cpus.len() > 1, "{r:?}");
            // A system call takes more than 10 ns and less than 100 µs.
            assert!(r.sys_ns.is_some_and(|s| s > 10.0 && s < 1e5), "{r:?}");
        }
    }

    #[test]
    fn a_jump_names_the_loop_or_the_crossing() {
        assert_eq!(parse_jump("3"), Some(Jump::Loop(3)));
        assert_eq!(parse_jump("crossing:1.4"), Some(Jump::Crossing(1.4)));
        for bad in [
            "1",
            "0",
            "x",
            "crossing:1",
            "crossing:0.5",
            "crossing:inf",
            "crossing:",
        ] {
            assert_eq!(parse_jump(bad), None, "{bad}");
        }
    }
}
