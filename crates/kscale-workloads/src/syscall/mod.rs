//! `syscall`: latency of simple functions (docs/families/syscall.md, seed 003, lmbench
//! `lat_syscall`/`lat_sig`/`lat_pipe`/`lat_unix`/`lat_proc`).
//!
//! Every loop calls the C library or the kernel directly through `libc`, the
//! way lmbench's C loops do, so that the figures can be compared with
//! lmbench's on the same machine: std's wrappers add flags (`O_CLOEXEC`) and
//! checks that lmbench does not pay for.
//!
//! This file holds the definitions; `calls.rs` the simple calls and file
//! operations, `signal.rs` the signal workloads, `pair.rs` the token
//! passed between two processes, `proc.rs` process creation.

mod calls;
mod pair;
mod proc;
mod signal;

use crate::shared::place::{place_help, PLACE_PARAM};
use crate::{Clock, Family, TrialOutput, WorkloadDef};
use calls::{fstat, null, open_close, read, stat, write};
use kscale_core::{MetricDef, ParamDef, ParamKind};
use pair::{pipe, unix};
use proc::{fork_exec, fork_exit, fork_sh};
use signal::{prot_fault, sig_catch, sig_install};
use std::time::Duration;

pub(super) const LAT: MetricDef = MetricDef::lower("latency", "µs");
const LAT_METRICS: &[MetricDef] = &[LAT];
/// What `prot_fault` subtracts from, and what it subtracts: kept so that a
/// reference which takes its two terms at different moments (lat_sig prot
/// measures its catch cost in an earlier phase) can be compared on the sum,
/// which the machine's drift does not amplify (docs/families/syscall.md).
pub(super) const FAULT_SIGNAL: MetricDef = MetricDef::lower("fault_signal", "µs");
pub(super) const HANDLER: MetricDef = MetricDef::lower("handler", "µs");

/// What every syscall workload shares: latency, and no params unless it says.
const SYSCALL: WorkloadDef = WorkloadDef {
    metrics: LAT_METRICS,
    timeout: Duration::from_secs(60),
    ..WorkloadDef::family("syscall")
};

/// The calls answered on the calling thread, timed by its CPU clock
/// (docs/host.md, "The thread's own clock"); pipes, sockets, processes
/// and the signal pairs whose two loops are subtracted stay on the wall.
const ON_CPU: WorkloadDef = WorkloadDef {
    clock: Clock::Thread,
    ..SYSCALL
};

pub static FAMILY: Family = Family {
    name: "syscall",
    title: "Latency of simple functions",
    help:
        "Time per operation of simple system calls, signals, pipes and process creation (lmbench).",
    workloads: &[
        ON_CPU.named(
            "null",
            "Simple syscall",
            "getppid(), a system call that does no work (lmbench lat_syscall null).",
            null,
        ),
        ON_CPU.named(
            "read",
            "Simple read",
            "read() of 1 byte from /dev/zero (lmbench lat_syscall read).",
            read,
        ),
        ON_CPU.named(
            "write",
            "Simple write",
            "write() of 1 byte to /dev/null (lmbench lat_syscall write).",
            write,
        ),
        WorkloadDef {
            params: FILE_PARAMS,
            ..ON_CPU.named(
                "stat",
                "Simple stat",
                "stat() of a small file in the run's scratch directory (lmbench lat_syscall stat). The \
                 path walk is part of the cost, so `file=PATH` stats a given file instead, e.g. \
                 the one lat_syscall is given.",
                stat,
            )
        },
        ON_CPU.named(
            "fstat",
            "Simple fstat",
            "fstat() of an open small file (lmbench lat_syscall fstat).",
            fstat,
        ),
        WorkloadDef {
            params: FILE_PARAMS,
            ..ON_CPU.named(
                "open_close",
                "Simple open/close",
                "open() + close() of a small file in the scratch directory (lmbench lat_syscall open); \
                 `file=PATH` opens a given file read-only instead.",
                open_close,
            )
        },
        ON_CPU.named(
            "sig_install",
            "Signal handler installation",
            "sigaction(SIGUSR1) installing a handler (lmbench lat_sig install).",
            sig_install,
        ),
        SYSCALL.named(
            "sig_catch",
            "Signal handler overhead",
            "kill(self, SIGUSR1) caught by an empty handler, minus the cost of kill(self, 0) \
             measured in the same trial (lmbench lat_sig catch).",
            sig_catch,
        ),
        WorkloadDef {
            metrics: &[LAT, FAULT_SIGNAL, HANDLER],
            params: PROT_PARAMS,
            ..SYSCALL.named(
                "prot_fault",
                "Protection fault",
                "A write to a read-only MAP_SHARED file page, caught by a SIGSEGV handler, minus the \
                 signal handler overhead measured in the same trial (lmbench lat_sig prot). \
                 `fault_signal` is the fault with its signal, nothing subtracted; `handler` is what \
                 is subtracted (kill(self, SIGUSR1) less kill(self, 0)).",
                prot_fault,
            )
        },
        WorkloadDef {
            params: PLACE_PARAMS,
            ..SYSCALL.named(
                "pipe",
                "Pipe latency",
                concat!(
                    "1-byte round trip between two processes over two pipes (lmbench \
                     lat_pipe; perf bench sched pipe).",
                    place_help!()
                ),
                pipe,
            )
        },
        WorkloadDef {
            params: PLACE_PARAMS,
            ..SYSCALL.named(
                "unix",
                "AF_UNIX sock stream latency",
                concat!(
                    "1-byte round trip between two processes over an AF_UNIX stream \
                     socketpair (lmbench lat_unix).",
                    place_help!()
                ),
                unix,
            )
        },
        WorkloadDef {
            params: EXIT_PARAMS,
            ..SYSCALL.named(
                "fork_exit",
                "Process fork+exit",
                "fork(); the child exits at once; the parent waits for it (lmbench lat_proc fork; \
                 perf bench syscall fork). The child leaves with _exit() by default; `exit=exit` \
                 leaves through the C library's exit() as lat_proc's child does, which runs the \
                 atexit handlers and destructors first.",
                fork_exit,
            )
        },
        WorkloadDef {
            params: HELPER_PARAMS,
            ..SYSCALL.named(
                "fork_exec",
                "Process fork+execve",
                "fork() + execve() of a tiny program, then wait (lmbench lat_proc exec). \
                 The program is statically linked by default, so the figure is the kernel's \
                 fork and exec; lat_proc execs a dynamically linked /tmp/hello, whose \
                 loader work (mapping libc, relocations) `helper=dynamic` adds.",
                fork_exec,
            )
        },
        WorkloadDef {
            params: HELPER_PARAMS,
            ..SYSCALL.named(
                "fork_sh",
                "Process fork+/bin/sh -c",
                "fork() + /bin/sh -c running the tiny program, then wait (lmbench lat_proc \
                 shell; `helper=dynamic` as lat_proc).",
                fork_sh,
            )
        },
    ],
};

/// Which build of the tiny program fork_exec and fork_sh run (docs/families/syscall.md).
const HELPER_PARAMS: &[ParamDef] = &[ParamDef {
    name: "helper",
    help: "static: the program linked statically (kernel work only); dynamic: linked \
           against the C library as lmbench's /tmp/hello, adding the dynamic loader.",
    kind: ParamKind::Choice(&["static", "dynamic"]),
    default: &["static"],
    quick: &[],
}];

/// How fork_exit's child leaves (docs/families/syscall.md).
const EXIT_PARAMS: &[ParamDef] = &[ParamDef {
    name: "exit",
    help: "_exit: the child calls _exit(), straight to the kernel; exit: the C library's exit(), \
           as lmbench's lat_proc child, running atexit handlers, shared-object destructors and \
           the stdio flush first (each first write to a page shared with the parent is a \
           copy-on-write fault).",
    kind: ParamKind::Choice(&["_exit", "exit"]),
    default: &["_exit"],
    quick: &[],
}];

/// How prot_fault's SIGSEGV handler is installed (docs/families/syscall.md).
pub(super) const PROT_PARAMS: &[ParamDef] = &[ParamDef {
    name: "handler",
    help: "siginfo: an SA_SIGINFO handler that checks the fault's address, as a program that \
           catches its own faults must; plain: a one-argument handler that only counts, as \
           lmbench's lat_sig prot installs it (the kernel then copies no siginfo into the \
           signal frame).",
    kind: ParamKind::Choice(&["siginfo", "plain"]),
    default: &["siginfo"],
    quick: &[],
}];

/// Where pipe's and unix's two processes run (docs/families/syscall.md).
const PLACE_PARAMS: &[ParamDef] = &[PLACE_PARAM];

/// The file stat and open_close work on (docs/families/syscall.md).
const FILE_PARAMS: &[ParamDef] = &[ParamDef {
    name: "file",
    help: "scratch: a 1 KiB file made in the run's scratch directory; or the absolute path \
           of an existing file, only read (as lat_syscall's file argument).",
    kind: ParamKind::Str,
    default: &["scratch"],
    quick: &[],
}];

/// The result of a loop whose `per_op` is in seconds.
pub(super) fn latency(per_op: f64, n: u64) -> TrialOutput {
    TrialOutput::new(n).with(&LAT, per_op * 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared::child::fork_child;
    use crate::shared::exec::{HELLO, HELLO_DYN, HELLO_LINKAGE};
    use crate::shared::place::Placement;
    use crate::TrialCtx;
    use nix::sys::wait::{waitpid, WaitStatus};
    use std::path::Path;

    fn ctx(dir: &Path, trial: Duration, params: &[(&str, &str)]) -> TrialCtx {
        let mut c = crate::test_ctx(params, 0).in_dir(dir);
        c.trial_time = trial;
        c
    }

    /// Runs one workload the way production does: in a single-threaded
    /// child process. The test harness has several threads, and a signal sent
    /// to the process may be handled by another one (or arrive after the
    /// handler is gone), which would measure and break the wrong thing.
    /// Returns (latency, iterations, notes).
    fn run_in_child(name: &str, trial: Duration, params: &[(&str, &str)]) -> (f64, u64, String) {
        run_in_child_on(name, trial, params, &[0])
    }

    /// [`run_in_child`] on the CPU configuration `cpus`.
    fn run_in_child_on(
        name: &str,
        trial: Duration,
        params: &[(&str, &str)],
        cpus: &[usize],
    ) -> (f64, u64, String) {
        let w = FAMILY
            .workloads
            .iter()
            .find(|w| w.name == name)
            .unwrap_or_else(|| panic!("no workload {name}"));
        let root = tempfile::tempdir().unwrap();
        let work = root.path().join("work");
        std::fs::create_dir(&work).unwrap();
        let result = root.path().join("result");
        let mut c = ctx(&work, trial, params);
        c.cpus = cpus.to_vec();
        let pid = fork_child(|| match (w.run)(&c) {
            Ok(out) => {
                // The other metrics' values go with the notes, as `name=value`.
                let others = out
                    .values
                    .iter()
                    .filter(|(k, _)| k.as_str() != "latency")
                    .map(|(k, v)| format!("{k}={v}"));
                let notes: Vec<String> = out.notes.iter().cloned().chain(others).collect();
                let line = format!(
                    "{} {} {}",
                    out.values["latency"],
                    out.iterations,
                    notes.join("; ")
                );
                i32::from(std::fs::write(&result, line).is_err())
            }
            Err(e) => {
                let _ = std::fs::write(&result, format!("{e:#}"));
                2
            }
        })
        .unwrap();
        let status = waitpid(pid, None).unwrap();
        let text = std::fs::read_to_string(&result).unwrap_or_default();
        assert_eq!(status, WaitStatus::Exited(pid, 0), "{name}: {text}");
        // Every file the workload made is gone.
        assert_eq!(
            std::fs::read_dir(&work).unwrap().count(),
            0,
            "{name} left files"
        );
        let mut parts = text.splitn(3, ' ');
        let v: f64 = parts.next().unwrap().parse().unwrap();
        let n: u64 = parts.next().unwrap().parse().unwrap();
        (v, n, parts.next().unwrap_or("").to_string())
    }

    fn run_one(name: &str) {
        let (v, n, _) = run_in_child(name, Duration::from_millis(20), &[]);
        assert!(v.is_finite() && v > 0.0, "{name}: {v}");
        assert!(n > 0);
    }

    #[test]
    fn all_fourteen_workloads() {
        let names: Vec<_> = FAMILY.workloads.iter().map(|w| w.name).collect();
        assert_eq!(
            names,
            [
                "null",
                "read",
                "write",
                "stat",
                "fstat",
                "open_close",
                "sig_install",
                "sig_catch",
                "prot_fault",
                "pipe",
                "unix",
                "fork_exit",
                "fork_exec",
                "fork_sh"
            ]
        );
    }

    #[test]
    fn null() {
        run_one("null");
    }
    #[test]
    fn read() {
        run_one("read");
    }
    #[test]
    fn write() {
        run_one("write");
    }
    #[test]
    fn stat() {
        run_one("stat");
    }
    #[test]
    fn fstat() {
        run_one("fstat");
    }
    #[test]
    fn open_close() {
        run_one("open_close");
    }
    #[test]
    fn sig_install() {
        run_one("sig_install");
    }
    #[test]
    fn sig_catch() {
        run_one("sig_catch");
    }
    /// helper=dynamic runs a program with an ELF interpreter (the dynamic
    /// loader), helper=static one without, and both run.
    #[test]
    fn fork_exec_helpers_differ_in_linkage() {
        // An ELF64 program header of type PT_INTERP (3) names a loader.
        let interp = |b: &[u8]| {
            let u = |at: usize, len: usize| {
                b[at..at + len]
                    .iter()
                    .rev()
                    .fold(0usize, |a, &x| a << 8 | usize::from(x))
            };
            let (off, size, num) = (u(32, 8), u(54, 2), u(56, 2));
            (0..num).any(|i| u(off + i * size, 4) == 3)
        };
        assert!(interp(HELLO_DYN), "the dynamic helper names no loader");
        if HELLO_LINKAGE == "static" {
            assert!(!interp(HELLO), "the static helper names a loader");
        }
        for helper in ["static", "dynamic"] {
            let (v, n, _) = run_in_child(
                "fork_exec",
                Duration::from_millis(20),
                &[("helper", helper)],
            );
            assert!(v.is_finite() && v > 0.0 && n > 0, "{helper}: {v}");
        }
    }

    #[test]
    fn stat_and_open_take_a_given_file_and_refuse_a_missing_one() {
        let dir = tempfile::tempdir().unwrap();
        let given = dir.path().join("given");
        std::fs::write(&given, b"x").unwrap();
        let given = given.to_str().unwrap();
        for name in ["stat", "open_close"] {
            let (v, _, _) = run_in_child(name, Duration::from_millis(20), &[("file", given)]);
            assert!(v > 0.0, "{name}: {v}");
            let w = FAMILY.workloads.iter().find(|w| w.name == name).unwrap();
            let missing = dir.path().join("missing");
            let c = ctx(
                dir.path(),
                Duration::from_millis(5),
                &[("file", missing.to_str().unwrap())],
            );
            let e = (w.run)(&c).unwrap_err().to_string();
            assert!(e.contains("not an existing regular file"), "{e}");
        }
        assert!(
            std::path::Path::new(given).exists(),
            "a given file is only read"
        );
    }

    /// With either handler (the SA_SIGINFO one that checks the address,
    /// or lat_sig's plain one that only counts) every fault is caught and
    /// counted (the workload fails otherwise) and the process survives.
    #[test]
    fn prot_fault() {
        // The figure is the fault's median less the signal overhead's; on a
        // loaded machine the difference can reach the floor at 0, so the
        // test checks the measured fault itself and that the figure is the
        // difference, not only that it is positive.
        for handler in ["siginfo", "plain"] {
            let (v, n, notes) = run_in_child(
                "prot_fault",
                Duration::from_millis(100),
                &[("handler", handler)],
            );
            let num = |label: &str| -> f64 {
                let rest =
                    &notes[notes.find(label).unwrap_or_else(|| panic!("{notes}")) + label.len()..];
                let end = rest.find(';').unwrap_or(rest.len());
                rest[..end].trim().parse().unwrap()
            };
            let (fault, sig) = (num("fault_signal="), num("handler="));
            assert!(
                fault > 0.0 && sig.is_finite() && n > 0,
                "{handler}: {notes}"
            );
            assert!(
                (v - (fault - sig).max(0.0)).abs() < 1e-3,
                "{handler}: {v} vs {notes}"
            );
        }
    }
    #[test]
    fn pipe() {
        run_one("pipe");
    }
    #[test]
    fn unix() {
        run_one("unix");
    }
    #[test]
    fn fork_exit() {
        run_one("fork_exit");
    }

    /// On two CPUs each `place` puts the pair where its note says; the
    /// partner's mask is checked by `Placement::fork` before the note is
    /// written, so a note is only there if the kernel holds the placement.
    #[test]
    fn pipe_and_unix_place_their_pair() {
        let Some(cpus) = crate::shared::place::tests::two_cpus() else {
            return;
        };
        for name in ["pipe", "unix"] {
            for place in ["spread", "same", "os"] {
                let (v, _, notes) =
                    run_in_child_on(name, Duration::from_millis(20), &[("place", place)], &cpus);
                assert!(v > 0.0, "{name} {place}: {v}");
                let want = Placement::new(place, &cpus).unwrap().note(2, "partner");
                assert_eq!(notes, want, "{name} {place}");
            }
        }
        let (.., notes) = run_in_child_on("pipe", Duration::from_millis(20), &[], &cpus);
        assert_eq!(
            notes,
            format!(
                "placement: spread (worker on CPU {}, partner on CPU {})",
                cpus[0], cpus[1]
            ),
            "spread is the default"
        );
    }
    #[test]
    fn fork_exec() {
        run_one("fork_exec");
    }
    #[test]
    fn fork_sh() {
        run_one("fork_sh");
    }

    /// `exit=exit` leaves each child through the C library's exit(), which
    /// runs the atexit handlers the forking process registered; `_exit`
    /// (the default) runs none. Counted by a handler that appends one byte
    /// to a file per run, registered in a single-threaded child that then
    /// runs the workload for a fixed number of forks.
    #[test]
    fn fork_exit_child_leaves_by_exit_or_exit_underscore() {
        use std::sync::atomic::{AtomicI32, Ordering};
        static MARK_FD: AtomicI32 = AtomicI32::new(-1);
        extern "C" fn mark() {
            let fd = MARK_FD.load(Ordering::SeqCst);
            // SAFETY: one byte from a static to an fd opened before the forks.
            unsafe { libc::write(fd, b"x".as_ptr().cast(), 1) };
        }
        for (value, want) in [("_exit", 0), ("exit", 5), ("", 0)] {
            let dir = tempfile::tempdir().unwrap();
            let marks = dir.path().join("marks");
            let marks_c = std::ffi::CString::new(marks.to_str().unwrap()).unwrap();
            let params: Vec<(&str, &str)> = if value.is_empty() {
                vec![]
            } else {
                vec![("exit", value)]
            };
            let mut c = ctx(dir.path(), Duration::from_millis(5), &params);
            c.iterations = Some(5);
            let pid = fork_child(|| {
                // SAFETY: a path prepared before the fork; this child is
                // single-threaded.
                let fd = unsafe {
                    libc::open(
                        marks_c.as_ptr(),
                        libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND,
                        0o600 as libc::c_uint,
                    )
                };
                if fd < 0 {
                    return 3;
                }
                MARK_FD.store(fd, Ordering::SeqCst);
                // SAFETY: registers a handler that only writes to that fd.
                if unsafe { libc::atexit(mark) } != 0 {
                    return 4;
                }
                match super::fork_exit(&c) {
                    Ok(out) if out.iterations == 5 => 0,
                    Ok(_) => 5,
                    Err(_) => 6,
                }
            })
            .unwrap();
            let status = waitpid(pid, None).unwrap();
            assert_eq!(status, WaitStatus::Exited(pid, 0), "exit={value}");
            let n = std::fs::read(&marks).map(|b| b.len()).unwrap_or(0);
            assert_eq!(n, want, "exit={value}: atexit handler runs");
        }
        let dir = tempfile::tempdir().unwrap();
        let c = ctx(dir.path(), Duration::from_millis(5), &[("exit", "quit")]);
        let e = super::fork_exit(&c).unwrap_err().to_string();
        assert!(
            e.contains("`quit`") && e.contains("one of _exit, exit"),
            "{e}"
        );
    }

    #[test]
    fn fork_exit_with_exit_runs() {
        let (v, n, _) = run_in_child("fork_exit", Duration::from_millis(20), &[("exit", "exit")]);
        assert!(v.is_finite() && v > 0.0 && n > 0, "{v}");
    }

    #[test]
    fn fixed_iterations_are_honoured() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = ctx(dir.path(), Duration::from_millis(20), &[]);
        c.iterations = Some(7);
        let out = super::fork_exit(&c).unwrap();
        assert_eq!(out.iterations, 7);
    }

    /// Figures to set beside the reference tools', 0.5 s trials:
    /// `taskset -c 0 cargo test -p kscale-workloads --release syscall::tests::measure -- --ignored --nocapture`
    /// (`KSCALE_ONLY=pipe,unix` picks workloads).
    #[test]
    #[ignore]
    fn measure() {
        let only = std::env::var("KSCALE_ONLY").ok();
        for w in FAMILY.workloads {
            if only
                .as_deref()
                .is_some_and(|o| !o.split(',').any(|x| x == w.name))
            {
                continue;
            }
            let (v, n, notes) = run_in_child(w.name, Duration::from_millis(500), &[]);
            println!("{:<12} {:>12.4} µs  n={:<10} {}", w.name, v, n, notes);
        }
    }
}
