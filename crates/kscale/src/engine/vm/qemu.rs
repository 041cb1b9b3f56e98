//! One QEMU boot. QEMU runs in a process group of its own, registered
//! with the signal handler (Ctrl-C kills it and the run unwinds), is
//! SIGKILLed by the kernel should kscale die (PDEATHSIG), and is named to
//! the scratch directory's guardian, which kills it too and removes the
//! directory when kscale is gone (SIGKILL included).

use crate::error::user;
use crate::signals;
use anyhow::Result;
use kscale_sys::process::Guardian;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::Vcpus;

/// How the guest's CPUs run: on the host's, or in QEMU's translator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accel {
    Kvm,
    Tcg,
}

impl Accel {
    /// As stored with a run and printed in tables.
    pub fn name(self) -> &'static str {
        match self {
            Accel::Kvm => "KVM",
            Accel::Tcg => "TCG",
        }
    }

    pub fn words(self) -> &'static str {
        match self {
            Accel::Kvm => "KVM",
            Accel::Tcg => "emulated (TCG): not the kernel's speed",
        }
    }

    fn args(self) -> [&'static str; 4] {
        match self {
            Accel::Kvm => ["-accel", "kvm", "-cpu", "host"],
            // `max`: every feature TCG emulates, so a kernel built for a
            // recent CPU boots.
            Accel::Tcg => ["-accel", "tcg", "-cpu", "max"],
        }
    }

    /// How long a boot may take to reach init: a KVM boot reaches it in a
    /// second or two, so one that has not in 20 s hangs (nested KVM here
    /// hangs in the decompressor); emulation is ten times slower and may
    /// share two cores with a test suite.
    pub fn init_deadline(self) -> Duration {
        match self {
            Accel::Kvm => Duration::from_secs(20),
            Accel::Tcg => Duration::from_secs(180),
        }
    }
}

/// `$KSCALE_QEMU`, else `qemu-system-x86_64` on the PATH.
pub fn find() -> Result<PathBuf> {
    if std::env::consts::ARCH != "x86_64" {
        return Err(user(format!(
            "kscale vm boots x86-64 kernels; this machine is {}",
            std::env::consts::ARCH
        )));
    }
    if let Some(p) = std::env::var_os("KSCALE_QEMU").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(user(format!(
                "KSCALE_QEMU={}: no such file (unset it to use qemu-system-x86_64 from the PATH)",
                p.display()
            )))
        };
    }
    which("qemu-system-x86_64").ok_or_else(|| {
        user("QEMU is not installed: no qemu-system-x86_64 on the PATH (Debian: apt-get install qemu-system-x86)")
    })
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Whether this process may use KVM, or why not.
pub fn kvm_usable() -> Result<(), String> {
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err("KVM: no /dev/kvm (no hardware virtualisation, or its module is not loaded)".into())
        }
        Err(e) => Err(format!("KVM: cannot open /dev/kvm: {e}")),
    }
}

pub struct BootSpec<'a> {
    pub qemu: &'a Path,
    pub kernel: &'a Path,
    pub initrd: &'a Path,
    /// The file QEMU writes the guest's second serial port to.
    pub results: &'a Path,
    pub accel: Accel,
    pub vcpus: Vcpus,
    pub memory_mb: u32,
    pub init_deadline: Duration,
    pub timeout: Duration,
    /// How the boot is named in the lines echoed from its console.
    pub name: &'a str,
}

/// How a boot ended.
#[derive(Debug)]
pub enum Ended {
    /// The guest powered off after init ran.
    Done,
    /// Init was not reached: QEMU failed or the kernel hung (why, with
    /// the console's last line).
    NoInit(String),
    /// Init ran but the guest did not end as it should (why).
    Failed(String),
    Interrupted(i32),
}

/// The kernel's command line: the console on the first serial port, a
/// panic (init dying) ends the boot at once, and `nosmp` for a UP boot.
/// Under emulation the guest's run takes no gauge ([`super::guest::NO_GAUGE`]).
pub fn cmdline(vcpus: Vcpus, accel: Accel) -> String {
    let mut s = String::from("console=ttyS0 panic=-1 loglevel=4 rdinit=/init");
    if vcpus == Vcpus::Up {
        s.push_str(" nosmp maxcpus=1");
    }
    if accel == Accel::Tcg {
        s.push(' ');
        s.push_str(super::guest::NO_GAUGE);
    }
    s
}

fn command(s: &BootSpec) -> Command {
    let mut c = Command::new(s.qemu);
    c.args(s.accel.args())
        .arg("-smp")
        .arg(s.vcpus.count().to_string())
        .arg("-m")
        .arg(s.memory_mb.to_string())
        .args(["-nodefaults", "-display", "none", "-no-reboot"])
        .args(["-serial", "stdio", "-serial"])
        .arg(format!("file:{}", s.results.display()))
        .arg("-kernel")
        .arg(s.kernel)
        .arg("-initrd")
        .arg(s.initrd)
        .arg("-append")
        .arg(cmdline(s.vcpus, s.accel))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// The guest's console, line by line, from a thread (QEMU's stdout and
/// stderr both).
fn read_lines(r: impl std::io::Read + Send + 'static, tx: mpsc::Sender<String>) {
    std::thread::spawn(move || {
        for line in BufReader::new(r).split(b'\n').map_while(|l| l.ok()) {
            let text = String::from_utf8_lossy(&line)
                .trim_end_matches('\r')
                .to_string();
            if tx.send(text).is_err() {
                return;
            }
        }
    });
}

/// What the host has seen of a guest's console.
struct Console<'a> {
    name: &'a str,
    tail: VecDeque<String>,
    in_init: bool,
}

impl Console<'_> {
    /// Takes one line: the init's mark, a line of the guest's kscale
    /// (echoed), or kernel text (kept for a failure's message).
    fn take(&mut self, line: String) {
        if line.starts_with(super::guest::INIT_MARK) {
            self.in_init = true;
        } else if self.in_init && line.starts_with("kscale") {
            eprintln!("  [{}] {line}", self.name);
        }
        if !line.trim().is_empty() {
            self.tail.push_back(line);
            if self.tail.len() > 20 {
                self.tail.pop_front();
            }
        }
    }

    fn last(&self) -> String {
        self.tail
            .back()
            .map_or("the console stayed silent".to_string(), |l| {
                format!("its console's last line: {l:?}")
            })
    }
}

/// Boots `s` to its end. Lines the guest's kscale prints are echoed,
/// prefixed by the boot's name; the rest of the console is kept for the
/// message of a boot that fails.
pub fn boot(s: &BootSpec, guardian: &mut Guardian) -> Result<Ended> {
    use std::os::unix::process::CommandExt;
    let mut cmd = command(s);
    cmd.process_group(0);
    kscale_sys::process::kill_with_parent(&mut cmd);
    let mut child = cmd
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start {}: {e}", s.qemu.display()))?;
    guardian.watch(child.id());
    let _registered = signals::Registered::new(child.id() as i32);
    let (tx, rx) = mpsc::channel();
    if let Some(o) = child.stdout.take() {
        read_lines(o, tx.clone());
    }
    if let Some(e) = child.stderr.take() {
        read_lines(e, tx);
    }
    let started = Instant::now();
    let mut console = Console {
        name: s.name,
        tail: VecDeque::new(),
        in_init: false,
    };
    let ended = loop {
        if let Some(sig) = signals::interrupted() {
            break Ended::Interrupted(sig);
        }
        while let Ok(line) = rx.try_recv() {
            console.take(line);
        }
        match child.try_wait() {
            Ok(Some(st)) => {
                // The console's last lines before judging the end.
                while let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
                    console.take(line);
                }
                let last = console.last();
                break match (console.in_init, st.success()) {
                    (true, true) => Ended::Done,
                    (true, false) => Ended::Failed(format!("QEMU exited with {st}; {last}")),
                    (false, _) => Ended::NoInit(format!(
                        "QEMU exited with {st}; {}",
                        hang_words(&console.tail, &last)
                    )),
                };
            }
            Ok(None) => {}
            Err(e) => break Ended::Failed(format!("waiting for QEMU: {e}")),
        }
        let now = started.elapsed();
        if !console.in_init && now > s.init_deadline {
            break Ended::NoInit(format!(
                "the kernel did not reach init within {} s ({})",
                s.init_deadline.as_secs(),
                hang_words(&console.tail, &console.last())
            ));
        }
        if now > s.timeout {
            break Ended::Failed(format!(
                "the boot took more than its {} s timeout (--timeout); {}",
                s.timeout.as_secs(),
                console.last()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = child.kill();
    let _ = child.wait();
    guardian.watch(0);
    Ok(ended)
}

/// What a boot that never reached init shows of where it stopped: a
/// kernel whose last words are its decompressor's hangs there (nested
/// KVM on some hosts).
fn hang_words(tail: &VecDeque<String>, last: &str) -> String {
    if tail.iter().any(|l| l.contains("kvm_buf_set_msrs")) {
        return format!(
            "QEMU aborts setting the vCPU's MSRs (nested KVM that refuses the host CPU's); {last}"
        );
    }
    let decompressor = tail.iter().any(|l| {
        l.contains("KASLR") || l.contains("Decompressing Linux") || l.contains("Parsing ELF")
    }) && !tail.iter().any(|l| l.starts_with('['));
    if decompressor {
        let nested = std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|c| {
            c.lines()
                .any(|l| l.starts_with("flags") && l.contains(" hypervisor"))
        });
        format!(
            "the kernel hangs in its decompressor{}; {last}",
            if nested { " (nested)" } else { "" }
        )
    } else {
        last.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_up_boot_tells_the_kernel() {
        assert!(cmdline(Vcpus::Up, Accel::Kvm).contains("nosmp"));
        assert!(!cmdline(Vcpus::Smp(2), Accel::Kvm).contains("nosmp"));
        assert!(cmdline(Vcpus::Smp(1), Accel::Kvm).contains("console=ttyS0"));
        assert!(cmdline(Vcpus::Smp(1), Accel::Tcg).contains(crate::engine::vm::guest::NO_GAUGE));
    }

    #[test]
    fn a_silent_kernel_after_its_decompressor_hangs_there() {
        let tail: VecDeque<String> = [
            "early console in setup code",
            "KASLR disabled: 'nokaslr' on cmdline.",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert!(hang_words(&tail, "x").contains("decompressor"));
        let booted: VecDeque<String> = ["KASLR disabled", "[    0.000000] Linux version 6.1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!(!hang_words(&booted, "x").contains("decompressor"));
    }
}
