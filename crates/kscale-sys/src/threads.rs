//! Counting threads in /proc: this process's (`Threads:` of
//! /proc/self/status, sampled for a peak) and the machine's.

use anyhow::{Context, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Threads of this process as the kernel counts them (`Threads:` of
/// /proc/self/status), not computed: one small read, where listing
/// /proc/self/task grows with the thread count.
pub fn count_threads() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| threads_in_status(&s))
        .unwrap_or(0)
}

pub fn threads_in_status(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
}

/// Samples this process's thread count every 100 ms until finished: the
/// peak. (The count when the window begins is taken by the role's main
/// thread, which sees `begin`.)
pub struct ThreadSampler {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<u64>>,
}

impl ThreadSampler {
    pub fn start() -> Result<ThreadSampler> {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        // Unnamed: it keeps the role's name, as a profile names a process
        // after the last name one of its threads took.
        let handle = std::thread::Builder::new()
            .stack_size(64 << 10)
            .spawn(move || {
                let mut peak = 0;
                while !s.load(Ordering::Relaxed) {
                    peak = peak.max(count_threads());
                    std::thread::sleep(Duration::from_millis(100));
                }
                peak.max(count_threads())
            })
            .context("cannot start the thread sampler")?;
        Ok(ThreadSampler {
            stop,
            handle: Some(handle),
        })
    }
    pub fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().and_then(|h| h.join().ok()).unwrap_or(0)
    }
}

impl Drop for ThreadSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The threads of every process on the machine (/proc/loadavg's total).
pub fn system_threads() -> u64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(3)
                .and_then(|f| f.split('/').nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_are_counted_in_proc() {
        // Other tests of this harness start and end threads meanwhile, so
        // the live count is only checked for sense; the parsing exactly.
        let status = "Name:\tkscale\nState:\tS (sleeping)\nThreads:\t806\nSigQ:\t0/1\n";
        assert_eq!(threads_in_status(status), Some(806));
        assert_eq!(threads_in_status("Name:\tx\n"), None);
        let now = count_threads();
        assert!(now >= 1);
        assert!(system_threads() >= 1);
    }

    #[test]
    fn the_sampler_sees_at_least_its_own_thread() {
        let s = ThreadSampler::start().unwrap();
        assert!(s.finish() >= 2);
    }
}
