//! `ctx`: context switching latency (docs/families/ctx.md, seed 003, lmbench `lat_ctx`).
//!
//! `procs` processes (the worker and `procs - 1` forked children) form a ring
//! of pipes and pass a 4-byte token around it; every process sums its own
//! private array of `size` bytes each time it holds the token. One trip around
//! the ring costs `procs` context switches plus `procs` times the pipe traffic
//! and summing. As lat_ctx does, that overhead is measured in a single
//! process — the same number of pipe write/read pairs (cycling over `procs`
//! pipes) and array sums with no switch in between — and subtracted, leaving
//! the time of the switch itself, including refilling the cache with the next
//! process's array. Both sides are the median of short repetitions, as
//! lat_ctx's benchmp reports.

use crate::shared::child::ChildGuard;
use crate::shared::place::{place_help, Placement, PLACE_PARAM};
use crate::timing::{median_of_reps, median_time_per_op, reps};
use crate::{timed, ChartDef, Family, TrialCtx, TrialOutput, WorkloadDef};
use anyhow::{bail, ensure, Context, Result};
use kscale_core::{MetricDef, ParamDef, ParamKind};
use std::hint::black_box;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

const LAT: MetricDef = MetricDef::lower("latency", "µs");
/// The subtracted pipe + summing cost per switch, kept so a reader can see
/// how much of the raw ring time was not switching.
const OVERHEAD: MetricDef = MetricDef::lower("overhead", "µs");

pub static FAMILY: Family = Family {
    name: "ctx",
    title: "Context switching latency",
    help: "Time to switch between processes passing a token around a ring of pipes, each \
           summing a private array (lmbench lat_ctx).",
    workloads: &[WorkloadDef {
        family: "ctx",
        name: "lat",
        title: "Context switching latency",
        help: concat!(
            "µs per context switch in a ring of `procs` processes, each summing its own \
             `size`-byte array before passing the token on; the same pipe traffic and \
             summing in one process, on the worker's CPU, is subtracted (lmbench lat_ctx \
             -s size procs).",
            place_help!()
        ),
        params: &[
            ParamDef {
                name: "size",
                help: "Private array each process sums while it holds the token.",
                kind: ParamKind::Size {
                    min: 0,
                    max: 1 << 30,
                },
                default: &["0", "4k", "8k", "16k", "32k", "64k"],
                quick: &["0", "16k", "64k"],
            },
            ParamDef {
                name: "procs",
                help: "Processes in the ring (at least 2).",
                kind: ParamKind::Int { min: 2, max: 4096 },
                default: &["2", "4", "8", "16", "24", "32", "64", "96"],
                quick: &["2", "8", "32"],
            },
            PLACE_PARAM,
        ],
        metrics: &[LAT, OVERHEAD],
        geomean_over: Some("procs"),
        charts: &[ChartDef::against("procs").log()],
        run: lat,
        ..WorkloadDef::BASE
    }],
};

/// The token lat_ctx passes: one C int.
type Token = [u8; 4];

/// Writes the token; a short write or error means the ring is broken.
fn send(fd: RawFd, tok: &Token) -> std::io::Result<()> {
    crate::shared::fd::write_exact(fd, tok)
}

/// Reads the token; end of file (the ring was torn down) is an error too.
fn recv(fd: RawFd, tok: &mut Token) -> std::io::Result<()> {
    crate::shared::fd::read_exact(fd, tok)
}

/// A process's private array, written once so that every page is really
/// mapped (a zeroed allocation would leave all pages sharing the kernel's
/// zero page, which stays in cache and hides the cost being measured).
fn private_array(bytes: usize) -> Vec<u64> {
    vec![1u64; bytes / std::mem::size_of::<u64>()]
}

/// Sums the array with scalar volatile loads, shaped as lmbench's `bread`
/// compiled with `-O`: 128-word blocks summed on their own and then added,
/// then 16-word blocks, then single words. Volatile loads keep the sum from
/// being hoisted out of the token loop (the array never changes) or
/// vectorised into a different cost than the reference's.
#[inline(never)]
fn sum_words(data: &[u64]) -> u64 {
    fn block_sum(block: &[u64]) -> u64 {
        let s = block.iter().fold(0u64, |acc, w| {
            // SAFETY: w is a valid reference into the slice.
            acc.wrapping_add(unsafe { std::ptr::read_volatile(w) })
        });
        // Keeps LLVM from folding the blocks back into one running sum.
        black_box(s)
    }
    let mut sum = 0u64;
    let mut big = data.chunks_exact(128);
    for b in &mut big {
        sum = sum.wrapping_add(block_sum(b));
    }
    let mut small = big.remainder().chunks_exact(16);
    for b in &mut small {
        sum = sum.wrapping_add(block_sum(b));
    }
    sum.wrapping_add(block_sum(small.remainder()))
}

fn pipes(n: usize) -> Result<Vec<(OwnedFd, OwnedFd)>> {
    (0..n)
        .map(|i| nix::unistd::pipe().with_context(|| format!("creating pipe {i} of {n}")))
        .collect()
}

/// A running ring. Dropping it closes the worker's pipe ends and kills and
/// reaps every child, whatever path the trial leaves by.
struct Ring {
    /// The worker writes the token into the first pipe...
    first_w: OwnedFd,
    /// ...and gets it back from the last one.
    last_r: OwnedFd,
    _children: Vec<ChildGuard>,
}

impl Ring {
    /// Pins the worker (rank 0) where `place` says, then forks ring
    /// processes 1..procs, each pinned to its own rank's CPU.
    fn start(procs: usize, bytes: usize, place: &Placement) -> Result<Ring> {
        place.pin(0)?;
        let mut pipes = pipes(procs)?;
        let all: Vec<RawFd> = pipes
            .iter()
            .flat_map(|(r, w)| [r.as_raw_fd(), w.as_raw_fd()])
            .collect();
        let mut children = Vec::with_capacity(procs - 1);
        for i in 1..procs {
            let rd = pipes[i - 1].0.as_raw_fd();
            let wr = pipes[i].1.as_raw_fd();
            let all = &all;
            let pid = place
                .fork(i, move || {
                    for &fd in all {
                        if fd != rd && fd != wr {
                            // SAFETY: the child owns its copies of the inherited fds.
                            unsafe { libc::close(fd) };
                        }
                    }
                    let data = private_array(bytes);
                    let mut tok: Token = [0; 4];
                    // Runs until the worker closes its end or kills the ring.
                    while recv(rd, &mut tok).is_ok() {
                        black_box(sum_words(black_box(&data)));
                        if send(wr, &tok).is_err() {
                            break;
                        }
                    }
                    0
                })
                .with_context(|| format!("forking ring process {i} of {procs}"))?;
            children.push(ChildGuard(pid));
        }
        let (last_r, _) = pipes.pop().context("ring has no pipes")?;
        let (_, first_w) = pipes.swap_remove(0);
        // The remaining ends belong to the children; closing ours now means a
        // dead neighbour shows up as end of file instead of a hang.
        drop(pipes);
        let ring = Ring {
            first_w,
            last_r,
            _children: children,
        };
        // One trip so that every child is up and waiting before timing.
        let mut tok: Token = 1i32.to_ne_bytes();
        send(ring.first_w.as_raw_fd(), &tok).context("starting the token")?;
        recv(ring.last_r.as_raw_fd(), &mut tok).context("first trip around the ring")?;
        Ok(ring)
    }

    /// `trips` times round the ring, the worker summing its own array in turn.
    fn run(&self, trips: u64, data: &[u64]) -> Result<Duration> {
        let (w, r) = (self.first_w.as_raw_fd(), self.last_r.as_raw_fd());
        let mut tok: Token = 1i32.to_ne_bytes();
        timed(|| {
            for _ in 0..trips {
                send(w, &tok).context("passing the token")?;
                recv(r, &mut tok).context("token lost in the ring")?;
                black_box(sum_words(black_box(data)));
            }
            Ok(())
        })
    }
}

/// Seconds per hop of the same work as `hops` ring hops without switching:
/// a write and a read on one of `procs` pipes in turn, then the array sum,
/// all in this process; the median of short repetitions as for the ring.
fn overhead(procs: usize, hops: u64, reps: u64, data: &[u64]) -> Result<f64> {
    let pipes = pipes(procs)?;
    let fds: Vec<(RawFd, RawFd)> = pipes
        .iter()
        .map(|(r, w)| (r.as_raw_fd(), w.as_raw_fd()))
        .collect();
    let mut tok: Token = 1i32.to_ne_bytes();
    let mut i = 0;
    let (_, per_hop) = median_of_reps(hops, reps, |share| {
        timed(|| {
            for _ in 0..share {
                let (r, w) = fds[i];
                send(w, &tok).context("pipe write")?;
                recv(r, &mut tok).context("pipe read")?;
                i += 1;
                if i == fds.len() {
                    i = 0;
                }
                black_box(sum_words(black_box(data)));
            }
            Ok(())
        })
    })?;
    Ok(per_hop)
}

/// Readings of the overhead a trial may take before its switch time is
/// called not measurable.
const OVERHEAD_READINGS: usize = 3;

/// The switch time a hop of `per_hop` seconds leaves over its overhead
/// (`measure`), and that overhead. The overhead is fixed work that noise
/// can only lengthen, so where one reading leaves nothing (under a
/// preempting neighbour a 64 KB ring's 2.3 µs read 6.6 µs once, and the
/// case was lost after 185 good trials), it is read again and the least
/// reading kept. A hop that is still not above it fails the trial: the
/// ring does not switch as its placement says.
fn switch_time(per_hop: f64, mut measure: impl FnMut() -> Result<f64>) -> Result<(f64, f64)> {
    let mut ovh = f64::INFINITY;
    for _ in 0..OVERHEAD_READINGS {
        ovh = ovh.min(measure()?);
        let switch = per_hop - ovh;
        if switch > 0.0 {
            return Ok((switch, ovh));
        }
    }
    bail!(
        "context switch time not measurable: {:.3} µs per hop is not above the \
         {:.3} µs pipe and summing overhead (the least of {OVERHEAD_READINGS} readings)",
        per_hop * 1e6,
        ovh * 1e6
    )
}

fn lat(ctx: &TrialCtx) -> Result<TrialOutput> {
    let procs = usize::try_from(ctx.params.int("procs")?).context("procs too large")?;
    ensure!(
        procs >= 2,
        "procs must be at least 2 (a ring of one process never switches), got {procs}"
    );
    let bytes = usize::try_from(ctx.params.size("size")?).context("size too large")?;
    let place = Placement::from_ctx(ctx)?;
    let data = private_array(bytes);

    let (per_trip, trips) = {
        let ring = Ring::start(procs, bytes, &place)?;
        median_time_per_op(ctx, |n| ring.run(n, &data))?
    };
    // Measured after the ring is gone so no idle child shares the CPU (and
    // on the worker's CPU, where place pinned it), with
    // exactly the hops the ring made, so both sides do the same work.
    let hops = trips.saturating_mul(procs as u64);
    let per_hop = per_trip / procs as f64;
    let (switch, ovh) = switch_time(per_hop, || overhead(procs, hops, reps(ctx), &data))?;
    Ok(TrialOutput::new(trips)
        .with(&LAT, switch * 1e6)
        .with(&OVERHEAD, ovh * 1e6)
        .note(place.note(procs, "partner")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared::child::fork_child;

    fn ctx_with(size: &str, procs: &str, trial_ms: u64) -> TrialCtx {
        crate::test_ctx(&[("size", size), ("procs", procs)], trial_ms)
    }

    #[test]
    fn ring_reports_a_plausible_switch_time() {
        for (size, procs) in [("0", "2"), ("16k", "4")] {
            let ctx = ctx_with(size, procs, 20);
            let out = std::thread::spawn(move || lat(&ctx))
                .join()
                .unwrap()
                .unwrap();
            let v = out.values[LAT.name];
            assert!(
                v.is_finite() && v > 0.0 && v < 10_000.0,
                "{size} {procs}: {v}"
            );
            assert!(out.values[OVERHEAD.name] > 0.0);
            assert!(out.iterations > 0);
        }
    }

    /// One overhead reading a neighbour lengthened is read again; a hop
    /// that never clears its overhead fails, and so does NaN.
    #[test]
    fn an_overhead_above_the_hop_is_read_again_before_failing() {
        let mut readings = [6.6e-6, 2.3e-6].into_iter();
        let (switch, ovh) =
            switch_time(6.1e-6, || Ok(readings.next().expect("two readings"))).expect("second");
        assert!((ovh - 2.3e-6).abs() < 1e-12 && (switch - 3.8e-6).abs() < 1e-12);
        let mut n = 0;
        let e = switch_time(2.0e-6, || {
            n += 1;
            Ok(2.5e-6)
        })
        .expect_err("never above");
        assert_eq!(n, OVERHEAD_READINGS);
        assert!(e.to_string().contains("not measurable"), "{e}");
        assert!(switch_time(f64::NAN, || Ok(1e-6)).is_err());
        assert_eq!(
            switch_time(5e-6, || Ok(1e-6)).expect("first").1,
            1e-6,
            "a first reading that leaves a switch is kept"
        );
    }

    #[test]
    fn fixed_iterations_are_honoured() {
        let mut ctx = ctx_with("0", "2", 20);
        ctx.iterations = Some(50);
        let out = std::thread::spawn(move || lat(&ctx)).join().unwrap();
        assert_eq!(out.unwrap().iterations, 50);
    }

    /// A ring on two CPUs alternates them with place=spread and stays on the
    /// first with place=same (each child's mask is checked before the note
    /// is written). In a scratch thread: the worker pins itself.
    #[test]
    fn the_ring_is_placed() {
        let Some(cpus) = crate::shared::place::tests::two_cpus() else {
            return;
        };
        for place in ["spread", "same", "os"] {
            let on = cpus.clone();
            let out = std::thread::spawn(move || {
                let mut ctx =
                    crate::test_ctx(&[("size", "0"), ("procs", "3"), ("place", place)], 20);
                ctx.cpus = on;
                lat(&ctx)
            })
            .join()
            .unwrap()
            .unwrap_or_else(|e| panic!("{place}: {e:#}"));
            let want = Placement::new(place, &cpus).unwrap().note(3, "partner");
            assert_eq!(out.notes, [want], "{place}");
        }
    }

    #[test]
    fn a_ring_of_one_is_refused() {
        assert!(lat(&ctx_with("0", "1", 20)).is_err());
    }

    #[test]
    fn sum_reads_every_word() {
        for n in [0u64, 1, 37, 128, 200, 300] {
            let data: Vec<u64> = (1..=n).collect();
            assert_eq!(sum_words(&data), n * (n + 1) / 2, "{n}");
        }
    }

    /// Side-by-side figures for comparison with `lat_ctx`:
    /// `taskset -c 0 cargo test -p kscale-workloads --release ctx::tests::measure -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn measure() {
        let sizes = std::env::var("KSCALE_CTX_SIZES").unwrap_or_else(|_| "0 16k 64k".into());
        let procs = std::env::var("KSCALE_CTX_PROCS").unwrap_or_else(|_| "2 8 32".into());
        for size in sizes.split_whitespace() {
            for p in procs.split_whitespace() {
                // In a fresh single-threaded process, like a production worker.
                let pid = fork_child(|| match lat(&ctx_with(size, p, 500)) {
                    Ok(out) => {
                        println!(
                            "ctx.lat size={size:<4} procs={p:<3} {:>8.2} µs (overhead {:.2} µs)",
                            out.values[LAT.name], out.values[OVERHEAD.name]
                        );
                        0
                    }
                    Err(e) => {
                        println!("ctx.lat size={size:<4} procs={p:<3} error: {e:#}");
                        1
                    }
                })
                .unwrap();
                nix::sys::wait::waitpid(pid, None).unwrap();
            }
        }
    }
}
