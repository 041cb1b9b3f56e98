//! Worker processes: every trial, and every role of a macro trial, runs in
//! a re-executed `kscale __worker` of its own process group, registered
//! with the signal handler so that Ctrl-C or a timeout kills the whole group.

use crate::signals;
use kscale_workloads::{TrialOutput, TrialRequest};
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// This binary, for re-executing workers. /proc/self/exe still reaches its
/// inode after the file has been replaced (e.g. a rebuild during a long
/// run); the path would not.
pub fn self_exe() -> Result<std::path::PathBuf, String> {
    if std::path::Path::new("/proc/self/exe").exists() {
        Ok(std::path::PathBuf::from("/proc/self/exe"))
    } else {
        std::env::current_exe().map_err(|e| format!("cannot find the kscale binary: {e}"))
    }
}

/// Starts `kscale __worker` in its own process group with piped stdio,
/// registered so a signal to kscale kills its group, and writes `req` to its
/// stdin as one JSON line. Stdin stays open: a role worker takes further
/// messages there; a plain worker's caller closes it.
pub fn spawn_worker(
    req: &TrialRequest,
) -> Result<(std::process::Child, signals::Registered), String> {
    use std::os::unix::process::CommandExt;
    let mut child = Command::new(self_exe()?)
        .arg("__worker")
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start a worker: {e}"))?;
    let registered = signals::Registered::new(child.id() as i32);
    let mut body = serde_json::to_vec(req).map_err(|e| e.to_string())?;
    body.push(b'\n');
    if let Some(stdin) = child.stdin.as_mut() {
        let _ = stdin.write_all(&body);
        let _ = stdin.flush();
    }
    Ok((child, registered))
}

/// Starts a worker for `req` and waits at most `timeout`. The whole group is
/// killed afterwards so no server or grandchild survives the trial.
pub fn run_worker(req: &TrialRequest, timeout: Duration) -> Result<TrialOutput, String> {
    let (mut child, _registered) = spawn_worker(req)?;
    let pid = child.id() as i32;
    drop(child.stdin.take());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let output = match rx.recv_timeout(timeout) {
        Ok(o) => o.map_err(|e| format!("waiting for worker: {e}"))?,
        Err(_) => {
            kscale_sys::process::kill_group(pid);
            let _ = rx.recv_timeout(Duration::from_secs(10));
            return Err(format!(
                "timed out after {:.0} s and was killed",
                timeout.as_secs_f64()
            ));
        }
    };
    if output.status.success() {
        let text = String::from_utf8_lossy(&output.stdout);
        let line = text.lines().last().unwrap_or("");
        return serde_json::from_str(line)
            .map_err(|e| format!("worker sent a bad reply ({e}): {line:?}"));
    }
    use std::os::unix::process::ExitStatusExt;
    let stderr = String::from_utf8_lossy(&output.stderr);
    let last = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string();
    Err(match output.status.signal() {
        Some(sig) => format!(
            "worker killed by signal {sig}{}",
            if last.is_empty() {
                String::new()
            } else {
                format!(": {last}")
            }
        ),
        None => {
            if last.is_empty() {
                format!(
                    "worker exited with status {}",
                    output.status.code().unwrap_or(-1)
                )
            } else {
                last
            }
        }
    })
}
