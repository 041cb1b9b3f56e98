//! `kscale fleet` with network namespaces as hosts: each runs Debian's
//! sshd on its own veth address, with host and user keys made here, and the
//! fleet runs in one of them. Three hosts, one unreachable on purpose; the
//! two others measure and compare side by side. Ctrl-C leaves no remote
//! process or scratch directory.

mod common;
use common::netns::{Netns, Pair};
use common::{skip, wait_for, Env};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

const SSHD: &str = "/usr/sbin/sshd";

/// An sshd started by this test in a namespace; killed by its pid.
struct Sshd(Child);

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Lab {
    pair: Pair,
    _sshd: Vec<Sshd>,
    env: Env,
    ssh_config: PathBuf,
    remote: PathBuf,
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn keygen(path: &Path) -> Result<(), String> {
    run(Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path))
}

fn start_sshd(ns: &Netns, ip: &str, dir: &Path) -> Result<Sshd, String> {
    let conf = dir.join(format!("sshd-{ip}.conf"));
    std::fs::write(
        &conf,
        format!(
            "ListenAddress {ip}:22\nHostKey {d}/host_key\nPidFile {d}/sshd-{ip}.pid\n\
             AuthorizedKeysFile {d}/authorized_keys\nStrictModes no\n\
             PermitRootLogin prohibit-password\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nUsePAM no\nLogLevel ERROR\n",
            d = dir.display()
        ),
    )
    .map_err(|e| e.to_string())?;
    // sshd refuses to start without its privilege separation directory.
    let _ = std::fs::create_dir_all("/run/sshd");
    let child = ns
        .command(Path::new(SSHD))
        .arg("-D")
        .arg("-e")
        .arg("-f")
        .arg(&conf)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("sshd: {e}"))?;
    Ok(Sshd(child))
}

/// Two namespace hosts with sshd, or why not.
fn lab(tag: &str) -> Option<Lab> {
    let set_up = || -> Result<Lab, String> {
        if !Path::new(SSHD).exists() {
            return Err(format!("{SSHD} is not installed (openssh-server)"));
        }
        let pair = Pair::new(tag).map_err(|e| format!("network namespaces refused: {e}"))?;
        let env = Env::new();
        let d = env.path().to_path_buf();
        keygen(&d.join("host_key"))?;
        keygen(&d.join("id"))?;
        std::fs::copy(d.join("id.pub"), d.join("authorized_keys")).map_err(|e| e.to_string())?;
        let host_pub =
            std::fs::read_to_string(d.join("host_key.pub")).map_err(|e| e.to_string())?;
        std::fs::write(
            d.join("known_hosts"),
            format!("{} {host_pub}{} {host_pub}", pair.a_ip, pair.b_ip),
        )
        .map_err(|e| e.to_string())?;
        let ssh_config = d.join("ssh_config");
        std::fs::write(
            &ssh_config,
            format!(
                "Host *\n  User root\n  IdentityFile {d}/id\n  IdentitiesOnly yes\n  \
                 UserKnownHostsFile {d}/known_hosts\n  GlobalKnownHostsFile /dev/null\n  \
                 StrictHostKeyChecking yes\n  LogLevel ERROR\n",
                d = d.display()
            ),
        )
        .map_err(|e| e.to_string())?;
        let sshd = vec![
            start_sshd(&pair.a, &pair.a_ip, &d)?,
            start_sshd(&pair.b, &pair.b_ip, &d)?,
        ];
        // Ready when a login works from where the fleet runs.
        for ip in [&pair.a_ip, &pair.b_ip] {
            let login = || {
                pair.a
                    .command(Path::new("/usr/bin/ssh"))
                    .arg("-F")
                    .arg(&ssh_config)
                    .args(["-o", "BatchMode=yes", ip, "true"])
                    .stdin(Stdio::null())
                    .output()
                    .is_ok_and(|o| o.status.success())
            };
            if !wait_for(login, 10) {
                return Err(format!("cannot log in to the test sshd at {ip}"));
            }
        }
        let remote = d.join("remote");
        Ok(Lab {
            pair,
            _sshd: sshd,
            env,
            ssh_config,
            remote,
        })
    };
    match set_up() {
        Ok(l) => Some(l),
        Err(e) => {
            skip(&e);
            None
        }
    }
}

impl Lab {
    /// `kscale fleet` inside namespace a, with the test's ssh config.
    fn fleet(&self, hosts: &str, rest: &[&str]) -> Command {
        let mut c = self.pair.a.kscale(&self.env, None);
        c.args(["fleet", "--hosts", hosts, "--ssh-config"])
            .arg(&self.ssh_config)
            .arg("--remote-dir")
            .arg(&self.remote)
            .args(rest);
        c
    }

    /// Processes of remote runs: their command lines name the scratch dir
    /// (the run, its workers, the shell around it) or they work in it (the
    /// watchdog on ssh's input).
    fn remote_processes(&self) -> Vec<i32> {
        let needle = self.remote.to_string_lossy().into_owned();
        let mut out = Vec::new();
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let cwd = std::fs::read_link(e.path().join("cwd")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(&needle) || cwd.starts_with(&self.remote)
            {
                out.push(pid);
            }
        }
        out
    }

    fn remote_entries(&self) -> Vec<String> {
        std::fs::read_dir(&self.remote)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    }
}

#[test]
fn two_namespace_hosts_and_an_unreachable_one() {
    let Some(lab) = lab("fl") else { return };
    let (a, b) = (
        format!("root@{}", lab.pair.a_ip),
        format!("root@{}", lab.pair.b_ip),
    );
    let dead = format!("root@{}:2299", lab.pair.b_ip);
    let out = lab
        .fleet(
            &format!("{a},{b},{dead}"),
            &[
                "--compare",
                "syscall.null",
                "syscall.read",
                "--cpus",
                "1",
                "--quick",
            ],
        )
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    eprintln!("{stdout}{stderr}");
    // One host failed, so the fleet did not fully succeed.
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!("{dead}  FAILED: unreachable")),
        "{stdout}"
    );
    assert!(
        stderr.contains(&format!("1 of 3 hosts failed: {dead}")),
        "{stderr}"
    );
    for h in [&a, &b] {
        let done = format!("({h}): 2 cases, 0 failed, complete");
        assert!(stdout.lines().any(|l| l.contains(&done)), "{stdout}");
    }
    // Side by side: a column per host, and the ratio column.
    let table = stdout
        .lines()
        .find(|l| l.contains("Simple syscall"))
        .unwrap_or("");
    assert!(!table.is_empty(), "no comparison in {stdout}");
    assert!(
        stdout.contains(&a) && stdout.contains(&b) && stdout.contains('/'),
        "{stdout}"
    );

    // Both runs are here under their hosts' names, and compare like local ones.
    lab.env.cmd(&["compare", &a, &b]).assert().success();
    let exp = lab.env.export(&b);
    assert_eq!(exp["run"]["label"], b.as_str());
    assert!(exp["cases"][0]["trials"]
        .as_array()
        .is_some_and(|t| t.len() >= 3));
    // Nothing is left on the hosts.
    assert!(
        lab.remote_entries().is_empty(),
        "{:?}",
        lab.remote_entries()
    );
    assert!(lab.remote_processes().is_empty());
}

#[test]
fn ctrl_c_stops_every_remote_run() {
    let Some(lab) = lab("fc") else { return };
    let hosts = format!("root@{},root@{}", lab.pair.a_ip, lab.pair.b_ip);
    let mut child = lab
        .fleet(
            &hosts,
            &[
                "--no-progress",
                "syscall",
                "--cpus",
                "1",
                "--min-trials",
                "30",
                "--max-trials",
                "30",
            ],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Both remote runs are measuring: each has a worker under its scratch dir.
    let running = wait_for(|| lab.remote_processes().len() >= 4, 30);
    let mid_run = lab.remote_processes();
    // `ip netns exec` became kscale: its pid is the fleet's.
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    );
    let status = child.wait().unwrap();
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut err);
    }
    assert!(running, "remote runs never started: {mid_run:?} {err}");
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    assert!(
        wait_for(|| lab.remote_processes().is_empty(), 10),
        "left running: {:?}",
        lab.remote_processes()
            .iter()
            .map(|p| (*p, common::comm(*p)))
            .collect::<Vec<_>>()
    );
    // The remote side removes its directory as it exits, after its
    // processes are gone: give it the same time.
    assert!(
        wait_for(|| lab.remote_entries().is_empty(), 10),
        "{:?}",
        lab.remote_entries()
    );
}

#[test]
fn bad_hosts_are_one_line_and_status_2() {
    let env = Env::new();
    // Nothing listens on port 1 here: the only host cannot be reached.
    let out = env
        .cmd(&[
            "fleet",
            "--hosts",
            "root@127.0.0.1:1",
            "syscall.null",
            "--quick",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let last = err.lines().last().unwrap_or("");
    assert!(
        last.contains("no host could be reached: root@127.0.0.1:1 (unreachable"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");

    let f = env.path().join("hosts");
    std::fs::write(&f, "# lab\nlab1\nlab 2\n").unwrap();
    let out = env
        .cmd(&["fleet", "--hosts-file"])
        .arg(&f)
        .args(["syscall.null"])
        .output()
        .unwrap();
    common::assert_refused(&out, "`lab 2`", "hosts file");
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 3"));

    for (args, why) in [
        (vec!["--hosts", "h1", "nosuch"], "unknown workload"),
        (vec!["--hosts", "-oProxyCommand=x", "syscall"], "bad host"),
        (vec!["--hosts", "h1,h1", "syscall"], "named twice"),
        (vec!["--hosts", "h1", "syscall", "--dir", "/x"], "--dir"),
    ] {
        let out = env.cmd(&["fleet"]).args(&args).output().unwrap();
        common::assert_refused(&out, why, &format!("{args:?}"));
    }
}

/// On a terminal the remote runs' progress arrives as one line per host:
/// the remote bar's message (the case and trial) appears under the host's
/// name.
#[test]
fn progress_streams_into_one_display() {
    if !Path::new("/usr/bin/script").exists() {
        skip("no /usr/bin/script (bsdutils) to give the fleet a terminal");
        return;
    }
    let Some(lab) = lab("fp") else { return };
    let host = format!("root@{}", lab.pair.b_ip);
    let fleet = lab.fleet(&host, &["syscall.null", "--cpus", "1", "--quick"]);
    // `script` runs the same command line on a pseudo-terminal.
    let line: Vec<String> = std::iter::once(fleet.get_program())
        .chain(fleet.get_args())
        .map(|a| format!("'{}'", a.to_string_lossy().replace('\'', r"'\''")))
        .collect();
    let out = Command::new("/usr/bin/script")
        .args(["-qefc", &line.join(" "), "/dev/null"])
        .current_dir(lab.env.path())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let progress: Vec<&str> = text
        .split(['\r', '\n'])
        .filter(|l| l.contains(&host) && l.contains("trials") && l.contains("syscall.null"))
        .collect();
    assert!(
        progress.iter().any(|l| l.contains("[cpus 1]")),
        "no streamed progress in {text:?}"
    );
}

/// A host without room for kscale is refused before anything is copied,
/// and it costs that host, not a bad-input exit.
#[test]
fn a_host_without_space_is_refused() {
    // Mounted before the hosts' sshd start, so their mount namespaces
    // (made by `ip netns exec`) have it too.
    let small = tempfile::tempdir().unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "kscale-test"])
        .arg(small.path())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        skip("cannot mount a small tmpfs");
        return;
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(small.path().to_path_buf());
    let Some(mut lab) = lab("fs") else { return };
    lab.remote = small.path().to_path_buf();
    let host = format!("root@{}", lab.pair.b_ip);
    let out = lab
        .fleet(&host, &["syscall.null", "--quick"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(&format!("{host}  FAILED: lacks space")),
        "{stdout}"
    );
    assert!(
        lab.remote_entries().is_empty(),
        "{:?}",
        lab.remote_entries()
    );
}
