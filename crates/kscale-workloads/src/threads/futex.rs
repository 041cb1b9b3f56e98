//! The `futex` implementation: the smallest mutex and condition variable that
//! are correct on the raw futex syscall, so that `threads` can show what
//! glibc's and Rust's versions add on top of the kernel primitive.
//!
//! The mutex is the third one of Drepper's "Futexes Are Tricky" (states
//! 0 = unlocked, 1 = locked, 2 = locked with possible waiters): an
//! uncontended lock and unlock are one atomic each and no syscall. The
//! condition variable is a sequence counter: a waiter reads it under the
//! mutex, unlocks, and sleeps only if no signal has bumped it since, so a
//! signal between unlock and sleep cannot be lost.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: word is a live, aligned u32 for the duration of the call and
    // ts_ptr is null or points to a timespec on this stack frame. EAGAIN
    // (value changed), EINTR and ETIMEDOUT all mean "re-check", which every
    // caller does.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            ts_ptr,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

fn futex_wake(word: &AtomicU32, n: i32) {
    // SAFETY: word is a live, aligned u32; FUTEX_WAKE only reads its address.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            n,
        );
    }
}

/// Drepper's mutex 3. Not reentrant, no owner tracking, no poisoning.
#[derive(Default)]
pub struct FutexMutex {
    state: AtomicU32,
}

impl FutexMutex {
    pub const fn new() -> Self {
        FutexMutex {
            state: AtomicU32::new(0),
        }
    }

    #[inline]
    pub fn lock(&self) {
        if let Err(c) = self
            .state
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
        {
            self.lock_contended(c);
        }
    }

    #[cold]
    fn lock_contended(&self, mut c: u32) {
        if c != 2 {
            c = self.state.swap(2, Ordering::Acquire);
        }
        while c != 0 {
            futex_wait(&self.state, 2, None);
            c = self.state.swap(2, Ordering::Acquire);
        }
    }

    /// Must only be called by the thread holding the lock.
    #[inline]
    pub fn unlock(&self) {
        if self.state.fetch_sub(1, Ordering::Release) != 1 {
            self.state.store(0, Ordering::Release);
            futex_wake(&self.state, 1);
        }
    }
}

/// A sequence-counter condition variable for [`FutexMutex`].
#[derive(Default)]
pub struct FutexCond {
    seq: AtomicU32,
}

impl FutexCond {
    pub const fn new() -> Self {
        FutexCond {
            seq: AtomicU32::new(0),
        }
    }

    /// Atomically unlocks `m` and sleeps until signalled (or spuriously);
    /// `m` is held again on return. The caller must hold `m`.
    pub fn wait(&self, m: &FutexMutex) {
        self.wait_timeout(m, None);
    }

    /// As [`wait`](Self::wait) but gives up after `timeout`; the caller
    /// re-checks its predicate either way.
    pub fn wait_timeout(&self, m: &FutexMutex, timeout: Option<Duration>) {
        // Read under the mutex: any signal for a state change made after
        // this point bumps the counter, so the futex_wait below returns at
        // once instead of sleeping through it.
        let seq = self.seq.load(Ordering::Relaxed);
        m.unlock();
        futex_wait(&self.seq, seq, timeout);
        m.lock();
    }

    pub fn signal(&self) {
        self.seq.fetch_add(1, Ordering::Release);
        futex_wake(&self.seq, 1);
    }

    pub fn broadcast(&self) {
        self.seq.fetch_add(1, Ordering::Release);
        futex_wake(&self.seq, i32::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::UnsafeCell;
    use std::time::Instant;

    struct Shared {
        m: FutexMutex,
        counter: UnsafeCell<u64>,
    }
    // SAFETY: counter is only touched while m is held.
    unsafe impl Sync for Shared {}

    #[test]
    fn mutual_exclusion() {
        const THREADS: u64 = 4;
        const ROUNDS: u64 = 50_000;
        let s = Shared {
            m: FutexMutex::new(),
            counter: UnsafeCell::new(0),
        };
        std::thread::scope(|sc| {
            for _ in 0..THREADS {
                let s = &s;
                sc.spawn(move || {
                    for _ in 0..ROUNDS {
                        s.m.lock();
                        // SAFETY: the lock is held. A non-atomic
                        // read-modify-write with a yield in between loses
                        // updates unless the lock really excludes.
                        unsafe {
                            let v = std::ptr::read_volatile(s.counter.get());
                            if v.is_multiple_of(1024) {
                                std::thread::yield_now();
                            }
                            std::ptr::write_volatile(s.counter.get(), v + 1);
                        }
                        s.m.unlock();
                    }
                });
            }
        });
        assert_eq!(s.counter.into_inner(), THREADS * ROUNDS);
        assert_eq!(s.m.state.load(Ordering::Relaxed), 0);
    }

    /// Ping-pong between two threads plus a many-waiter broadcast round;
    /// every wait carries a timeout, and a wait that times out while its
    /// predicate is still false is a lost wake-up (the notifier always
    /// changes the state before signalling).
    #[test]
    fn no_lost_wakeups() {
        const ROUNDS: u32 = 20_000;
        const LIMIT: Duration = Duration::from_secs(5);
        struct Pp {
            m: FutexMutex,
            c: FutexCond,
            turn: UnsafeCell<u32>,
        }
        // SAFETY: turn is only touched while m is held.
        unsafe impl Sync for Pp {}
        let p = Pp {
            m: FutexMutex::new(),
            c: FutexCond::new(),
            turn: UnsafeCell::new(0),
        };
        let lost = std::sync::atomic::AtomicU32::new(0);
        std::thread::scope(|sc| {
            for me in 0..2u32 {
                let (p, lost) = (&p, &lost);
                sc.spawn(move || {
                    for _ in 0..ROUNDS {
                        p.m.lock();
                        // SAFETY (all derefs of turn): m is held.
                        while unsafe { *p.turn.get() } != me {
                            let t0 = Instant::now();
                            p.c.wait_timeout(&p.m, Some(LIMIT));
                            if t0.elapsed() >= LIMIT && unsafe { *p.turn.get() } != me {
                                lost.fetch_add(1, Ordering::Relaxed);
                                p.m.unlock();
                                return;
                            }
                        }
                        unsafe { *p.turn.get() = 1 - me };
                        p.m.unlock();
                        p.c.signal();
                    }
                });
            }
        });
        assert_eq!(lost.load(Ordering::Relaxed), 0, "lost wake-up");

        // Broadcast: many waiters, one state change each round.
        let gen = UnsafeCell::new(0u32);
        struct Bc<'a> {
            m: FutexMutex,
            c: FutexCond,
            gen: &'a UnsafeCell<u32>,
        }
        // SAFETY: gen is only touched while m is held.
        unsafe impl Sync for Bc<'_> {}
        let b = Bc {
            m: FutexMutex::new(),
            c: FutexCond::new(),
            gen: &gen,
        };
        let acks = AtomicU32::new(0);
        const WAITERS: u32 = 6;
        const BROUNDS: u32 = 500;
        std::thread::scope(|sc| {
            for _ in 0..WAITERS {
                let (b, acks, lost) = (&b, &acks, &lost);
                sc.spawn(move || {
                    for round in 1..=BROUNDS {
                        b.m.lock();
                        // SAFETY: m is held.
                        while unsafe { *b.gen.get() } < round {
                            let t0 = Instant::now();
                            b.c.wait_timeout(&b.m, Some(LIMIT));
                            if t0.elapsed() >= LIMIT && unsafe { *b.gen.get() } < round {
                                lost.fetch_add(1, Ordering::Relaxed);
                                b.m.unlock();
                                return;
                            }
                        }
                        b.m.unlock();
                        acks.fetch_add(1, Ordering::AcqRel);
                    }
                });
            }
            for round in 1..=BROUNDS {
                let deadline = Instant::now() + LIMIT * 2;
                while acks.load(Ordering::Acquire) < (round - 1) * WAITERS {
                    if Instant::now() > deadline || lost.load(Ordering::Relaxed) > 0 {
                        lost.fetch_add(1, Ordering::Relaxed);
                        // Release everyone so the scope can join.
                        b.m.lock();
                        // SAFETY: m is held.
                        unsafe { *b.gen.get() = BROUNDS };
                        b.m.unlock();
                        b.c.broadcast();
                        return;
                    }
                    std::thread::yield_now();
                }
                b.m.lock();
                // SAFETY: m is held.
                unsafe { *b.gen.get() = round };
                b.m.unlock();
                b.c.broadcast();
            }
        });
        assert_eq!(lost.load(Ordering::Relaxed), 0, "lost wake-up in broadcast");
        assert_eq!(acks.load(Ordering::Relaxed), WAITERS * BROUNDS);
    }
}
