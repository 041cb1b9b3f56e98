//! `kscale doctor [TARGETS…]`: before a run, what the machine will give it.
//! It reads the gauge for a few seconds (the CPU loop's spread and drift,
//! memory, cross-CPU wake-ups, steal) and checks what a run of the targets
//! needs: their programs, perf, the idle-CPU request, transparent huge
//! pages, the filesystem under `--dir`, and whether another kscale is
//! measuring here. One line per finding, each with what to do; the exit
//! status says whether the machine can run what was asked (pyperf's
//! `system show` and `check` are the anchor).

use crate::engine::gauge;
use crate::error::user;
use crate::output::{outln, print, Format, Json};
use anyhow::Result;
use kscale_core::noise::{self, Reading};
use kscale_workloads::machine_probe::GaugeRequest;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(
    after_help = "Exit status: 0 the machine can run what was asked (warnings may \
remain); 1 at least one finding stops it (a program a named target needs is missing, another \
kscale is measuring here); 2 bad input.

Examples:
  kscale doctor                      the whole catalogue, a 10 s gauge
  kscale doctor web.nginx fs --dir /mnt/ext4
  kscale doctor --seconds 60 --format json"
)]
pub struct Args {
    /// Workloads or families a run will measure (default: the whole
    /// catalogue, whose missing programs are then warnings).
    targets: Vec<String>,
    /// How long the gauge reads the machine.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    seconds: f64,
    /// The directory a run will use (`run --dir`).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// A kernel image to boot in QEMU, under KVM and else emulated, to tell whether `kscale
    /// vm` can boot kernels here (default: $KSCALE_VM_KERNEL; none: no boot is tried).
    #[arg(long, value_name = "IMAGE")]
    kernel: Option<PathBuf>,
    /// Output format: terminal or json.
    #[arg(long, value_enum, default_value_t, hide_possible_values = true)]
    format: Format,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
enum Level {
    Ok,
    Warn,
    Fail,
}

/// One thing the doctor found, and what to do about it.
#[derive(Serialize)]
struct Finding {
    level: Level,
    what: &'static str,
    says: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    todo: Option<String>,
}

fn finding(level: Level, what: &'static str, says: String, todo: Option<&str>) -> Finding {
    Finding {
        level,
        what,
        says,
        todo: todo.map(String::from),
    }
}

/// The workloads named by `targets` (ids or family names), or the whole
/// catalogue.
fn workloads(targets: &[String]) -> Result<Vec<&'static kscale_workloads::WorkloadDef>> {
    if targets.is_empty() {
        return Ok(kscale_workloads::workloads().collect());
    }
    let mut out = Vec::new();
    for t in targets {
        if let Some(w) = kscale_workloads::find(t) {
            out.push(w);
        } else if kscale_workloads::family(t).is_some() {
            out.extend(kscale_workloads::workloads().filter(|w| w.family == t));
        } else {
            return Err(user(format!(
                "unknown target `{t}`: expected a workload (e.g. syscall.null) or a family \
                 (e.g. net); `kscale list` shows them"
            )));
        }
    }
    Ok(out)
}

pub fn run(args: Args, _db: Option<PathBuf>) -> Result<ExitCode> {
    let format = args
        .format
        .accepted("doctor", &[Format::Terminal, Format::Json])?;
    if !(args.seconds.is_finite() && (1.0..=3600.0).contains(&args.seconds)) {
        return Err(user(format!(
            "bad --seconds {}: expected 1 to 3600",
            args.seconds
        )));
    }
    let named = !args.targets.is_empty();
    let targets = workloads(&args.targets)?;
    let dir = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    if !dir.is_dir() {
        return Err(user(format!(
            "bad --dir {}: not a directory",
            dir.display()
        )));
    }
    let kernel = args.kernel.clone().or_else(|| {
        std::env::var_os("KSCALE_VM_KERNEL")
            .filter(|k| !k.is_empty())
            .map(PathBuf::from)
    });
    if let Some(k) = &kernel {
        crate::engine::vm::check_kernel(k)?;
    }
    // Another kscale measuring here first: it would make the gauge read it.
    let mut found = other_runs();
    let (gauged, readings) = gauge_findings(args.seconds)?;
    found.extend(gauged);
    found.extend(programs(&targets, named));
    found.extend(perf());
    found.extend(idle_request());
    found.extend(huge_pages());
    found.extend(filesystem(&dir));
    found.extend(vm_boots(kernel.as_deref())?);

    let worst = found.iter().map(|f| f.level).max().unwrap_or(Level::Ok);
    match format {
        Format::Json => print(&Json.document(&serde_json::json!({
            "status": worst,
            "findings": found,
            "readings": readings,
        }))?)?,
        // csv and md were refused above.
        Format::Terminal | Format::Csv | Format::Md => print_findings(&found)?,
    }
    Ok(ExitCode::from(if worst == Level::Fail { 1 } else { 0 }))
}

/// Whether `kscale vm` can boot kernels here: with KVM, only emulated,
/// or not at all, and why; a boot of `kernel` decides where one is given
/// (docs/vm.md).
fn vm_boots(kernel: Option<&Path>) -> Result<Vec<Finding>> {
    use crate::engine::vm::{self, qemu::Accel};
    let what = "kernels in VMs";
    let qemu = match vm::qemu::find() {
        Ok(q) => q,
        Err(e) => {
            return Ok(vec![finding(
                Level::Warn,
                what,
                format!("none can be booted: {e}"),
                Some("install QEMU to measure kernel images with `kscale vm`"),
            )])
        }
    };
    let kvm = vm::qemu::kvm_usable();
    let Some(kernel) = kernel else {
        let says = match &kvm {
            Ok(()) => "QEMU is installed and /dev/kvm opens; whether a kernel boots under KVM here is untried".to_string(),
            Err(why) => format!("only emulated (TCG), not the kernels' speed: {why}"),
        };
        return Ok(vec![finding(
            Level::Ok,
            what,
            says,
            Some("`kscale doctor --kernel IMAGE` boots one to tell"),
        )]);
    };
    let kvm = match kvm {
        Ok(()) => vm::probe_boot(&qemu, kernel, Accel::Kvm)?,
        Err(why) => Err(why.trim_start_matches("KVM: ").to_string()),
    };
    if let Ok(s) = kvm {
        return Ok(vec![finding(
            Level::Ok,
            what,
            format!(
                "KVM: {} reaches init in {s:.1} s; `kscale vm` measures at the kernel's speed",
                kernel.display()
            ),
            None,
        )]);
    }
    let kvm_why = kvm.err().unwrap_or_default();
    Ok(vec![match vm::probe_boot(&qemu, kernel, Accel::Tcg)? {
        Ok(s) => finding(
            Level::Warn,
            what,
            format!(
                "only emulated (TCG), not the kernels' speed: KVM: {kvm_why}; emulated, {} reaches init in {s:.1} s",
                kernel.display()
            ),
            Some("a host with working KVM gives the kernels' own figures"),
        ),
        Err(why) => finding(
            Level::Warn,
            what,
            format!(
                "none can be booted: {} under KVM: {kvm_why}; emulated: {why}",
                kernel.display()
            ),
            Some("check the image boots (a bzImage with the 8250 serial console built in)"),
        ),
    }])
}

/// A failure for each other kscale measuring on this machine: two runs at
/// once measure each other.
fn other_runs() -> Vec<Finding> {
    kscale_sys::process::other_runs()
        .iter()
        .map(|o| {
            finding(
                Level::Fail,
                "other runs",
                format!(
                    "another kscale is measuring on this machine: pid {} ({})",
                    o.pid, o.cmdline
                ),
                Some("wait for it to end: two runs at once measure each other"),
            )
        })
        .collect()
}

/// Reads the gauge for `seconds` on the CPUs kscale may use: what its
/// readings and the CPUs' time while it read say, and the readings
/// themselves for the JSON.
fn gauge_findings(seconds: f64) -> Result<(Vec<Finding>, Vec<Reading>)> {
    let cpus = kscale_sys::affinity::available_cpus()?;
    let spacing_ms = 250u64;
    let readings = ((seconds * 1000.0) / spacing_ms as f64).round().max(2.0) as usize;
    let before = kscale_sys::procstat::read();
    let rs = gauge::take(&GaugeRequest {
        cpus: cpus.clone(),
        readings,
        spacing_ms,
        t0_s: 0.0,
    })?;
    let after = kscale_sys::procstat::read();
    let mut found = spread(&rs, seconds);
    if let Some(a) = kscale_sys::procstat::delta(&before, &after, &cpus) {
        found.extend(cpu_time(&a));
    }
    Ok((found, rs))
}

/// A line a CPU on the gauge's spread and drift, with the trials a case
/// would need where they are too large for a quick, steady study.
fn spread(rs: &[Reading], seconds: f64) -> Vec<Finding> {
    // Drift between fifths of the reading time, so a short look still
    // compares moments.
    let window = (seconds / 5.0).max(1.0);
    let scaled: Vec<Reading> = rs
        .iter()
        .map(|r| Reading {
            t_s: r.t_s * noise::MOMENT_S / window,
            ..*r
        })
        .collect();
    // What `study --quick` would make of these readings (gauge::fit_to_noise).
    let whole = gauge::whole_plan(&scaled);
    let mut found = Vec::new();
    for (line, n) in gauge::describe(&scaled)
        .into_iter()
        .zip(noise::per_cpu(&scaled))
    {
        let trials = noise::trials_needed(n.plan_cv(), 0.10, 0.95, 10_000);
        let (level, todo) = if n.plan_cv() <= 0.05 && n.plan_drift() <= 0.10 {
            (Level::Ok, None)
        } else {
            (
                Level::Warn,
                Some(format!(
                    "expect ~{trials} trials a case for a 10 % interval; {}; stop what else runs, or measure at a quieter hour",
                    if whole {
                        "`study --quick` still measures its whole plan here, and its pilot leaves out cases that spread too far"
                    } else {
                        "`study --quick` measures fewer cases here"
                    }
                )),
            )
        };
        found.push(Finding {
            level,
            what: "gauge",
            says: format!("{line} (drift: between fifths of {seconds:.0} s)"),
            todo,
        });
    }
    found
}

/// What the CPUs' time while the gauge ran says: the host's steal, and
/// whether something else kept them busy.
fn cpu_time(a: &kscale_core::model::CpuAccounting) -> Vec<Finding> {
    let mut found = vec![finding(
        if a.steal_pct >= 5.0 {
            Level::Warn
        } else {
            Level::Ok
        },
        "steal",
        format!(
            "{:.1} % of the CPUs' time was stolen by the host while the gauge ran",
            a.steal_pct
        ),
        (a.steal_pct >= 5.0)
            .then_some("the host gives these vCPUs less than their time: figures will spread"),
    )];
    // The gauge itself keeps a CPU busy a small part of the time.
    let busy = a.user_pct + a.system_pct + a.irq_pct + a.softirq_pct;
    if busy > 40.0 {
        found.push(finding(
            Level::Warn,
            "idle",
            format!(
                "the CPUs were {busy:.0} % busy while the gauge ran: something else is running"
            ),
            Some("stop it (top shows what), or its load is part of every figure"),
        ));
    }
    found
}

/// The programs the targets need that are missing (a failure where the
/// targets were named, a warning for the whole catalogue), or that none is.
fn programs(targets: &[&kscale_workloads::WorkloadDef], named: bool) -> Vec<Finding> {
    let mut missing = std::collections::BTreeMap::<String, Vec<String>>::new();
    for w in targets {
        if let Some(why) = (w.unavailable)(w, &kscale_core::Params(Default::default())) {
            missing.entry(why).or_default().push(w.id());
        }
    }
    if missing.is_empty() {
        return vec![finding(
            Level::Ok,
            "programs",
            format!(
                "every program the {} workload(s) need is installed",
                targets.len()
            ),
            None,
        )];
    }
    missing
        .iter()
        .map(|(why, ws)| {
            finding(
                if named { Level::Fail } else { Level::Warn },
                "programs",
                format!("{}: {why}", ws.join(", ")),
                Some(if named {
                    "install it: the run cannot measure these"
                } else {
                    "install it, or those workloads are skipped"
                }),
            )
        })
        .collect()
}

/// Whether kernel profiles can sample (root or a low enough
/// perf_event_paranoid), and on what counter.
fn perf() -> Vec<Finding> {
    let root = nix::unistd::geteuid().is_root();
    let paranoid = kscale_sys::perf::paranoid();
    let access = match (root, paranoid) {
        (true, _) => finding(
            Level::Ok,
            "perf",
            "root: kernel profiles can sample".into(),
            None,
        ),
        (false, Some(p)) if p <= 1 => finding(
            Level::Ok,
            "perf",
            format!("kernel.perf_event_paranoid = {p}: kernel profiles can sample"),
            None,
        ),
        (false, p) => finding(
            Level::Warn,
            "perf",
            format!(
                "kernel.perf_event_paranoid = {}: no kernel profiles",
                p.map_or("unreadable".into(), |p| p.to_string())
            ),
            Some("sysctl kernel.perf_event_paranoid=1, or run as root"),
        ),
    };
    let counter = match kscale_sys::perf::CycleCounter::new() {
        Ok(_) => finding(
            Level::Ok,
            "PMU",
            "hardware cycle counter available".into(),
            None,
        ),
        Err(_) => finding(
            Level::Warn,
            "PMU",
            "no hardware cycle counter: profiles sample the software cpu-clock".into(),
            Some("nothing to do in a VM without a virtual PMU; profiles still rank routines"),
        ),
    };
    vec![access, counter]
}

/// In a VM, whether a run can hold its idle CPUs polling; nothing on bare
/// metal.
fn idle_request() -> Option<Finding> {
    if !kscale_sys::idle::virtual_machine() {
        return None;
    }
    let can = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/cpu_dma_latency")
        .is_ok();
    Some(finding(
        if can { Level::Ok } else { Level::Warn },
        "idle",
        if can {
            "virtual machine: runs hold idle CPUs polling (/dev/cpu_dma_latency)".into()
        } else {
            "virtual machine, and /dev/cpu_dma_latency cannot be opened: idle vCPUs halt, and cross-CPU figures follow the host's wake-ups".into()
        },
        (!can).then_some("run as root, or pass --cpu-idle default to accept it"),
    ))
}

/// The transparent huge pages mode, where the kernel has one: the mem
/// figures depend on it.
fn huge_pages() -> Option<Finding> {
    let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    let mode = thp
        .split_whitespace()
        .find(|w| w.starts_with('['))
        .map(|w| w.trim_matches(['[', ']']).to_string())
        .unwrap_or_else(|| thp.trim().to_string());
    Some(finding(
        Level::Ok,
        "THP",
        format!(
            "transparent huge pages: {mode} (recorded with every run; mem figures depend on it)"
        ),
        None,
    ))
}

/// Whether the file workloads can measure steadily under `dir`: its
/// filesystem's journal and its free room.
fn filesystem(dir: &Path) -> Vec<Finding> {
    let mut found = vec![match kscale_sys::fsinfo::ext4_without_journal(dir) {
        Some(dev) => finding(
            Level::Warn,
            "filesystem",
            format!("{} is on ext4 without a journal ({dev}): fs.create and fileserver depend on what was deleted there in the last minute", dir.display()),
            Some("pass --dir on a journalled filesystem or tmpfs for steady file figures"),
        ),
        None => finding(
            Level::Ok,
            "filesystem",
            format!("{} is usable for the file workloads", dir.display()),
            None,
        ),
    }];
    if !kscale_sys::fsinfo::has_room(dir, 2 << 30, 1_000_000) {
        found.push(finding(
            Level::Warn,
            "filesystem",
            format!("{} has less than 2 GiB or a million inodes free", dir.display()),
            Some("free space there or pass --dir elsewhere: fs and fileserver keep files for the run"),
        ));
    }
    found
}

/// A line a finding with what to do, then the count of each level.
fn print_findings(found: &[Finding]) -> Result<()> {
    for f in found {
        let tag = match f.level {
            Level::Ok => "ok  ",
            Level::Warn => "warn",
            Level::Fail => "FAIL",
        };
        match &f.todo {
            Some(t) => outln!("{tag} {}: {} — {t}", f.what, f.says)?,
            None => outln!("{tag} {}: {}", f.what, f.says)?,
        }
    }
    let n = |l| found.iter().filter(|f| f.level == l).count();
    outln!(
        "kscale doctor: {} ok, {} warning(s), {} stop(s) a run",
        n(Level::Ok),
        n(Level::Warn),
        n(Level::Fail)
    )?;
    Ok(())
}
