#![allow(dead_code)]
use assert_cmd::Command;
use std::path::{Path, PathBuf};

pub fn kscale() -> Command {
    let mut c = Command::cargo_bin("kscale").expect("kscale binary");
    // The tests run kscale in parallel on purpose: each run would warn of
    // the others (tests/concurrent.rs tests that warning itself).
    c.env_remove("KSCALE_DB")
        .env("NO_COLOR", "1")
        .env("KSCALE_OTHER_RUNS", "ignore");
    c
}

pub fn bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("kscale")
}

/// Three workloads on two configurations: enough trials to be stopped
/// midway.
pub const SLOW_RUN: &[&str] = &[
    "run",
    "syscall.null",
    "syscall.read",
    "syscall.write",
    "--cpus",
    "1,all",
    "--quick",
    "--trial-time",
    "0.05",
    "--no-progress",
];

/// `syscall.null` in quick, 20 ms trials on CPU 1, without the progress
/// line: the cheapest case there is, for tests of what is done around a
/// run rather than of its figures.
pub const TINY_NULL: &[&str] = &[
    "syscall.null",
    "--quick",
    "--trial-time",
    "0.02",
    "--cpus",
    "1",
    "--no-progress",
];

/// `run WORKLOAD --param P…` ended after exactly two counted trials and
/// without the progress line: the fewest that still make a result.
pub fn two_trials<'a>(workload: &'a str, params: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["run", workload];
    for p in params {
        args.extend(["--param", p]);
    }
    args.extend(["--min-trials", "2", "--max-trials", "2", "--no-progress"]);
    args
}

/// A short `net.tcp_rr` run on CPU 1 (so the load runs on the other):
/// `conns` and `duration` given as `NAME=VALUE` params, two counted
/// trials.
pub fn short_tcp_rr<'a>(conns: &'a str, duration: &'a str) -> Vec<&'a str> {
    vec![
        "run",
        "net.tcp_rr",
        "--cpus",
        "1",
        "--quick",
        "--param",
        conns,
        "--param",
        duration,
        "--min-trials",
        "2",
        "--max-trials",
        "2",
        "--no-progress",
    ]
}

pub struct Env {
    pub dir: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Env {
        Env {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }
    pub fn db(&self) -> PathBuf {
        self.dir.path().join("k.db")
    }
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
    /// `kscale --db <tmp>/k.db ARGS` run in the temp dir.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = kscale();
        c.current_dir(self.path())
            .arg("--db")
            .arg(self.db())
            .args(args);
        c
    }
    /// `kscale run WHAT… --quick --trial-time 0.02 --cpus CPUS --no-progress
    /// --label LABEL`: tiny trials, for tests of what is done with stored
    /// runs rather than of the figures.
    pub fn tiny_run(&self, what: &[&str], cpus: &str, label: &str) -> Command {
        let mut args = vec!["run"];
        args.extend(what);
        args.extend([
            "--quick",
            "--trial-time",
            "0.02",
            "--cpus",
            cpus,
            "--no-progress",
            "--label",
            label,
        ]);
        self.cmd(&args)
    }
    /// `kscale run WHAT… --cpus 1 --quick EXTRA… --no-progress`: quick
    /// cases on one CPU, for tests of what becomes of the runs.
    pub fn quick_on_cpu1(&self, what: &[&str], extra: &[&str]) -> Command {
        let mut args = vec!["run"];
        args.extend(what);
        args.extend(["--cpus", "1", "--quick"]);
        args.extend(extra);
        args.push("--no-progress");
        self.cmd(&args)
    }
    /// `kscale run web.nginx --quick EXTRA… --no-progress` to the end with
    /// `KSCALE_NGINX` naming `nginx`, where there is none: how a run meets
    /// a machine without the server.
    pub fn run_without_nginx(&self, nginx: &Path, extra: &[&str]) -> std::process::Output {
        let mut args = vec!["run", "web.nginx", "--quick"];
        args.extend(extra);
        args.push("--no-progress");
        self.cmd(&args)
            .env("KSCALE_NGINX", nginx)
            .output()
            .expect("start kscale")
    }
    /// Runs `kscale ARGS` to the end and fails the test, with its stderr,
    /// unless it succeeded.
    pub fn run_ok(&self, args: &[&str]) -> std::process::Output {
        let out = self.cmd(args).output().expect("start kscale");
        assert!(
            out.status.success(),
            "kscale {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }
    /// Starts `kscale ARGS` in the background with `KSCALE_TEST_MARK=mark`
    /// (so [`marked_processes`] finds everything it starts) and its output
    /// discarded: for tests that signal or kill it midway.
    pub fn spawn_marked(&self, mark: &str, args: &[&str]) -> std::process::Child {
        self.marked(mark, args)
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn kscale")
    }
    /// Like [`Env::spawn_marked`] but with stderr kept for
    /// `wait_with_output`.
    pub fn spawn_marked_piped(&self, mark: &str, args: &[&str]) -> std::process::Child {
        self.marked(mark, args)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn kscale")
    }
    fn marked(&self, mark: &str, args: &[&str]) -> std::process::Command {
        let mut c = std::process::Command::new(bin());
        c.current_dir(self.path())
            .env("KSCALE_TEST_MARK", mark)
            .env("NO_COLOR", "1")
            .env("KSCALE_OTHER_RUNS", "ignore")
            .arg("--db")
            .arg(self.db())
            .args(args)
            .stdout(std::process::Stdio::null());
        c
    }
    pub fn export(&self, run: &str) -> serde_json::Value {
        let out = self.run_ok(&["export", run, "--format", "json"]);
        serde_json::from_slice(&out.stdout).expect("json")
    }
    /// The results of `run`'s export.
    pub fn results(&self, run: &str) -> Vec<serde_json::Value> {
        match self.export(run)["results"].take() {
            serde_json::Value::Array(a) => a,
            other => panic!("no results array: {other}"),
        }
    }
    /// [`in_mount_ns`] with the script's arguments `before`, then the kscale
    /// binary and the env's database, then `after`.
    pub fn kscale_in_mount_ns(
        &self,
        what: &str,
        script: &str,
        before: &[&std::path::Path],
        after: &[&str],
    ) -> Option<std::process::Output> {
        let (bin, db) = (bin(), self.db());
        let mut args: Vec<&std::ffi::OsStr> = before.iter().map(|p| p.as_os_str()).collect();
        args.extend([bin.as_os_str(), db.as_os_str()]);
        args.extend(after.iter().map(std::ffi::OsStr::new));
        in_mount_ns(what, script, &args)
    }
    /// Runs `body` (shell, with `$mnt`, `$kscale` and `$db` set) on a fresh
    /// ext4 of `size` bytes made with `mkfs_opts` and mounted with
    /// `mount_opts`, in a mount namespace of its own, unmounted however the
    /// body ends. Returns the output and the image's path (to check that
    /// its loop device went), or `None` after printing why it was skipped.
    pub fn on_fresh_ext4(
        &self,
        name: &str,
        size: u64,
        mkfs_opts: &str,
        mount_opts: &str,
        body: &str,
    ) -> Option<(std::process::Output, PathBuf)> {
        let (img, mnt) = self.image_and_mount_point(name, size);
        let script = format!(
            r#"img=$1 mnt=$2 kscale=$3 db=$4 mkfs_opts=$5 mount_opts=$6
mkfs.ext4 -q -F $mkfs_opts "$img" >&2 || exit 98
mount -o "loop$mount_opts" "$img" "$mnt" || exit 99
trap 'umount "$mnt"' EXIT
{body}"#
        );
        let out = self.kscale_in_mount_ns(
            "cannot make an ext4 loop mount (needs root and loop devices)",
            &script,
            &[&img, &mnt],
            &[mkfs_opts, mount_opts],
        )?;
        Some((out, img))
    }
    /// An empty sparse file of `size` bytes and an empty directory to mount
    /// it on, named after `name` in the env's directory.
    pub fn image_and_mount_point(&self, name: &str, size: u64) -> (PathBuf, PathBuf) {
        let img = self.path().join(format!("{name}.img"));
        let mnt = self.path().join(format!("{name}.mnt"));
        std::fs::create_dir(&mnt).expect("mount point");
        std::fs::File::create(&img)
            .and_then(|f| f.set_len(size))
            .expect("image file");
        (img, mnt)
    }
    /// The roles (which process ran where) stored with the run's first
    /// counted trial.
    pub fn first_trial_roles(&self) -> String {
        rusqlite::Connection::open(self.db())
            .and_then(|db| {
                db.query_row(
                    "SELECT roles FROM trials WHERE warmup = 0 LIMIT 1",
                    [],
                    |r| r.get(0),
                )
            })
            .expect("a counted trial")
    }
    /// The primary results of `run`'s export (one a case).
    pub fn primary(&self, run: &str) -> Vec<serde_json::Value> {
        let mut results = self.results(run);
        results.retain(|r| r["primary"] == true);
        results
    }
    /// `kscale run WHAT… --quick --param P… --no-progress` to the end (see
    /// [`Env::run_ok`]), and the results it stored.
    pub fn run_quick(&self, what: &[&str], params: &[&str]) -> Vec<serde_json::Value> {
        let mut args = vec!["run"];
        args.extend(what);
        args.push("--quick");
        for p in params {
            args.extend(["--param", p]);
        }
        args.push("--no-progress");
        self.run_ok(&args);
        self.results("latest")
    }
    /// What `kscale show RUN` prints on stdout.
    pub fn show(&self, run: &str) -> String {
        let out = self.cmd(&["show", run]).output().expect("start kscale");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
    /// The runs' scratch directories (`.kscale-tmp-*`) left in the env's
    /// directory.
    pub fn scratch_dirs(&self) -> Vec<String> {
        std::fs::read_dir(self.path())
            .expect("read the env's directory")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".kscale-tmp-"))
            .collect()
    }
    /// Fails unless the primary results of the latest run are `cases`
    /// cases, each done with a positive mean of `metric`.
    pub fn assert_primary_done(&self, metric: &str, cases: usize) {
        let primary = self.primary("latest");
        assert_eq!(primary.len(), cases, "{primary:?}");
        for r in &primary {
            assert_eq!(r["status"], "done", "{r}");
            assert_eq!(r["metric"], metric, "{r}");
            assert!(r["mean"].as_f64().unwrap_or(0.0) > 0.0, "{r}");
        }
    }
    /// Runs two 2 s trials of `workload` with one client and `params`,
    /// a byte flipped behind client 0's back (`KSCALE_FAULT=corrupt:…`),
    /// and fails unless the run exits 1: a server that returns the wrong
    /// data gets no throughput.
    pub fn run_corrupted(&self, workload: &str, params: &[&str]) {
        let mut all = vec!["clients=1"];
        all.extend(params);
        all.push("duration=2");
        let out = self
            .cmd(&two_trials(workload, &all))
            .env("KSCALE_FAULT", format!("corrupt:{workload}"))
            .output()
            .expect("start kscale");
        assert_exit(&out, 1);
    }
    /// Runs a two-trial `syscall.null` to the end: a run's start removes
    /// the scratch left by runs that were SIGKILLed, and then none may be
    /// left.
    pub fn assert_next_run_clears_scratch(&self) {
        self.cmd(&[
            "run",
            "syscall.null",
            "--quick",
            "--min-trials",
            "2",
            "--max-trials",
            "2",
            "--no-progress",
        ])
        .assert()
        .success();
        assert!(self.scratch_dirs().is_empty(), "{:?}", self.scratch_dirs());
    }
}

/// The error of the first result in `export`, after failing unless that
/// result failed.
pub fn failed_case_error(export: &serde_json::Value) -> String {
    let r = &export["results"][0];
    assert_eq!(r["status"], "failed", "{r}");
    r["error"].as_str().unwrap_or("").to_string()
}

/// Every file and directory under `dir` but the database (`k.db…` at its
/// top) and those `passed_over` names, whose contents are still listed: what
/// a run left behind.
pub fn leftovers(
    dir: &Path,
    passed_over: impl Fn(&std::fs::DirEntry, bool) -> bool,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let at_top = d == dir;
            if at_top && e.file_name().to_string_lossy().starts_with("k.db") {
                continue;
            }
            if e.path().is_dir() {
                stack.push(e.path());
            }
            if !passed_over(&e, at_top) {
                out.push(e.path().display().to_string());
            }
        }
    }
    out
}

/// The one line of `err` that speaks of nginx, after failing unless there
/// is exactly one: a missing server is said once, not per case or step.
pub fn one_line_about_nginx(err: &str) -> &str {
    let about: Vec<&str> = err.lines().filter(|l| l.contains("nginx")).collect();
    assert_eq!(about.len(), 1, "{err}");
    about[0]
}

/// Fails unless `out` exited with `code` (0: success), showing its stderr.
pub fn assert_exit(out: &std::process::Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `out`'s stdout, after failing with its stderr and stdout unless it
/// succeeded; `what` names the command in the message.
pub fn stdout_of_success(out: &std::process::Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what}: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Fails unless `out` is a refusal of bad input: status 2 and one line on
/// stderr that contains `needle`. `what` names the input in the message.
pub fn assert_refused(out: &std::process::Output, needle: &str, what: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{what}: {err}");
    assert_eq!(err.lines().count(), 1, "{what}: {err}");
    assert!(
        err.contains(needle),
        "{what}: expected `{needle}` in: {err}"
    );
    assert!(!err.contains("panicked"), "{what}: {err}");
}

/// `kscale ARGS` in `env` is refused: see [`assert_refused`].
pub fn refused(env: &Env, args: &[&str], needle: &str) {
    let out = env.cmd(args).output().expect("run");
    assert_refused(&out, needle, &format!("{args:?}"));
}

/// Sends `sig` to a child process.
pub fn signal(child: &std::process::Child, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).expect("kill");
}

/// Debian's nginx, or why a test that needs it cannot run here (a
/// [`skip`]).
pub fn nginx() -> Option<PathBuf> {
    let mut cands = vec![PathBuf::from("/usr/sbin/nginx")];
    if let Some(path) = std::env::var_os("PATH") {
        cands.extend(std::env::split_paths(&path).map(|d| d.join("nginx")));
    }
    let found = cands.into_iter().find(|p| p.is_file());
    if found.is_none() {
        skip("nginx is not installed (Debian package nginx-light)");
    }
    found
}

/// A process's name (its `comm`), empty once it is gone.
pub fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Waits up to 10 s for every process marked `mark` to be gone, and names
/// the ones left behind when they are not.
pub fn assert_no_marked_processes(mark: &str) {
    assert!(
        wait_for(|| marked_processes(mark).is_empty(), 10),
        "left behind: {:?}",
        marked_processes(mark)
            .iter()
            .map(|p| (*p, comm(*p)))
            .collect::<Vec<_>>()
    );
}

/// Fails unless no process marked `mark` is left now, without waiting:
/// for runs that end only once everything they started has gone.
pub fn assert_none_marked(mark: &str) {
    assert!(
        marked_processes(mark).is_empty(),
        "left behind: {:?}",
        marked_processes(mark)
    );
}

/// Processes whose environment carries `KSCALE_TEST_MARK=<mark>`: every
/// worker and server started under a test's run inherits it.
pub fn marked_processes(mark: &str) -> Vec<i32> {
    let needle = format!("KSCALE_TEST_MARK={mark}");
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            if pid == std::process::id() as i32 {
                continue;
            }
            if let Ok(env) = std::fs::read(e.path().join("environ")) {
                let state = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
                // Zombies awaiting their reaper are already dead.
                if state.split_whitespace().nth(2) == Some("Z") {
                    continue;
                }
                if env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()) {
                    out.push(pid);
                }
            }
        }
    }
    out
}

pub fn wait_for(mut f: impl FnMut() -> bool, secs: u64) -> bool {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while std::time::Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    f()
}

/// A test that needs something the machine may refuse (perf, Chromium,
/// nginx, namespaces, PostgreSQL, sshd …) calls this instead of passing
/// silently: it prints why the check is skipped, and panics when `CI` is set,
/// because `.ci/run` installs those things and a skip there means its install
/// step broke. Returns so the caller can `return` after it.
pub fn skip(reason: &str) {
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
        panic!("skipped under CI, where it must run: {reason}");
    }
    eprintln!("SKIPPED: {reason}");
}
/// Runs `sh -c script sh ARGS…` in a mount namespace of its own (so its
/// mounts vanish with it), with NO_COLOR set. A script exits 98 or 99 when
/// its setup (mkfs, mount) is refused: that, or unshare itself failing, is a
/// [`skip`] naming `what` and `None`.
pub fn in_mount_ns(
    what: &str,
    script: &str,
    args: &[&std::ffi::OsStr],
) -> Option<std::process::Output> {
    let out = std::process::Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
            "sh",
        ])
        .args(args)
        .env("NO_COLOR", "1")
        .env("KSCALE_OTHER_RUNS", "ignore")
        .output();
    match out {
        Ok(o)
            if !matches!(o.status.code(), Some(98) | Some(99))
                && !o.stderr.starts_with(b"unshare:") =>
        {
            Some(o)
        }
        Ok(o) => {
            skip(&format!(
                "{what}: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
            None
        }
        Err(e) => {
            skip(&format!("unshare: {e}"));
            None
        }
    }
}

/// Fails unless the image file `img` is attached to no loop device: a loop
/// mount made with `mount -o loop` detaches itself when unmounted.
pub fn assert_loop_detached(img: &Path) {
    let attached = std::process::Command::new("losetup")
        .arg("-j")
        .arg(img)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    assert_eq!(attached, "", "loop device left attached");
}

pub mod netns;

/// The seconds a spender drew, from the ledger line a budgeted run ends
/// with ("the 20 s budget went to: cases 8.1 s, …"), `None` where it drew
/// nothing.
pub fn drawn(err: &str, spender: &str) -> Option<f64> {
    let line = err
        .lines()
        .find(|l| l.contains(" budget went to: "))
        .unwrap_or_else(|| panic!("no ledger line in:\n{err}"));
    let list = line.split(" budget went to: ").nth(1)?.split("; ").next()?;
    list.split(", ")
        .find_map(|p| {
            p.strip_prefix(spender)?
                .strip_prefix(' ')?
                .strip_suffix(" s")
        })
        .and_then(|v| v.parse().ok())
}
