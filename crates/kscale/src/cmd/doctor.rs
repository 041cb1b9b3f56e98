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
use crate::output::outln;
use anyhow::Result;
use kscale_core::noise;
use kscale_workloads::gauge::GaugeRequest;
use serde::Serialize;
use std::path::PathBuf;
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
    /// Output format.
    #[arg(long, value_enum, default_value = "terminal")]
    format: Format,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Terminal,
    Json,
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
    let mut found = Vec::new();

    // Another kscale measuring here first: it would make the gauge read it.
    let others = kscale_sys::process::other_runs();
    for o in &others {
        found.push(finding(
            Level::Fail,
            "other runs",
            format!(
                "another kscale is measuring on this machine: pid {} ({})",
                o.pid, o.cmdline
            ),
            Some("wait for it to end: two runs at once measure each other"),
        ));
    }

    // The gauge.
    let cpus = kscale_sys::affinity::available_cpus()?;
    let spacing_ms = 250u64;
    let readings = ((args.seconds * 1000.0) / spacing_ms as f64)
        .round()
        .max(2.0) as usize;
    let before = kscale_sys::procstat::read();
    let rs = gauge::take(&GaugeRequest {
        cpus: cpus.clone(),
        readings,
        spacing_ms,
        t0_s: 0.0,
    })?;
    let after = kscale_sys::procstat::read();
    // Drift between fifths of the reading time, so a short look still
    // compares moments.
    let window = (args.seconds / 5.0).max(1.0);
    let scaled: Vec<noise::Reading> = rs
        .iter()
        .map(|r| noise::Reading {
            t_s: r.t_s * noise::MOMENT_S / window,
            ..*r
        })
        .collect();
    // What `study --quick` would make of these readings (gauge::fit_plan).
    let whole = gauge::whole_plan(&scaled);
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
            says: format!("{line} (drift: between fifths of {:.0} s)", args.seconds),
            todo,
        });
    }
    if let Some(a) = kscale_sys::procstat::delta(&before, &after, &cpus) {
        found.push(finding(
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
        ));
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
    }

    // The targets' programs.
    let mut missing = std::collections::BTreeMap::<String, Vec<String>>::new();
    for w in &targets {
        if let Some(why) = (w.unavailable)(w, &kscale_core::Params(Default::default())) {
            missing.entry(why).or_default().push(w.id());
        }
    }
    for (why, ws) in &missing {
        found.push(finding(
            if named { Level::Fail } else { Level::Warn },
            "programs",
            format!("{}: {why}", ws.join(", ")),
            Some(if named {
                "install it: the run cannot measure these"
            } else {
                "install it, or those workloads are skipped"
            }),
        ));
    }
    if missing.is_empty() {
        found.push(finding(
            Level::Ok,
            "programs",
            format!(
                "every program the {} workload(s) need is installed",
                targets.len()
            ),
            None,
        ));
    }

    // perf: kernel profiles.
    let root = nix::unistd::geteuid().is_root();
    let paranoid = kscale_sys::perf::paranoid();
    match (root, paranoid) {
        (true, _) => found.push(finding(
            Level::Ok,
            "perf",
            "root: kernel profiles can sample".into(),
            None,
        )),
        (false, Some(p)) if p <= 1 => found.push(finding(
            Level::Ok,
            "perf",
            format!("kernel.perf_event_paranoid = {p}: kernel profiles can sample"),
            None,
        )),
        (false, p) => found.push(finding(
            Level::Warn,
            "perf",
            format!(
                "kernel.perf_event_paranoid = {}: no kernel profiles",
                p.map_or("unreadable".into(), |p| p.to_string())
            ),
            Some("sysctl kernel.perf_event_paranoid=1, or run as root"),
        )),
    }
    match kscale_sys::perf::CycleCounter::new() {
        Ok(_) => found.push(finding(
            Level::Ok,
            "PMU",
            "hardware cycle counter available".into(),
            None,
        )),
        Err(_) => found.push(finding(
            Level::Warn,
            "PMU",
            "no hardware cycle counter: profiles sample the software cpu-clock".into(),
            Some("nothing to do in a VM without a virtual PMU; profiles still rank routines"),
        )),
    }

    // The idle-CPU request a VM run holds.
    if kscale_sys::idle::virtual_machine() {
        let can = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/cpu_dma_latency")
            .is_ok();
        found.push(finding(
            if can { Level::Ok } else { Level::Warn },
            "idle",
            if can {
                "virtual machine: runs hold idle CPUs polling (/dev/cpu_dma_latency)".into()
            } else {
                "virtual machine, and /dev/cpu_dma_latency cannot be opened: idle vCPUs halt, and cross-CPU figures follow the host's wake-ups".into()
            },
            (!can).then_some("run as root, or pass --cpu-idle default to accept it"),
        ));
    }

    // Transparent huge pages.
    if let Ok(thp) = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled") {
        let mode = thp
            .split_whitespace()
            .find(|w| w.starts_with('['))
            .map(|w| w.trim_matches(['[', ']']).to_string())
            .unwrap_or_else(|| thp.trim().to_string());
        found.push(finding(
            Level::Ok,
            "THP",
            format!("transparent huge pages: {mode} (recorded with every run; mem figures depend on it)"),
            None,
        ));
    }

    // The filesystem under --dir.
    if let Some(dev) = kscale_sys::fsinfo::ext4_without_journal(&dir) {
        found.push(finding(
            Level::Warn,
            "filesystem",
            format!("{} is on ext4 without a journal ({dev}): fs.create and fileserver depend on what was deleted there in the last minute", dir.display()),
            Some("pass --dir on a journalled filesystem or tmpfs for steady file figures"),
        ));
    } else {
        found.push(finding(
            Level::Ok,
            "filesystem",
            format!("{} is usable for the file workloads", dir.display()),
            None,
        ));
    }
    if !kscale_sys::fsinfo::has_room(&dir, 2 << 30, 1_000_000) {
        found.push(finding(
            Level::Warn,
            "filesystem",
            format!("{} has less than 2 GiB or a million inodes free", dir.display()),
            Some("free space there or pass --dir elsewhere: fs and fileserver keep files for the run"),
        ));
    }

    let worst = found.iter().map(|f| f.level).max().unwrap_or(Level::Ok);
    match args.format {
        Format::Json => outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "status": worst,
                "findings": found,
                "readings": rs,
            }))?
        )?,
        Format::Terminal => {
            for f in &found {
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
        }
    }
    Ok(ExitCode::from(if worst == Level::Fail { 1 } else { 0 }))
}
