//! Process hygiene for workers and the servers they start: die with the
//! parent, and be killable as a whole process group.

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::path::Path;

/// Asks the kernel to SIGKILL this process when its parent thread dies, so a
/// worker can never outlive a killed kscale. Also re-checks the parent after
/// setting it, closing the race where the parent died before the call.
pub fn die_with_parent() {
    // SAFETY: prctl(PR_SET_PDEATHSIG) takes plain integers and touches no memory.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    }
    if nix::unistd::getppid() == Pid::from_raw(1) {
        std::process::exit(1);
    }
}

/// SIGKILLs every process of a process group; a group that is already gone is
/// not an error.
pub fn kill_group(pgid: i32) {
    if pgid > 1 {
        let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
    }
}

/// Is a process with this pid still there (zombies count as there)?
pub fn alive(pid: i32) -> bool {
    pid > 0 && nix::sys::signal::kill(Pid::from_raw(pid), None).is_ok()
}

/// Names the calling thread (and so a single-threaded process) as `ps`,
/// `top` and perf's samples show it; the kernel keeps 15 bytes.
pub fn set_name(name: &str) {
    let mut buf = [0u8; 16];
    for (b, c) in buf.iter_mut().zip(name.bytes().take(15)) {
        *b = c;
    }
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes
    // from a buffer that lives across the call.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, buf.as_ptr() as libc::c_ulong, 0, 0, 0);
    }
}

/// Another kscale process measuring on this machine: its pid and command
/// line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OtherRun {
    pub pid: i32,
    pub cmdline: String,
}

/// The sub-commands that measure: two of them at once on one machine
/// measure each other.
const MEASURING: &[&str] = &["run", "study", "check", "tune", "fleet", "vm"];

/// Whether a command line is a measuring kscale's: its program is named
/// `kscale` and its first word that is not an option is a measuring
/// sub-command (`kscale --db x.db study --quick`).
pub fn is_measuring(argv: &[String]) -> bool {
    let Some(prog) = argv.first() else {
        return false;
    };
    if Path::new(prog).file_name().and_then(|n| n.to_str()) != Some("kscale") {
        return false;
    }
    let mut words = argv[1..].iter();
    while let Some(w) = words.next() {
        if w == "--db" {
            words.next();
            continue;
        }
        if w.starts_with('-') {
            continue;
        }
        return MEASURING.contains(&w.as_str());
    }
    false
}

/// Every other measuring kscale process on this machine (not this process
/// nor its ancestors: `kscale fleet` runs `kscale run` under itself).
/// `KSCALE_OTHER_RUNS=ignore` looks for none: for a harness that runs
/// kscales in parallel on purpose (kscale's own tests).
pub fn other_runs() -> Vec<OtherRun> {
    if std::env::var("KSCALE_OTHER_RUNS").is_ok_and(|v| v == "ignore") {
        return Vec::new();
    }
    let me = std::process::id() as i32;
    let mut mine = vec![me];
    let mut pid = me;
    while let Some(pp) = parent_of(pid).filter(|&p| p > 1) {
        mine.push(pp);
        pid = pp;
    }
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out: Vec<OtherRun> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| !mine.contains(p))
        .filter_map(|p| {
            let raw = std::fs::read(format!("/proc/{p}/cmdline")).ok()?;
            let argv: Vec<String> = raw
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            is_measuring(&argv).then(|| OtherRun {
                pid: p,
                cmdline: argv.join(" "),
            })
        })
        // A child of another measuring kscale is that run, said once.
        .collect();
    out.sort_by_key(|o| o.pid);
    out
}

fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: the fields follow
    // the last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Makes the command's process SIGKILLed when the thread that spawns it
/// dies (the kill-with-parent of [`die_with_parent`], for programs that
/// are not kscale, such as QEMU). Spawn it from a thread that outlives it.
pub fn kill_with_parent(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as i32;
    // SAFETY: the closure runs between fork and exec and calls only
    // prctl and getppid, both async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// A shell that outlives kscale by a moment: when kscale's end of its
/// pipe closes — kscale ended, however, SIGKILL included — it SIGKILLs
/// the process it was last told of and removes a directory. What the
/// kernel's kill-with-parent cannot do (remove files) it does, and it
/// backs that up for the process.
pub struct Guardian {
    child: std::process::Child,
    pipe: Option<std::process::ChildStdin>,
}

impl Guardian {
    /// Watches `dir`, removed however kscale ends.
    pub fn start(dir: &Path) -> std::io::Result<Guardian> {
        use std::os::unix::process::CommandExt;
        use std::process::{Command, Stdio};
        let mut child = Command::new("/bin/sh")
            .arg("-c")
            .arg(
                r#"p=0; while read -r l; do p=$l; done; [ "$p" -gt 1 ] && kill -9 "$p" 2>/dev/null; rm -rf "$1""#,
            )
            .arg("kscale-guardian")
            .arg(dir)
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let pipe = child.stdin.take();
        Ok(Guardian { child, pipe })
    }

    /// The process to kill should kscale die now (0: none).
    pub fn watch(&mut self, pid: u32) {
        use std::io::Write;
        if let Some(p) = self.pipe.as_mut() {
            let _ = writeln!(p, "{pid}");
        }
    }
}

impl Drop for Guardian {
    fn drop(&mut self) {
        self.watch(0);
        // The pipe's end: the guardian removes the directory and exits.
        drop(self.pipe.take());
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn measuring_command_lines() {
        assert!(is_measuring(&v("kscale study --quick")));
        assert!(is_measuring(&v(
            "/usr/bin/kscale --db /tmp/x.db run syscall"
        )));
        assert!(is_measuring(&v(
            "target/release/kscale check --baseline a x"
        )));
        assert!(!is_measuring(&v("kscale show latest")));
        assert!(!is_measuring(&v("kscale --db run results")));
        assert!(!is_measuring(&v("/proc/self/exe __worker")));
        assert!(!is_measuring(&v("cargo run --release -- study --quick")));
        assert!(!is_measuring(&[]));
    }

    #[test]
    fn this_process_is_not_another_run() {
        let me = std::process::id() as i32;
        assert!(other_runs().iter().all(|o| o.pid != me));
        assert!(parent_of(me).is_some_and(|p| p > 0));
    }
}
