//! kscale as init of a guest `kscale vm` booted (docs/vm.md): it mounts
//! what a run needs, runs the asked `run` or `study` as a child on a store
//! in the guest's memory, sends every run's export to the host on the
//! second serial port, and powers the guest off. PID 1 must never exit
//! (the kernel would panic), so every failure is sent as a line and the
//! guest still powers off.

use crate::engine::vm::guest::{self, Config};
use std::io::Write;
use std::process::{Command, ExitCode};

/// The guest's store, on the tmpfs.
const DB: &str = "/tmp/kscale.db";

/// Whether this process is a guest's init: PID 1 with the guest's
/// configuration beside it. A container's PID 1 has no such file.
pub fn is_guest_init() -> bool {
    std::process::id() == 1 && std::path::Path::new(guest::CONFIG_PATH).exists()
}

/// Only ever called where [`is_guest_init`] holds: it powers the machine
/// off.
pub fn main() -> ExitCode {
    if !is_guest_init() {
        eprintln!("kscale: not a guest's init; nothing done");
        return ExitCode::from(2);
    }
    println!("{} {}", guest::INIT_MARK, crate::engine::VERSION);
    let probe = std::fs::read_to_string(guest::CONFIG_PATH)
        .ok()
        .and_then(|t| serde_json::from_str::<Config>(&t).ok())
        .is_some_and(|c| c.probe);
    if probe {
        let _ = std::io::stdout().flush();
        println!("kscale-vm: {}", kscale_sys::guest::power_off());
    }
    let outcome = serve();
    let port = kscale_sys::guest::raw_serial(guest::RESULTS_PORT);
    match (outcome, port) {
        (Ok((runs, status)), Ok(mut f)) => {
            if let Err(e) = guest::write_results(&mut f, &runs, status) {
                println!("kscale-vm: cannot send the results: {e}");
            }
            kscale_sys::guest::drain(&f);
        }
        (Err(why), Ok(mut f)) => {
            println!("kscale-vm: {why}");
            let _ = guest::write_error(&mut f, &why);
            kscale_sys::guest::drain(&f);
        }
        (_, Err(e)) => println!("kscale-vm: no port for the results: {e}"),
    }
    let _ = std::io::stdout().flush();
    println!("kscale-vm: {}", kscale_sys::guest::power_off());
    // Power-off refused: hold on rather than panic the kernel.
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}

/// Mounts, runs the guest command, and exports its runs.
fn serve() -> Result<(Vec<serde_json::Value>, i32), String> {
    kscale_sys::guest::mount_basics()?;
    if let Err(e) = kscale_sys::guest::loopback_up() {
        println!("kscale-vm: the loopback workloads will fail: {e}");
    }
    let text = std::fs::read_to_string(guest::CONFIG_PATH)
        .map_err(|e| format!("{}: {e}", guest::CONFIG_PATH))?;
    let config: Config =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", guest::CONFIG_PATH))?;
    let _ = kscale_sys::guest::set_hostname(&config.hostname);
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    let no_gauge = cmdline.split_whitespace().any(|w| w == guest::NO_GAUGE);
    let mut child = Command::new("/bin/kscale");
    if no_gauge {
        child.env("KSCALE_NO_GAUGE", "1");
    }
    let mut child = child
        .arg("--db")
        .arg(DB)
        .args(&config.argv)
        .current_dir("/tmp")
        .env("PATH", "/bin:/usr/bin:/sbin:/usr/sbin")
        .env("HOME", "/root")
        .env("TMPDIR", "/tmp")
        .env("NO_COLOR", "1")
        .env("TERM", "dumb")
        .spawn()
        .map_err(|e| format!("cannot start kscale: {e}"))?;
    let pid = child.id() as i32;
    // As init, orphans are ours to reap too; the child's status is the
    // one that counts.
    let status = loop {
        match nix::sys::wait::waitpid(None, None) {
            Ok(nix::sys::wait::WaitStatus::Exited(p, code)) if p.as_raw() == pid => break code,
            Ok(nix::sys::wait::WaitStatus::Signaled(p, sig, _)) if p.as_raw() == pid => {
                break 128 + sig as i32
            }
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(format!("waiting for kscale: {e}")),
        }
    };
    // Reaped above: the handle must not wait again.
    let _ = child.try_wait();
    let store = kscale_store::Store::open(std::path::Path::new(DB))
        .map_err(|e| format!("the guest's store: {e}"))?;
    let mut runs = Vec::new();
    for r in store
        .runs()
        .map_err(|e| format!("the guest's store: {e}"))?
    {
        runs.push(
            super::export::run_json(&store, r.id)
                .map_err(|e| format!("export run {}: {e:#}", r.id))?,
        );
    }
    Ok((runs, status))
}
