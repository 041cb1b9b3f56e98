//! One interface over the four implementations of lock + condition variable,
//! so that each test is written once and only the primitives change.
//!
//! A [`Monitor`] is a value guarded by a mutex with two condition variables
//! (the tests need at most two: "work" and "space"). The closure-style API
//! fits Rust's guard-based `std::sync::Mutex` as well as the raw lock/unlock
//! of pthread, futex and spin.

use super::futex::{FutexCond, FutexMutex};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub trait Monitor<T: Send>: Sync + Send {
    fn new(v: T) -> Self;
    /// Runs `f` with the lock held.
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R;
    /// Locks, then waits on condition `cv` (0 or 1) until `ready` returns
    /// `Some`; returns that with the lock released.
    fn wait_for<R>(&self, cv: usize, ready: impl FnMut(&mut T) -> Option<R>) -> R;
    /// As [`wait_for`](Self::wait_for), but gives up (returning `None`)
    /// once `timeout` has passed without `ready` returning `Some`: a
    /// watchdog against lost wake-ups, so a broken primitive fails a trial
    /// instead of hanging it.
    fn wait_for_timeout<R>(
        &self,
        cv: usize,
        timeout: Duration,
        ready: impl FnMut(&mut T) -> Option<R>,
    ) -> Option<R>;
    fn notify_one(&self, cv: usize);
    fn notify_all(&self, cv: usize);
}

/// Unlocks on drop, so a panicking closure cannot leave a raw lock held.
struct Unlock<F: FnMut()>(F);
impl<F: FnMut()> Drop for Unlock<F> {
    fn drop(&mut self) {
        (self.0)()
    }
}

/// The monitors built on a raw lock (pthread, futex, spin): a lock taken
/// and released by hand, and the value it guards. `with` is the same for
/// all three; only the lock differs.
trait RawLocked<T> {
    fn lock(&self);
    /// Must only be called by the thread holding the lock.
    fn unlock(&self);
    /// The guarded value, to be reached only with the lock held.
    fn value(&self) -> &UnsafeCell<T>;

    /// Runs `f` with the lock held, released however `f` ends.
    #[inline]
    fn locked<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.lock();
        let _u = Unlock(|| self.unlock());
        // SAFETY: the lock is held until _u drops, and value() is reached
        // only with it held.
        f(unsafe { &mut *self.value().get() })
    }
}

// ---------------------------------------------------------------- pthread

/// glibc's `pthread_mutex_t` (default type) and `pthread_cond_t`, called
/// directly. Must not move once shared: tests keep it in place and borrow it.
pub struct Pthread<T> {
    m: UnsafeCell<libc::pthread_mutex_t>,
    cv: [UnsafeCell<libc::pthread_cond_t>; 2],
    v: UnsafeCell<T>,
}

// SAFETY: v is only reached with m held; the pthread objects are made for
// sharing between threads.
unsafe impl<T: Send> Sync for Pthread<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Pthread<T> {}

impl<T> RawLocked<T> for Pthread<T> {
    fn lock(&self) {
        // SAFETY: m was initialised by new() and lives as long as self. A
        // default mutex's lock can only fail on deadlock detection, which
        // the default type does not do.
        unsafe { libc::pthread_mutex_lock(self.m.get()) };
    }
    fn unlock(&self) {
        // SAFETY: called only by the thread that locked m.
        unsafe { libc::pthread_mutex_unlock(self.m.get()) };
    }
    fn value(&self) -> &UnsafeCell<T> {
        &self.v
    }
}

impl<T: Send> Monitor<T> for Pthread<T> {
    fn new(v: T) -> Self {
        Pthread {
            m: UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER),
            cv: [
                UnsafeCell::new(libc::PTHREAD_COND_INITIALIZER),
                UnsafeCell::new(libc::PTHREAD_COND_INITIALIZER),
            ],
            v: UnsafeCell::new(v),
        }
    }
    #[inline]
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.locked(f)
    }
    fn wait_for<R>(&self, cv: usize, mut ready: impl FnMut(&mut T) -> Option<R>) -> R {
        self.lock();
        let _u = Unlock(|| self.unlock());
        loop {
            // SAFETY: m is held (pthread_cond_wait re-acquires it).
            if let Some(r) = ready(unsafe { &mut *self.v.get() }) {
                return r;
            }
            // SAFETY: m is held by this thread; the cond lives in self.
            unsafe { libc::pthread_cond_wait(self.cv[cv].get(), self.m.get()) };
        }
    }
    fn wait_for_timeout<R>(
        &self,
        cv: usize,
        timeout: Duration,
        mut ready: impl FnMut(&mut T) -> Option<R>,
    ) -> Option<R> {
        // The statically initialised cond measures timeouts on
        // CLOCK_REALTIME; a step of the wall clock only shifts the watchdog.
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: now is a valid timespec to write into.
        unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut now) };
        let total = now.tv_nsec as u64 + timeout.subsec_nanos() as u64;
        let abs = libc::timespec {
            tv_sec: now.tv_sec
                + timeout.as_secs() as libc::time_t
                + (total / 1_000_000_000) as libc::time_t,
            tv_nsec: (total % 1_000_000_000) as libc::c_long,
        };
        self.lock();
        let _u = Unlock(|| self.unlock());
        loop {
            // SAFETY: m is held (pthread_cond_timedwait re-acquires it).
            if let Some(r) = ready(unsafe { &mut *self.v.get() }) {
                return Some(r);
            }
            // SAFETY: m is held by this thread; cond and abs are valid.
            let rc = unsafe { libc::pthread_cond_timedwait(self.cv[cv].get(), self.m.get(), &abs) };
            if rc == libc::ETIMEDOUT {
                // SAFETY: m is held again after a timed-out wait.
                return ready(unsafe { &mut *self.v.get() });
            }
        }
    }
    fn notify_one(&self, cv: usize) {
        // SAFETY: the cond was initialised in new().
        unsafe { libc::pthread_cond_signal(self.cv[cv].get()) };
    }
    fn notify_all(&self, cv: usize) {
        // SAFETY: as above.
        unsafe { libc::pthread_cond_broadcast(self.cv[cv].get()) };
    }
}

impl<T> Drop for Pthread<T> {
    fn drop(&mut self) {
        // SAFETY: nobody else can hold a reference during drop.
        unsafe {
            libc::pthread_cond_destroy(self.cv[0].get());
            libc::pthread_cond_destroy(self.cv[1].get());
            libc::pthread_mutex_destroy(self.m.get());
        }
    }
}

// ---------------------------------------------------------------- std

/// Rust's `std::sync::Mutex` and `Condvar` (futex-based on Linux).
pub struct Std<T> {
    m: std::sync::Mutex<T>,
    cv: [std::sync::Condvar; 2],
}

impl<T: Send> Monitor<T> for Std<T> {
    fn new(v: T) -> Self {
        Std {
            m: std::sync::Mutex::new(v),
            cv: [std::sync::Condvar::new(), std::sync::Condvar::new()],
        }
    }
    #[inline]
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        // Poisoning only follows a panic in another closure, which the
        // tests do not have; the value is still consistent, so carry on.
        let mut g = self.m.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut g)
    }
    fn wait_for<R>(&self, cv: usize, mut ready: impl FnMut(&mut T) -> Option<R>) -> R {
        let mut g = self.m.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(r) = ready(&mut g) {
                return r;
            }
            g = self.cv[cv].wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }
    fn wait_for_timeout<R>(
        &self,
        cv: usize,
        timeout: Duration,
        mut ready: impl FnMut(&mut T) -> Option<R>,
    ) -> Option<R> {
        let deadline = Instant::now() + timeout;
        let mut g = self.m.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(r) = ready(&mut g) {
                return Some(r);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            g = self.cv[cv]
                .wait_timeout(g, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
    fn notify_one(&self, cv: usize) {
        self.cv[cv].notify_one();
    }
    fn notify_all(&self, cv: usize) {
        self.cv[cv].notify_all();
    }
}

// ---------------------------------------------------------------- futex

/// [`FutexMutex`] and [`FutexCond`]: the minimum the kernel needs.
pub struct Futex<T> {
    m: FutexMutex,
    cv: [FutexCond; 2],
    v: UnsafeCell<T>,
}

// SAFETY: v is only reached with m held.
unsafe impl<T: Send> Sync for Futex<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Futex<T> {}

impl<T> RawLocked<T> for Futex<T> {
    #[inline]
    fn lock(&self) {
        self.m.lock();
    }
    #[inline]
    fn unlock(&self) {
        self.m.unlock();
    }
    fn value(&self) -> &UnsafeCell<T> {
        &self.v
    }
}

impl<T: Send> Monitor<T> for Futex<T> {
    fn new(v: T) -> Self {
        Futex {
            m: FutexMutex::new(),
            cv: [FutexCond::new(), FutexCond::new()],
            v: UnsafeCell::new(v),
        }
    }
    #[inline]
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.locked(f)
    }
    fn wait_for<R>(&self, cv: usize, mut ready: impl FnMut(&mut T) -> Option<R>) -> R {
        self.m.lock();
        let _u = Unlock(|| self.m.unlock());
        loop {
            // SAFETY: m is held (wait re-acquires it before returning).
            if let Some(r) = ready(unsafe { &mut *self.v.get() }) {
                return r;
            }
            self.cv[cv].wait(&self.m);
        }
    }
    fn wait_for_timeout<R>(
        &self,
        cv: usize,
        timeout: Duration,
        mut ready: impl FnMut(&mut T) -> Option<R>,
    ) -> Option<R> {
        let deadline = Instant::now() + timeout;
        self.m.lock();
        let _u = Unlock(|| self.m.unlock());
        loop {
            // SAFETY: m is held (wait re-acquires it before returning).
            if let Some(r) = ready(unsafe { &mut *self.v.get() }) {
                return Some(r);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            self.cv[cv].wait_timeout(&self.m, Some(left));
        }
    }
    fn notify_one(&self, cv: usize) {
        self.cv[cv].signal();
    }
    fn notify_all(&self, cv: usize) {
        self.cv[cv].broadcast();
    }
}

// ---------------------------------------------------------------- spin

/// Spins this many times (with the CPU's pause hint) before yielding: long
/// enough to catch a hand-over from another running CPU, short enough that
/// on one CPU the holder gets to run soon.
const SPINS_BEFORE_YIELD: u32 = 100;

/// A test-and-test-and-set spin lock. Waiting "on a condition" is polling:
/// unlock, spin, re-check — there is nothing to notify.
pub struct Spin<T> {
    locked: AtomicBool,
    v: UnsafeCell<T>,
}

// SAFETY: v is only reached with the lock held.
unsafe impl<T: Send> Sync for Spin<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Spin<T> {}

impl<T> RawLocked<T> for Spin<T> {
    #[inline]
    fn lock(&self) {
        loop {
            if self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
            let mut spins = 0;
            while self.locked.load(Ordering::Relaxed) {
                spin_or_yield(&mut spins);
            }
        }
    }
    #[inline]
    fn unlock(&self) {
        self.locked.store(false, Ordering::Release);
    }
    fn value(&self) -> &UnsafeCell<T> {
        &self.v
    }
}

fn spin_or_yield(spins: &mut u32) {
    if *spins < SPINS_BEFORE_YIELD {
        *spins += 1;
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

impl<T: Send> Monitor<T> for Spin<T> {
    fn new(v: T) -> Self {
        Spin {
            locked: AtomicBool::new(false),
            v: UnsafeCell::new(v),
        }
    }
    #[inline]
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.locked(f)
    }
    fn wait_for<R>(&self, _cv: usize, mut ready: impl FnMut(&mut T) -> Option<R>) -> R {
        let mut spins = 0;
        loop {
            if let Some(r) = self.with(&mut ready) {
                return r;
            }
            spin_or_yield(&mut spins);
        }
    }
    fn wait_for_timeout<R>(
        &self,
        _cv: usize,
        timeout: Duration,
        mut ready: impl FnMut(&mut T) -> Option<R>,
    ) -> Option<R> {
        let deadline = Instant::now() + timeout;
        let mut spins = 0;
        loop {
            if let Some(r) = self.with(&mut ready) {
                return Some(r);
            }
            if Instant::now() >= deadline {
                return None;
            }
            spin_or_yield(&mut spins);
        }
    }
    fn notify_one(&self, _cv: usize) {}
    fn notify_all(&self, _cv: usize) {}
}
