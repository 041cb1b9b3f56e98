//! `kscale vm --kernel A --kernel B -- run TARGET…`: kernel images
//! measured without installing them, each booted in QEMU with kscale as
//! its init, boot by boot interleaved, the guests' runs imported here
//! (docs/vm.md). The booting is the engine's (`engine::vm`); this file
//! checks the arguments, labels and imports the runs, and sums up.

pub use crate::engine::vm::Vcpus;
use crate::engine::vm::{self, AccelChoice, BootResult, Plan};
use crate::error::user;
use crate::output::{outln, Format};
use anyhow::Result;
use kscale_store::{ImportOutcome, Store};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
#[command(
    after_help = "Everything after `--` is what each guest runs: `run TARGET… [options]` or `study …`, \
as on the host. Each run is stored here labelled with its guest kernel's release and marked with how \
it was booted; without KVM the figures are emulated (TCG), not the kernel's speed (docs/vm.md).

Examples:
  kscale vm --kernel arch/x86/boot/bzImage -- run syscall --quick
  kscale vm --kernel /boot/vmlinuz-6.1.0-47-cloud-amd64 --kernel /boot/vmlinuz-6.1.0-50-cloud-amd64 \\
      --cpus 1,all --compare -- run syscall.null syscall.fork_exit --quick
  kscale vm --kernel bzImage --up --cpus 1,4 -- run ctx --quick      seed 003: UP, SMP on 1 and 4"
)]
pub struct Args {
    /// A kernel image to boot (a bzImage or vmlinuz); repeat it for each kernel, the first is A.
    #[arg(long = "kernel", value_name = "IMAGE", required = true)]
    pub kernels: Vec<PathBuf>,
    /// vCPU counts to boot each kernel with, e.g. `1,all` (all: this machine's CPUs). Default
    /// `all`, or none with `--up` alone.
    #[arg(long, value_name = "LIST")]
    pub cpus: Vec<String>,
    /// Also boot each kernel uniprocessor: one vCPU and `nosmp maxcpus=1` on its command line.
    #[arg(long)]
    pub up: bool,
    /// Boots of each kernel and vCPU count, interleaved kernel by kernel (A B A B …). 1 to 50.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub boots: u32,
    /// How the guest's CPUs run: `kvm`, `tcg` (emulated), or `auto`: KVM where a boot reaches
    /// init within 20 s, else emulated, said in one line.
    #[arg(long, value_enum, default_value = "auto")]
    pub accel: AccelChoice,
    /// Guest memory in MB (default: 512 plus twice the initramfs).
    #[arg(long, value_name = "MB")]
    pub memory: Option<u32>,
    /// The most one boot may take, in seconds, its run included.
    #[arg(long, value_name = "SECONDS", default_value_t = 3600)]
    pub timeout: u64,
    /// Label of the stored runs: `{kernel}` is the guest kernel's release, `{cpus}` the boot's
    /// vCPUs (`1cpu`, `2cpu`, `up`). Default `{kernel}`, or `{kernel} {cpus}` with several kinds
    /// or `--up`.
    #[arg(long, value_name = "LABEL")]
    pub label: Option<String>,
    /// Print `kscale compare` of each kernel's and vCPU count's last run at the end.
    #[arg(long)]
    pub compare: bool,
    /// What each guest runs: `run TARGET… [options]` or `study …`.
    #[arg(
        value_name = "COMMAND",
        last = true,
        allow_hyphen_values = true,
        required = true
    )]
    pub command: Vec<String>,
}

/// The checked plan: bad input is one line before anything boots.
pub fn plan(a: &Args) -> Result<Plan> {
    for k in &a.kernels {
        vm::check_kernel(k)?;
    }
    if !(1..=50).contains(&a.boots) {
        return Err(user(format!(
            "bad --boots {}: expected 1 to 50 boots of each kernel",
            a.boots
        )));
    }
    if let Some(m) = a.memory.filter(|m| !(128..=1 << 20).contains(m)) {
        return Err(user(format!(
            "bad --memory {m}: expected 128 to 1048576 MB"
        )));
    }
    if !(10..=7 * 86400).contains(&a.timeout) {
        return Err(user(format!(
            "bad --timeout {}: expected 10 to 604800 seconds",
            a.timeout
        )));
    }
    if let Some(l) = &a.label {
        crate::engine::args::check_label(l)?;
    }
    let online = kscale_sys::affinity::available_cpus()
        .map(|c| c.len())
        .unwrap_or(1)
        .max(1);
    let mut vcpus = if a.cpus.is_empty() && a.up {
        Vec::new()
    } else if a.cpus.is_empty() {
        vec![Vcpus::Smp(online)]
    } else {
        vm::parse_vcpus(&a.cpus, online)?
    };
    if a.up {
        vcpus.push(Vcpus::Up);
    }
    let mut guest_args = super::fleet::remote_command(&a.command)?;
    if !guest_args.iter().any(|w| w == "--no-progress") {
        guest_args.push("--no-progress".into());
    }
    Ok(Plan {
        kernels: a.kernels.clone(),
        vcpus,
        rounds: a.boots,
        accel: a.accel,
        memory_mb: a.memory,
        guest_args,
        timeout: Duration::from_secs(a.timeout),
    })
}

/// A run's label from the template: the guest kernel's release and the
/// boot's vCPUs.
fn label(template: &str, release: &str, vcpus: Vcpus) -> String {
    template
        .replace("{kernel}", release)
        .replace("{cpus}", &vcpus.name())
}

/// The runs a boot brought back, labelled and imported; their ids.
pub fn import_boot(store: &Store, b: &BootResult, template: &str) -> Result<Vec<i64>> {
    let mut ids = Vec::new();
    for r in &b.runs {
        let release = r["system"]["kernel"]["release"].as_str().unwrap_or("?");
        let l = label(template, release, b.boot.vcpus);
        let id = match super::import::import_value(store, r, Some(&l))? {
            ImportOutcome::Imported(id) | ImportOutcome::AlreadyThere(id) => id,
        };
        eprintln!(
            "kscale vm: stored run {id} ({l}, {} on {}, {:.0} s)",
            b.accel.words(),
            vm::letter(b.boot.kernel),
            b.seconds
        );
        ids.push(id);
    }
    Ok(ids)
}

pub fn run(args: Args, db: Option<PathBuf>) -> Result<ExitCode> {
    crate::signals::install();
    let plan = plan(&args)?;
    let template = args.label.clone().unwrap_or_else(|| {
        if plan.vcpus.len() > 1 || plan.vcpus.contains(&Vcpus::Up) {
            "{kernel} {cpus}".into()
        } else {
            "{kernel}".into()
        }
    });
    let store = super::open_store(db)?;
    // (kernel, vCPUs, run id) of each run stored, in boot order.
    let mut stored: Vec<(usize, Vcpus, i64)> = Vec::new();
    let mut failed = Vec::new();
    let started = std::time::Instant::now();
    vm::run(&plan, |b| {
        if b.status != 0 {
            failed.push(format!(
                "boot {} of {} ({}): the guest's kscale exited {}",
                b.boot.round + 1,
                vm::letter(b.boot.kernel),
                b.boot.vcpus.name(),
                b.status
            ));
        }
        for id in import_boot(&store, &b, &template)? {
            stored.push((b.boot.kernel, b.boot.vcpus, id));
        }
        Ok(())
    })?;
    let ids: Vec<String> = stored.iter().map(|s| s.2.to_string()).collect();
    eprintln!(
        "kscale vm: {} boots, {} runs stored ({}) in {:.0} s",
        plan.kernels.len() * plan.vcpus.len() * plan.rounds as usize,
        stored.len(),
        ids.join(", "),
        started.elapsed().as_secs_f64()
    );
    if args.compare {
        let last = last_of_each(&stored);
        if last.len() >= 2 {
            outln!()?;
            super::compare::print_comparison(&store, &last, &[], None, 0.05, Format::Terminal)?;
        } else {
            outln!(
                "--compare needs runs of two kernels or vCPU counts; got {}",
                last.len()
            )?;
        }
    }
    if failed.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        for f in &failed {
            eprintln!("kscale vm: {f}");
        }
        Ok(ExitCode::from(1))
    }
}

/// The kind of boot a baseline was measured in (its vCPUs, or UP), so
/// that the runs a check boots are of the same machine; `None` for a
/// baseline measured on a host's own kernel.
pub fn vcpus_of(snapshot: &serde_json::Value) -> Option<Vcpus> {
    let vm = &snapshot["vm"];
    vm["accel"].as_str()?;
    Some(if vm["up"] == true {
        Vcpus::Up
    } else {
        Vcpus::Smp(vm["vcpus"].as_u64().unwrap_or(1).max(1) as usize)
    })
}

/// One boot of `kernel` running `guest_args` (`run …`) with `vcpus` (else
/// all this machine's CPUs), its run stored and labelled by the guest
/// kernel: a measurement of `check --kernel` and `history --kernel`. Its
/// id.
pub fn measure_in(
    store: &Store,
    kernel: &std::path::Path,
    guest_args: &[String],
    vcpus: Option<Vcpus>,
) -> Result<i64> {
    vm::check_kernel(kernel)?;
    let online = kscale_sys::affinity::available_cpus()
        .map(|c| c.len())
        .unwrap_or(1)
        .max(1);
    let mut guest_args = super::fleet::remote_command(guest_args)?;
    if !guest_args.iter().any(|w| w == "--no-progress") {
        guest_args.push("--no-progress".into());
    }
    let plan = Plan {
        kernels: vec![kernel.to_path_buf()],
        vcpus: vec![vcpus.unwrap_or(Vcpus::Smp(online))],
        rounds: 1,
        accel: AccelChoice::Auto,
        memory_mb: None,
        guest_args,
        timeout: Duration::from_secs(3600),
    };
    let mut ids = Vec::new();
    let mut status = 0;
    vm::run(&plan, |b| {
        status = b.status;
        let template = if b.boot.vcpus == Vcpus::Up {
            "{kernel} {cpus}"
        } else {
            "{kernel}"
        };
        ids.extend(import_boot(store, &b, template)?);
        Ok(())
    })?;
    match ids.last() {
        Some(&id) if status == 0 => Ok(id),
        _ => anyhow::bail!(
            "the guest's kscale exited {status} in {} (its lines above say why)",
            kernel.display()
        ),
    }
}

/// The last run of each kernel and vCPU kind, in the order they first
/// booted (A's, then B's): one column a system.
fn last_of_each(stored: &[(usize, Vcpus, i64)]) -> Vec<i64> {
    let mut keys: Vec<(usize, Vcpus)> = Vec::new();
    for s in stored {
        if !keys.contains(&(s.0, s.1)) {
            keys.push((s.0, s.1));
        }
    }
    keys.iter()
        .filter_map(|k| stored.iter().rev().find(|s| (s.0, s.1) == *k).map(|s| s.2))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_kernel_and_vcpus() {
        assert_eq!(label("{kernel}", "6.1.0-50", Vcpus::Smp(2)), "6.1.0-50");
        assert_eq!(
            label("{kernel} {cpus}", "6.1.0-50", Vcpus::Up),
            "6.1.0-50 up"
        );
    }

    #[test]
    fn compare_takes_each_systems_last_boot() {
        let s = [
            (0, Vcpus::Smp(1), 1),
            (1, Vcpus::Smp(1), 2),
            (0, Vcpus::Smp(1), 3),
            (1, Vcpus::Smp(1), 4),
        ];
        assert_eq!(last_of_each(&s), [3, 4]);
    }
}
