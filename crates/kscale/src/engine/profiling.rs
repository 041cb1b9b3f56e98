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
    /// Events already reported as unavailable: said once per run, since the
    /// machine will not change its mind between cases.
    said: Vec<String>,
}

impl Profiler {
    pub fn new(wanted: bool) -> Profiler {
        Profiler {
            wanted,
            ksyms: None,
            said: Vec::new(),
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
                say(bar, format!("kscale: {e:#}"));
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
            .filter(|(e, _)| !self.said.contains(&e.name().to_string()))
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
            self.said.extend(names.iter().map(|n| n.to_string()));
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
