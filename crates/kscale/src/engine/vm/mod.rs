//! Kernels booted in QEMU (docs/vm.md): a kernel image is measured
//! without installing it. kscale writes an initramfs holding itself, boots
//! each kernel with it as init, runs the asked `run` or `study` inside on
//! a store in the guest's memory, and reads the runs' exports back from a
//! second serial port. The boots interleave kernel by kernel (A B A B …)
//! so that the runs of one kernel spread over the host's moments as the
//! others' do, and a comparison sees the spread between boots.
//!
//! - `qemu`: one boot, its deadlines, its console, its end however kscale
//!   ends; `image`: the initramfs; `guest`: the wire between init and host.

pub mod guest;
pub mod image;
pub mod qemu;

use crate::error::{user, Stopped};
use anyhow::{Context, Result};
use qemu::{Accel, BootSpec, Ended};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The vCPUs of one kind of boot: `-smp N`, or one CPU with the kernel
/// told to stay uniprocessor (`nosmp`), seed 003's UP kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vcpus {
    Smp(usize),
    Up,
}

impl Vcpus {
    /// `1cpu`, `4cpu`, `up`: the part of a label that tells boots apart.
    pub fn name(self) -> String {
        match self {
            Vcpus::Smp(n) => format!("{n}cpu"),
            Vcpus::Up => "up".into(),
        }
    }

    pub fn count(self) -> usize {
        match self {
            Vcpus::Smp(n) => n,
            Vcpus::Up => 1,
        }
    }
}

/// `--cpus 1,all` as vCPU counts: `all` is this machine's online CPUs.
pub fn parse_vcpus(list: &[String], online: usize) -> Result<Vec<Vcpus>> {
    let mut out = Vec::new();
    for word in list.iter().flat_map(|l| l.split(',')).map(str::trim) {
        let n = match word {
            "all" => online,
            w => match w.parse::<usize>() {
                Ok(n) if (1..=256).contains(&n) => n,
                _ => {
                    return Err(user(format!(
                        "bad --cpus `{word}`: expected vCPU counts from 1 to 256 or `all`, comma-separated (e.g. 1,all)"
                    )))
                }
            },
        };
        if !out.contains(&Vcpus::Smp(n)) {
            out.push(Vcpus::Smp(n));
        }
    }
    Ok(out)
}

/// One boot of the plan: which kernel, with which vCPUs, in which round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Boot {
    pub kernel: usize,
    pub vcpus: Vcpus,
    pub round: u32,
}

/// The boots in the order they run: round by round, each round every
/// kernel once with every vCPU kind (A B A B …, not A A B B), so that a
/// drift of the host over the run lands on every kernel alike.
pub fn schedule(kernels: usize, vcpus: &[Vcpus], rounds: u32) -> Vec<Boot> {
    let mut out = Vec::new();
    for round in 0..rounds {
        for kernel in 0..kernels {
            for &v in vcpus {
                out.push(Boot {
                    kernel,
                    vcpus: v,
                    round,
                });
            }
        }
    }
    out
}

/// `--accel`: KVM where a boot proves it works, else emulation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AccelChoice {
    Auto,
    Kvm,
    Tcg,
}

/// What a `kscale vm` measures, checked.
pub struct Plan {
    pub kernels: Vec<PathBuf>,
    pub vcpus: Vec<Vcpus>,
    pub rounds: u32,
    pub accel: AccelChoice,
    pub memory_mb: Option<u32>,
    /// What the guest's kscale runs: `run …` or `study …`.
    pub guest_args: Vec<String>,
    /// The most a boot may take, from QEMU's start to its end.
    pub timeout: Duration,
}

/// One boot's end: the runs it brought back, marked as measured in a VM.
pub struct BootResult {
    pub boot: Boot,
    pub accel: Accel,
    pub runs: Vec<Value>,
    /// The guest kscale's exit status.
    pub status: i32,
    pub seconds: f64,
}

/// A kernel image that is a file, said as bad input otherwise.
pub fn check_kernel(p: &Path) -> Result<()> {
    let meta =
        std::fs::metadata(p).map_err(|e| user(format!("bad --kernel {}: {e}", p.display())))?;
    if !meta.is_file() {
        return Err(user(format!(
            "bad --kernel {}: not a file (give a bzImage or vmlinuz, e.g. arch/x86/boot/bzImage)",
            p.display()
        )));
    }
    if !image::looks_like_bzimage(p) {
        return Err(user(format!(
            "bad --kernel {}: not an x86 kernel image (no \"HdrS\" boot header; give arch/x86/boot/bzImage or /boot/vmlinuz-…, not vmlinux)",
            p.display()
        )));
    }
    Ok(())
}

/// A KVM boot of this process did not reach init: later `auto` plans
/// boot emulated at once.
static KVM_FAILED: AtomicBool = AtomicBool::new(false);

/// Boots the plan and hands each boot's result to `take` as it ends, so a
/// run stopped midway keeps the boots done. The first boot under `auto`
/// tries KVM; a KVM boot that does not reach init within its deadline
/// ends the trying, said in one line, and the boots go on emulated.
pub fn run(plan: &Plan, mut take: impl FnMut(BootResult) -> Result<()>) -> Result<()> {
    crate::signals::install();
    let qemu = qemu::find()?;
    let scratch = image::Scratch::new()?;
    let initrd = scratch.initramfs(&guest::Config::new(&plan.guest_args))?;
    let memory_mb = plan.memory_mb.unwrap_or_else(|| image::memory_for(&initrd));
    let mut accel = match plan.accel {
        AccelChoice::Tcg => Accel::Tcg,
        // KVM failed this process's boots already (a check's later runs).
        AccelChoice::Auto if KVM_FAILED.load(Ordering::Relaxed) => Accel::Tcg,
        AccelChoice::Kvm | AccelChoice::Auto => match qemu::kvm_usable() {
            Ok(()) => Accel::Kvm,
            Err(why) if plan.accel == AccelChoice::Auto => {
                eprintln!("kscale vm: {why}; booting emulated (TCG): the figures are not the kernels' speed");
                Accel::Tcg
            }
            Err(why) => return Err(user(format!("--accel kvm: {why}"))),
        },
    };
    let boots = schedule(plan.kernels.len(), &plan.vcpus, plan.rounds);
    let mut guardian = scratch.guardian()?;
    let mut i = 0;
    while i < boots.len() {
        let b = &boots[i];
        let kernel = &plan.kernels[b.kernel];
        let name = format!(
            "boot {}/{} {} {}",
            i + 1,
            boots.len(),
            letter(b.kernel),
            b.vcpus.name()
        );
        let results = scratch.path().join(format!("results-{i}"));
        let spec = BootSpec {
            qemu: &qemu,
            kernel,
            initrd: &initrd,
            results: &results,
            accel,
            vcpus: b.vcpus,
            memory_mb,
            init_deadline: accel.init_deadline(),
            timeout: plan.timeout,
            name: &name,
        };
        let started = Instant::now();
        eprintln!(
            "kscale vm: {name}: {} on {} vCPU{} ({}, {memory_mb} MB)",
            kernel.display(),
            b.vcpus.count(),
            if b.vcpus == Vcpus::Up { ", nosmp" } else { "" },
            accel.words()
        );
        match qemu::boot(&spec, &mut guardian)? {
            Ended::Done => {}
            Ended::Interrupted(sig) => return Err(Stopped(sig).into()),
            Ended::NoInit(why) if accel == Accel::Kvm && plan.accel == AccelChoice::Auto => {
                eprintln!(
                    "kscale vm: KVM: {why}; booting emulated (TCG) instead: the figures are not the kernels' speed"
                );
                accel = Accel::Tcg;
                KVM_FAILED.store(true, Ordering::Relaxed);
                continue;
            }
            Ended::NoInit(why) => {
                anyhow::bail!("{name}: {} did not reach init: {why}", kernel.display())
            }
            Ended::Failed(why) => anyhow::bail!("{name}: {why}"),
        }
        let (runs, status) = guest::read_results(&results)
            .with_context(|| format!("{name}: reading the guest's results"))?;
        let mark = Mark {
            accel,
            vcpus: b.vcpus,
            image: kernel,
            memory_mb,
            round: b.round,
            qemu: &qemu,
        };
        let runs = runs.into_iter().map(|r| mark.on(r)).collect();
        take(BootResult {
            boot: b.clone(),
            accel,
            runs,
            status,
            seconds: started.elapsed().as_secs_f64(),
        })?;
        i += 1;
    }
    drop(guardian);
    Ok(())
}

/// Boots `kernel` once under `accel` with an init that powers off at
/// once: the seconds it took to reach init, or why it did not. What
/// `doctor` says of this machine's boots stands on it.
pub fn probe_boot(qemu: &Path, kernel: &Path, accel: Accel) -> Result<Result<f64, String>> {
    crate::signals::install();
    let scratch = image::Scratch::new()?;
    let mut config = guest::Config::new(&[]);
    config.probe = true;
    let initrd = scratch.initramfs(&config)?;
    let mut guardian = scratch.guardian()?;
    let results = scratch.path().join("results");
    let spec = BootSpec {
        qemu,
        kernel,
        initrd: &initrd,
        results: &results,
        accel,
        vcpus: Vcpus::Smp(1),
        memory_mb: image::memory_for(&initrd),
        init_deadline: accel.init_deadline(),
        timeout: accel.init_deadline() + Duration::from_secs(30),
        name: "probe",
    };
    let started = Instant::now();
    Ok(match qemu::boot(&spec, &mut guardian)? {
        Ended::Done => Ok(started.elapsed().as_secs_f64()),
        Ended::Interrupted(sig) => return Err(Stopped(sig).into()),
        Ended::NoInit(why) | Ended::Failed(why) => Err(why),
    })
}

/// `A`, `B`, …: kernels as `compare` letters its systems.
pub fn letter(i: usize) -> char {
    (b'A' + (i % 26) as u8) as char
}

/// What a run measured in a VM records about the boot beside the guest's
/// own snapshot (its kernel's release, version and command line).
struct Mark<'a> {
    accel: Accel,
    vcpus: Vcpus,
    image: &'a Path,
    memory_mb: u32,
    round: u32,
    qemu: &'a Path,
}

impl Mark<'_> {
    fn on(&self, mut export: Value) -> Value {
        let host = kscale_sys::snapshot::take(super::VERSION, super::GIT_REV);
        export["system"]["vm"] = json!({
            "accel": self.accel.name(),
            "emulated": self.accel == Accel::Tcg,
            "vcpus": self.vcpus.count(),
            "up": self.vcpus == Vcpus::Up,
            "image": self.image.display().to_string(),
            "memory_mb": self.memory_mb,
            "boot_round": self.round + 1,
            "qemu": self.qemu.display().to_string(),
            "host_kernel": host["kernel"]["release"],
            "host_cpu": host["cpu"]["model"],
        });
        export
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boots_interleave_kernel_by_kernel() {
        let s = schedule(2, &[Vcpus::Smp(1), Vcpus::Up], 2);
        let order: Vec<(usize, Vcpus, u32)> =
            s.iter().map(|b| (b.kernel, b.vcpus, b.round)).collect();
        assert_eq!(
            order,
            [
                (0, Vcpus::Smp(1), 0),
                (0, Vcpus::Up, 0),
                (1, Vcpus::Smp(1), 0),
                (1, Vcpus::Up, 0),
                (0, Vcpus::Smp(1), 1),
                (0, Vcpus::Up, 1),
                (1, Vcpus::Smp(1), 1),
                (1, Vcpus::Up, 1),
            ]
        );
        let kernels: Vec<usize> = schedule(2, &[Vcpus::Smp(2)], 3)
            .iter()
            .map(|b| b.kernel)
            .collect();
        assert_eq!(kernels, [0, 1, 0, 1, 0, 1]);
    }

    #[test]
    fn vcpu_lists_parse_and_refuse() {
        let v = parse_vcpus(&["1,all".into()], 4).unwrap();
        assert_eq!(v, [Vcpus::Smp(1), Vcpus::Smp(4)]);
        assert_eq!(
            parse_vcpus(&["2".into(), "all".into()], 2).unwrap(),
            [Vcpus::Smp(2)]
        );
        for bad in ["0", "x", "1,,2", "999"] {
            let e = parse_vcpus(&[bad.into()], 2).unwrap_err().to_string();
            assert!(e.contains("bad --cpus") && e.contains("1 to 256"), "{e}");
        }
        assert_eq!(Vcpus::Up.name(), "up");
        assert_eq!(Vcpus::Smp(4).name(), "4cpu");
    }
}
