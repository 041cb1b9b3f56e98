//! Where the processes of a pair or ring run: the `place` param.

use super::child::{fork_child, ChildGuard};
use super::fd::write_exact;
use anyhow::{ensure, Context, Result};
use kscale_core::{ParamDef, ParamKind};
use nix::unistd::Pid;
use std::os::fd::AsRawFd;

/// Where the processes of a pair or ring go (docs/families/syscall.md,
/// "Placement"). Unpinned, the scheduler puts a token-passing pair on one
/// CPU in some trials and on two in others, and the two costs differ up to
/// tenfold, so the trials mix two cases; pinned, every trial measures the
/// same one.
pub const PLACE_PARAM: ParamDef = ParamDef {
    name: "place",
    help: "Where the processes exchanging the token run. spread: process r of the pair or \
           ring (0 = the measuring worker, 1 = its first forked partner, …) is pinned to CPU \
           r mod n of the configuration's n CPUs, so on 2 CPUs every hop crosses CPUs; \
           same: every process pinned to the configuration's first CPU; os: no pinning \
           beyond the configuration, the scheduler's choice (lmbench does not pin, so this \
           reproduces it, with its run-to-run swings).",
    kind: ParamKind::Choice(PLACE_CHOICES),
    default: &["spread"],
    quick: &[],
};

const PLACE_CHOICES: &[&str] = &["spread", "same", "os"];

/// The sentence every pair or ring workload's help ends with, so that the
/// meaning of `place` is stated the same way everywhere.
macro_rules! place_help {
    () => {
        " `place` pins the processes: spread (default) one per CPU of the configuration in \
         turn, same all on its first CPU, os not at all (lmbench does not \
         pin; place=os reproduces it)."
    };
}
pub(crate) use place_help;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    Spread,
    Same,
    Os,
}

/// The `place` param of one trial applied to its CPU configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    pub place: Place,
    cpus: Vec<usize>,
}

impl Placement {
    /// Reads `place` (absent: spread, the default); an unknown value is an
    /// error naming it and the accepted ones.
    pub fn from_ctx(ctx: &crate::TrialCtx) -> Result<Placement> {
        Placement::new(&ctx.param(&PLACE_PARAM)?, &ctx.cpus)
    }

    pub fn new(value: &str, cpus: &[usize]) -> Result<Placement> {
        let place = match value {
            "spread" => Place::Spread,
            "same" => Place::Same,
            "os" => Place::Os,
            other => anyhow::bail!(
                "place={other}: unknown placement (accepted: {})",
                PLACE_CHOICES.join(", ")
            ),
        };
        ensure!(!cpus.is_empty(), "the CPU configuration is empty");
        Ok(Placement {
            place,
            cpus: cpus.to_vec(),
        })
    }

    /// The CPU process `rank` is pinned to (0 is the worker), or `None`
    /// for place=os.
    pub fn cpu(&self, rank: usize) -> Option<usize> {
        match self.place {
            Place::Spread => Some(self.cpus[rank % self.cpus.len()]),
            Place::Same => Some(self.cpus[0]),
            Place::Os => None,
        }
    }

    /// Pins the calling process to the CPU of `rank`; nothing for place=os.
    /// The worker calls it with rank 0 before forking, partners through
    /// [`Placement::fork`]. Nothing is restored: a worker lives one trial.
    pub fn pin(&self, rank: usize) -> Result<()> {
        match self.cpu(rank) {
            Some(cpu) => kscale_sys::affinity::pin_one(cpu)
                .with_context(|| format!("pinning process {rank} of the trial to CPU {cpu}")),
            None => Ok(()),
        }
    }

    /// [`fork_child`] for partner `rank`: the child pins itself before
    /// anything else and reports over a pipe, and this returns only then,
    /// so placement is fixed before the first exchange and a pinning
    /// failure is the parent's error, naming the CPU.
    pub fn fork(&self, rank: usize, f: impl FnOnce() -> i32) -> Result<Pid> {
        let (status_r, status_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .context("pipe for the partner's pinning status")?;
        let r_raw = status_r.as_raw_fd();
        let child = fork_child(move || {
            // SAFETY: the child's own copy of the read end, closed once.
            unsafe { libc::close(r_raw) };
            // One write of at most PIPE_BUF bytes arrives whole: a status
            // byte (0: pinned), then the error. The parent does not wait for
            // end of file, which any process forked meanwhile could delay.
            // Nothing is allocated unless pinning failed.
            if let Err(e) = self.pin(rank) {
                let mut report = vec![1u8];
                report.extend(format!("{e:#}").bytes().take(1000));
                let _ = write_exact(status_w.as_raw_fd(), &report);
                return PIN_FAILED;
            }
            if write_exact(status_w.as_raw_fd(), &[0]).is_err() {
                return PIN_FAILED;
            }
            drop(status_w);
            f()
        })?;
        let guard = ChildGuard(child);
        let mut buf = [0u8; 1024];
        let n = loop {
            match nix::unistd::read(&status_r, &mut buf) {
                Err(nix::errno::Errno::EINTR) => {}
                other => break other.context("reading the partner's pinning status")?,
            }
        };
        match buf[..n] {
            [0] => {
                // The note claims this placement: check the kernel holds it.
                if let Some(cpu) = self.cpu(rank) {
                    let set = nix::sched::sched_getaffinity(child)
                        .with_context(|| format!("affinity of process {rank} of the trial"))?;
                    let on: Vec<usize> = (0..nix::sched::CpuSet::count())
                        .filter(|&c| set.is_set(c).unwrap_or(false))
                        .collect();
                    ensure!(
                        on == [cpu],
                        "process {rank} of the trial is on CPUs {on:?} after pinning to CPU {cpu}"
                    );
                }
                std::mem::forget(guard);
                Ok(child)
            }
            [] => anyhow::bail!("process {rank} of the trial died before pinning itself"),
            _ => anyhow::bail!("{}", String::from_utf8_lossy(&buf[1..n])),
        }
    }

    /// What a trial's note says, e.g. `placement: spread (worker on CPU 0,
    /// partner on CPU 1)`; `procs` counts the worker, `partner` names the
    /// other process of a pair ("partner", "server").
    pub fn note(&self, procs: usize, partner: &str) -> String {
        let name = match self.place {
            Place::Spread => "spread",
            Place::Same => "same",
            Place::Os => "os",
        };
        let list = |cpus: &mut dyn Iterator<Item = usize>| {
            cpus.map(|c| c.to_string()).collect::<Vec<_>>().join(", ")
        };
        let detail = match (self.cpu(0), procs) {
            (None, _) => format!(
                "not pinned: the scheduler places the {procs} processes on CPUs {}",
                list(&mut self.cpus.iter().copied())
            ),
            (Some(w), 2) => format!(
                "worker on CPU {w}, {partner} on CPU {}",
                self.cpu(1).unwrap_or(w)
            ),
            (Some(w), _) if self.place == Place::Same => {
                format!("all {procs} processes on CPU {w}")
            }
            (Some(w), _) => {
                let shown = (procs - 1).min(4);
                let more = if procs - 1 > shown { ", …" } else { "" };
                format!(
                    "worker on CPU {w}, the {} others in ring order on CPUs {}{more}",
                    procs - 1,
                    list(&mut (1..=shown).filter_map(|r| self.cpu(r)))
                )
            }
        };
        format!("placement: {name} ({detail})")
    }
}

/// Exit status of a partner that could not pin itself.
const PIN_FAILED: i32 = 3;

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::shared::fd::read_exact;
    use kscale_sys::affinity::available_cpus;

    #[test]
    fn ranks_map_to_cpus() {
        let spread = Placement::new("spread", &[3, 5]).unwrap();
        let ranks: Vec<_> = (0..4).map(|r| spread.cpu(r)).collect();
        assert_eq!(ranks, [Some(3), Some(5), Some(3), Some(5)]);
        let same = Placement::new("same", &[3, 5]).unwrap();
        assert!((0..4).all(|r| same.cpu(r) == Some(3)));
        let os = Placement::new("os", &[3, 5]).unwrap();
        assert!((0..4).all(|r| os.cpu(r).is_none()));
        // One CPU: spread is same.
        let one = Placement::new("spread", &[2]).unwrap();
        assert!((0..4).all(|r| one.cpu(r) == Some(2)));
    }

    #[test]
    fn an_unknown_place_is_refused_by_name() {
        let e = Placement::new("foo", &[0]).unwrap_err().to_string();
        assert_eq!(
            e,
            "place=foo: unknown placement (accepted: spread, same, os)"
        );
        assert!(!e.contains('\n'));
        // The param machinery accepts exactly the same words.
        for v in PLACE_CHOICES {
            PLACE_PARAM.validate("syscall.pipe", v).unwrap();
            Placement::new(v, &[0]).unwrap();
        }
        let e = PLACE_PARAM.validate("syscall.pipe", "foo").unwrap_err();
        assert!(e.to_string().contains("foo"), "{e}");
    }

    #[test]
    fn notes_say_where_each_process_runs() {
        let p = |v| Placement::new(v, &[0, 1]).unwrap();
        assert_eq!(
            p("spread").note(2, "partner"),
            "placement: spread (worker on CPU 0, partner on CPU 1)"
        );
        assert_eq!(
            p("same").note(2, "server"),
            "placement: same (worker on CPU 0, server on CPU 0)"
        );
        assert_eq!(
            p("same").note(8, "partner"),
            "placement: same (all 8 processes on CPU 0)"
        );
        assert_eq!(
            p("spread").note(3, "partner"),
            "placement: spread (worker on CPU 0, the 2 others in ring order on CPUs 1, 0)"
        );
        assert_eq!(
            p("spread").note(96, "partner"),
            "placement: spread (worker on CPU 0, the 95 others in ring order on CPUs 1, 0, \
             1, 0, …)"
        );
        assert_eq!(
            p("os").note(2, "partner"),
            "placement: os (not pinned: the scheduler places the 2 processes on CPUs 0, 1)"
        );
    }

    /// The CPUs the calling thread may run on.
    fn my_cpus() -> Vec<usize> {
        available_cpus().unwrap()
    }

    /// Applies `place` as a pair does (worker rank 0, partner rank 1) in a
    /// scratch thread, so the test thread keeps its mask, and returns the
    /// worker's and the partner's affinity as the partner itself reads it.
    fn pair_masks(place: &str, cpus: &[usize]) -> (Vec<usize>, Vec<usize>) {
        let (place, cpus) = (place.to_string(), cpus.to_vec());
        std::thread::spawn(move || {
            let p = Placement::new(&place, &cpus).unwrap();
            p.pin(0).unwrap();
            let worker = my_cpus();
            let (r, w) = nix::unistd::pipe().unwrap();
            let wfd = w.as_raw_fd();
            let child = p
                .fork(1, move || {
                    // Only system calls on stack memory in the forked child.
                    // SAFETY: an all-zero cpu_set_t is valid; the buffer is ours.
                    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
                    let size = std::mem::size_of::<libc::cpu_set_t>();
                    // SAFETY: set is a writable cpu_set_t of `size` bytes.
                    if unsafe { libc::sched_getaffinity(0, size, &mut set) } != 0 {
                        return 1;
                    }
                    // SAFETY: set is a valid, initialised cpu_set_t.
                    let bytes = unsafe {
                        std::slice::from_raw_parts(std::ptr::addr_of!(set).cast::<u8>(), size)
                    };
                    i32::from(write_exact(wfd, bytes).is_err())
                })
                .unwrap();
            drop(w);
            let mut buf = vec![0u8; std::mem::size_of::<libc::cpu_set_t>()];
            read_exact(r.as_raw_fd(), &mut buf).unwrap();
            let status = nix::sys::wait::waitpid(child, None).unwrap();
            assert_eq!(status, nix::sys::wait::WaitStatus::Exited(child, 0));
            let partner = (0..buf.len() * 8)
                .filter(|&c| buf[c / 8] & (1 << (c % 8)) != 0)
                .collect();
            (worker, partner)
        })
        .join()
        .unwrap()
    }

    /// Two CPUs of this machine, or `None` with the reason printed.
    pub(crate) fn two_cpus() -> Option<Vec<usize>> {
        let all = my_cpus();
        if all.len() < 2 {
            println!("SKIP: placement needs 2 CPUs, this process may use {all:?}");
            return None;
        }
        Some(all[..2].to_vec())
    }

    #[test]
    fn spread_puts_the_partner_on_the_second_cpu() {
        let Some(cpus) = two_cpus() else { return };
        let (worker, partner) = pair_masks("spread", &cpus);
        assert_eq!(worker, [cpus[0]]);
        assert_eq!(partner, [cpus[1]]);
    }

    #[test]
    fn same_puts_both_on_the_first_cpu() {
        let Some(cpus) = two_cpus() else { return };
        let (worker, partner) = pair_masks("same", &cpus);
        assert_eq!(worker, [cpus[0]]);
        assert_eq!(partner, [cpus[0]]);
    }

    #[test]
    fn os_pins_nothing() {
        let before = my_cpus();
        let (worker, partner) = pair_masks("os", &before);
        assert_eq!(worker, before);
        assert_eq!(partner, before);
    }

    #[test]
    fn a_cpu_that_cannot_be_had_is_an_error_naming_it() {
        // The last CPU a mask can name: no machine this runs on has it.
        let cpu = nix::sched::CpuSet::count() - 1;
        if kscale_sys::affinity::online_cpus() > cpu {
            println!("SKIP: CPU {cpu} exists here");
            return;
        }
        let p = Placement::new("spread", &[my_cpus()[0], cpu]).unwrap();
        let e = std::thread::spawn(move || {
            p.pin(0).unwrap();
            format!("{:#}", p.fork(1, || 0).unwrap_err())
        })
        .join()
        .unwrap();
        assert!(e.contains(&format!("CPU {cpu}")), "{e}");
        assert!(e.contains("process 1"), "{e}");
    }
}
