//! `--profile` (docs/method.md): after a case's counted trials have finished, one
//! extra trial with the same iteration count runs while the parent samples
//! every CPU of the case's configuration. The trial is not counted (its
//! value is kept with the profile, so the disturbance of sampling can be
//! checked against the counted trials — scripts/validate-profile).
//!
//! Running it after the counted trials, not after the warm-up, keeps the
//! counted trials' interleaving (docs/method.md) exactly as without `--profile`.

use anyhow::Result;
use indicatif::ProgressBar;
use kscale_store::Store;
use kscale_sys::kallsyms::Kallsyms;
use kscale_sys::perf::{self, SampleSpec};
use kscale_workloads::{TrialOutput, TrialRequest};
use std::time::Instant;

/// Validation hook (scripts/validate-profile): run the extra trial exactly
/// as a profiled one but without sampling, and store an empty profile
/// (`sample_on` = `control: not sampled`) carrying its value — the control
/// arm that separates the cost of sampling from the position of the trial.
pub const CONTROL_ENV: &str = "KSCALE_PROFILE_CONTROL";

pub struct Profiler {
    wanted: bool,
    ksyms: Option<Kallsyms>,
}

/// What the process has already said about perf: the events reported as
/// unavailable, and whether sampling was refused. Said once per process,
/// not per profiler, since the machine will not change its mind between
/// cases, and a run's capacity steps each get a profiler of their own (a
/// quick study printed the same PMU line three times).
static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
static REFUSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether `line` is new to this process; it is remembered.
fn first_time(line: &str) -> bool {
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if said.iter().any(|s| s == line) {
        return false;
    }
    said.push(line.to_string());
    true
}

impl Profiler {
    pub fn new(wanted: bool) -> Profiler {
        Profiler {
            wanted: wanted && !REFUSED.load(std::sync::atomic::Ordering::Relaxed),
            ksyms: None,
        }
    }

    /// False when `--profile` was not given or perf was refused earlier.
    pub fn wanted(&self) -> bool {
        self.wanted
    }

    /// Runs the profiled trial of one case and stores its profiles. A
    /// refusal by perf prints one line and switches profiling off for the
    /// rest of the run; a failed profiled trial costs only its profile.
    pub fn profile_case(
        &mut self,
        store: &Store,
        case_id: i64,
        req: &TrialRequest,
        primary: &str,
        bar: &ProgressBar,
        run: impl FnOnce(&TrialRequest) -> Result<TrialOutput, String>,
    ) -> Result<()> {
        if self.ksyms.is_none() {
            self.ksyms = Some(Kallsyms::load().unwrap_or_else(|e| {
                let line = format!("kscale: {e:#}");
                if first_time(&line) {
                    say(bar, line);
                }
                Kallsyms::default()
            }));
        }
        if std::env::var_os(CONTROL_ENV).is_some_and(|v| v != "0") {
            let started = Instant::now();
            if let Ok(out) = run(req) {
                let p = kscale_core::profile::Profile {
                    event: "cpu-clock".into(),
                    sample_on: "control: not sampled".into(),
                    ops: Some(out.iterations),
                    value: out.values.get(primary).copied(),
                    wall_s: Some(started.elapsed().as_secs_f64()),
                    ..Default::default()
                };
                store.add_profile(case_id, &p)?;
            }
            return Ok(());
        }
        let sampling = match perf::start_sampling(&req.cpus, &SampleSpec::DEFAULTS) {
            Ok(s) => s,
            Err(r) => {
                say(
                    bar,
                    format!("kscale: profiling off, continuing without profiles: {r}"),
                );
                REFUSED.store(true, std::sync::atomic::Ordering::Relaxed);
                self.wanted = false;
                return Ok(());
            }
        };
        let started = Instant::now();
        let outcome = run(req);
        let wall = started.elapsed().as_secs_f64();
        let sampled = sampling.stop();
        let out = match outcome {
            Ok(o) => o,
            Err(e) => {
                say(
                    bar,
                    format!("  {} profiled trial failed: {e}", req.workload),
                );
                return Ok(());
            }
        };
        let new: Vec<&(perf::SampleEvent, String)> = sampled
            .skipped
            .iter()
            .filter(|(e, _)| first_time(e.name()))
            .collect();
        if let Some((_, why)) = new.first() {
            let names: Vec<&str> = new.iter().map(|(e, _)| e.name()).collect();
            say(
                bar,
                format!(
                    "kscale: profiles without {} samples: {why}",
                    names.join(" and ")
                ),
            );
        }
        let empty = Kallsyms::default();
        for mut p in sampled.profiles(self.ksyms.as_ref().unwrap_or(&empty)) {
            p.ops = Some(out.iterations);
            p.value = out.values.get(primary).copied();
            p.wall_s = Some(wall);
            store.add_profile(case_id, &p)?;
        }
        Ok(())
    }
}

/// Prints above the progress bar; `ProgressBar::println` alone prints
/// nothing when the bar is hidden (`--no-progress`, no terminal).
fn say(bar: &ProgressBar, line: String) {
    bar.suspend(|| eprintln!("{line}"));
}
