//! The hidden worker: one trial in a fresh process. It pins itself to the
//! requested CPUs before any workload code runs, then prints one JSON line.
//! A macro workload's role worker keeps reading its stdin after the request
//! for the parent's `begin`/`end`/`stop` lines (docs/macro.md).

use kscale_workloads::TrialRequest;
use std::io::BufRead;
use std::process::ExitCode;

pub fn main() -> ExitCode {
    kscale_sys::process::die_with_parent();
    // Started through /proc/self/exe, the worker would otherwise be called
    // "exe" in ps and in profiles.
    kscale_sys::process::set_name("kscale-worker");
    // The request is the first line; a role worker's control lines follow.
    let mut input = std::io::BufReader::new(std::io::stdin());
    let mut first = String::new();
    if let Err(e) = input.read_line(&mut first) {
        eprintln!("worker: cannot read request: {e}");
        return ExitCode::from(2);
    }
    let req: TrialRequest = match serde_json::from_str(&first) {
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
    inject_fault(&req.workload, req.role.as_ref().map(|r| r.role.as_str()));
    if let Some(role) = &req.role {
        kscale_sys::process::set_name(&format!("kscale-{}", role.role.as_str()));
        return reply(
            kscale_workloads::roles::run_role(&req, role, input)
                .and_then(|out| kscale_workloads::roles::output_line(&out)),
        );
    }
    // The pace is read outside the trial's /proc/stat window, so its loop
    // is not counted in the trial's user time.
    let pace_before = kscale_workloads::machine_probe::pace_ns(req.trial_time_s);
    let (before, ours_before) = (
        kscale_sys::procstat::read(),
        kscale_sys::procstat::own_cpu_seconds(),
    );
    let result = kscale_workloads::run_trial(&req);
    let ours = kscale_sys::procstat::own_cpu_seconds() - ours_before;
    let after = kscale_sys::procstat::read();
    let pace_after = kscale_workloads::machine_probe::pace_ns(req.trial_time_s);
    let mut out = match result {
        Ok(out) => out,
        Err(e) => {
            eprintln!("{e:#}");
            return ExitCode::from(1);
        }
    };
    out.accounting = kscale_sys::procstat::delta(&before, &after, &req.cpus).map(|mut a| {
        a.others_pct = kscale_sys::procstat::others_pct(&before, &after, &req.cpus, ours);
        a.chain_pace_ns = match (pace_before, pace_after) {
            (Some(b), Some(a)) => Some((b + a) / 2.0),
            (b, a) => b.or(a),
        };
        a
    });
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

/// The gauge's worker (`kscale __gauge`): reads a
/// [`kscale_workloads::machine_probe::GaugeRequest`] line, prints the readings as
/// one JSON line. It pins itself to each CPU in turn.
pub fn gauge_main() -> ExitCode {
    kscale_sys::process::die_with_parent();
    kscale_sys::process::set_name("kscale-gauge");
    let mut first = String::new();
    if let Err(e) = std::io::stdin().read_line(&mut first) {
        eprintln!("gauge: cannot read request: {e}");
        return ExitCode::from(2);
    }
    let req: kscale_workloads::machine_probe::GaugeRequest = match serde_json::from_str(&first) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("gauge: bad request: {e}");
            return ExitCode::from(2);
        }
    };
    reply(kscale_workloads::machine_probe::take(&req).and_then(|r| Ok(serde_json::to_string(&r)?)))
}

/// A worker's answer: its one line on stdout, or its error on stderr and
/// status 1.
fn reply(line: anyhow::Result<String>) -> ExitCode {
    match line {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e:#}");
            ExitCode::from(1)
        }
    }
}

/// Fault injection for kscale's own tests of crash and hang handling:
/// `KSCALE_FAULT=crash:WORKLOAD` or `hang:WORKLOAD`, optionally narrowed to
/// one role of a macro workload (`crash:net.tcp_rr:server`). A crashing role
/// dies a moment after it started, in the middle of the trial; a hanging one
/// never answers.
fn inject_fault(workload: &str, role: Option<&str>) {
    let Ok(spec) = std::env::var("KSCALE_FAULT") else {
        return;
    };
    let mut parts = spec.split(':');
    let (Some(kind), Some(w)) = (parts.next(), parts.next()) else {
        return;
    };
    let for_role = parts.next();
    if w != workload || (for_role.is_some() && for_role != role) {
        return;
    }
    match (kind, role) {
        ("crash", None) => std::process::abort(),
        ("crash", Some(_)) => {
            std::thread::spawn(|| {
                std::thread::sleep(std::time::Duration::from_millis(300));
                std::process::abort()
            });
        }
        ("hang", _) => loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        },
        _ => {}
    }
}
