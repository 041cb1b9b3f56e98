//! How far apart two CPUs are right now: the round trip of one cache line
//! between threads pinned to each. On bare metal this is the topology (an
//! SMT sibling, a shared L3, another socket) and does not change. On a
//! virtual machine it is wherever the host last put the two vCPUs, and the
//! host moves them: on the 2-vCPU AMD EPYC VM kscale is developed on it
//! reads about 30–65, 90–110 or 400–600 ns and switches every few seconds, and
//! a TCP ping-pong between the two vCPUs runs a third slower while it reads
//! 400 ns (docs/host.md, "vCPU placement"). kscale measures it around
//! every trial that spans two CPUs, so a table can say when a spread
//! followed it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Round trips per probe: about 0.2–1.5 ms here, long against the clock's
/// resolution and short against a host's re-placement.
const TRIPS: u64 = 3000;
/// A probe that takes longer than this is abandoned: one side was not
/// running (the host, or another task on its CPU), and the figure would be
/// the scheduler's, not the distance's.
const LIMIT: Duration = Duration::from_millis(50);

/// Mean round trip, in ns, of a cache line bounced between a thread pinned
/// to `a` and one pinned to `b`; `None` when either CPU cannot be used or the
/// probe overran [`LIMIT`]. The calling thread's affinity is left alone.
pub fn round_trip_ns(a: usize, b: usize) -> Option<f64> {
    if a == b {
        return None;
    }
    // Even values are the `a` side's turn, odd values the `b` side's.
    let line = Arc::new(AtomicU64::new(0));
    let quit = Arc::new(AtomicBool::new(false));
    let (l, q) = (line.clone(), quit.clone());
    let responder = std::thread::Builder::new()
        .name("kscale-linetrip".into())
        .spawn(move || {
            if crate::affinity::pin_one(b).is_err() {
                q.store(true, Ordering::Relaxed);
                return;
            }
            while !q.load(Ordering::Relaxed) {
                let v = l.load(Ordering::Acquire);
                if v % 2 == 1 {
                    l.store(v + 1, Ordering::Release);
                } else {
                    std::hint::spin_loop();
                }
            }
        })
        .ok()?;
    let (l, q) = (line, quit.clone());
    let asker = std::thread::Builder::new()
        .name("kscale-linetrip".into())
        .spawn(move || -> Option<f64> {
            crate::affinity::pin_one(a).ok()?;
            let deadline = Instant::now() + LIMIT;
            // One uncounted trip: both threads running and the line in play.
            let trip = |v: u64| -> Option<()> {
                l.store(v + 1, Ordering::Release);
                let mut spins = 0u32;
                while l.load(Ordering::Acquire) != v + 2 {
                    if q.load(Ordering::Relaxed) {
                        return None;
                    }
                    spins = spins.wrapping_add(1);
                    if spins.is_multiple_of(4096) && Instant::now() > deadline {
                        return None;
                    }
                    std::hint::spin_loop();
                }
                Some(())
            };
            trip(0)?;
            let start = Instant::now();
            for i in 1..=TRIPS {
                trip(2 * i)?;
            }
            Some(start.elapsed().as_secs_f64() * 1e9 / TRIPS as f64)
        })
        .ok();
    let result = asker.and_then(|h| h.join().ok().flatten());
    quit.store(true, Ordering::Relaxed);
    let _ = responder.join();
    result
}

/// Two CPUs a trial on `cpus` spans: its first two, or its only one and the
/// first other CPU in `available` that its load runs on; `None` for a trial
/// that stays on one CPU.
pub fn pair(cpus: &[usize], available: &[usize], load_elsewhere: bool) -> Option<(usize, usize)> {
    let a = *cpus.first()?;
    if let Some(&b) = cpus.get(1) {
        return Some((a, b));
    }
    if !load_elsewhere {
        return None;
    }
    available.iter().copied().find(|&c| c != a).map(|b| (a, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_follow_the_configuration_and_its_load() {
        assert_eq!(pair(&[0, 1], &[0, 1], false), Some((0, 1)));
        assert_eq!(pair(&[2], &[0, 1, 2, 3], true), Some((2, 0)));
        assert_eq!(pair(&[2], &[0, 1, 2, 3], false), None);
        assert_eq!(pair(&[0], &[0], true), None);
        assert_eq!(pair(&[], &[0, 1], true), None);
    }

    #[test]
    fn a_line_goes_there_and_back_between_two_cpus() {
        let cpus = crate::affinity::available_cpus().unwrap_or_default();
        if cpus.len() < 2 {
            eprintln!("skipped: one CPU ({cpus:?}), no pair to probe");
            assert!(
                std::env::var_os("CI").is_none(),
                "CI machines have two CPUs"
            );
            return;
        }
        // The host may deschedule a side mid-probe; one of a few succeeds.
        let ns = (0..5).find_map(|_| round_trip_ns(cpus[0], cpus[1]));
        let ns = ns.expect("five probes overran 50 ms");
        // A line transfer is tens to hundreds of ns on any machine kscale
        // runs on; a figure outside that is a broken probe.
        assert!((10.0..20_000.0).contains(&ns), "{ns} ns");
        assert_eq!(round_trip_ns(cpus[0], cpus[0]), None);
    }
}
