//! The hidden worker: one trial in a fresh process. It pins itself to the
//! requested CPUs before any workload code runs, then prints one JSON line.

use kscale_workloads::TrialRequest;
use std::io::Read;
use std::process::ExitCode;

pub fn main() -> ExitCode {
    kscale_sys::process::die_with_parent();
    // Started through /proc/self/exe, the worker would otherwise be called
    // "exe" in ps and in profiles.
    kscale_sys::process::set_name("kscale-worker");
    let mut input = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut input) {
        eprintln!("worker: cannot read request: {e}");
        return ExitCode::from(2);
    }
    let req: TrialRequest = match serde_json::from_str(&input) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("worker: bad request: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = kscale_sys::affinity::pin(&req.cpus) {
        eprintln!("worker: {e:#}");
        return ExitCode::from(1);
    }
    inject_fault(&req.workload);
    let before = kscale_sys::procstat::read();
    let result = kscale_workloads::run_trial(&req);
    let after = kscale_sys::procstat::read();
    let mut out = match result {
        Ok(out) => out,
        Err(e) => {
            eprintln!("{e:#}");
            return ExitCode::from(1);
        }
    };
    out.accounting = kscale_sys::procstat::delta(&before, &after, &req.cpus);
    match serde_json::to_string(&out) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("worker: {e}");
            ExitCode::from(1)
        }
    }
}

/// Fault injection for kscale's own tests of crash and hang handling:
/// `KSCALE_FAULT=crash:WORKLOAD` or `hang:WORKLOAD`.
fn inject_fault(workload: &str) {
    let Ok(spec) = std::env::var("KSCALE_FAULT") else {
        return;
    };
    match spec.split_once(':') {
        Some(("crash", w)) if w == workload => std::process::abort(),
        Some(("hang", w)) if w == workload => loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        },
        _ => {}
    }
}
