//! `cmd`: command line execution time, the everyday command set of seed 003's
//! longest table (docs/families/cmd.md). One workload per row of that table,
//! declared in [`table`]: the command line, what it needs and how its inputs
//! are put back between executions. Each execution is timed as the worker's
//! fork + exec + wait, the way a shell runs a command, but without a shell:
//! kscale splits the line into words and does the `<`/`>` redirections
//! itself, so the figure is the command's own cost.

mod inputs;
mod table;

pub use inputs::generate as generate_inputs;
pub use table::{Cmd, Input, Reset, CMDS};

use crate::{Family, TrialCtx, TrialOutput, WorkloadDef};
use anyhow::{bail, Context, Result};
use kscale_core::{MetricDef, ParamDef, ParamKind};
use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const TIME: MetricDef = MetricDef::lower("time", "µs");
const METRICS: &[MetricDef] = &[TIME];

const N: usize = table::CMDS.len();

/// How the worker starts each execution (docs/families/cmd.md,
/// "Validation"): the seed's harness and lmbench fork, hyperfine and most
/// process libraries `posix_spawn`, whose vfork-style clone skips copying
/// the parent's page tables — a fixed cost per execution that the
/// shortest rows show.
const PARAMS: &[ParamDef] = &[ParamDef {
    name: "spawn",
    help: "fork: fork + exec + wait, as a shell, the seed's harness and lmbench start a \
           command; posix_spawn: the C library's vfork-style spawn, as hyperfine and most \
           process libraries do (no copy of the worker's page tables).",
    kind: ParamKind::Choice(&["fork", "posix_spawn"]),
    default: &["fork"],
    quick: &[],
}];

/// The family's workloads, one per row of [`CMDS`], built at compile time so
/// that `list`, help, units and tables come from the table.
static WORKLOADS: [WorkloadDef; N] = defs();

const fn defs() -> [WorkloadDef; N] {
    let mut out = [WorkloadDef::BASE; N];
    let mut i = 0;
    while i < N {
        let c = &table::CMDS[i];
        out[i] = WorkloadDef {
            family: "cmd",
            name: c.name,
            title: c.title,
            help: c.line,
            params: PARAMS,
            metrics: METRICS,
            timeout: Duration::from_secs(120),
            run,
            quick: c.quick,
            unavailable,
            ..WorkloadDef::BASE
        };
        i += 1;
    }
    out
}

pub static FAMILY: Family = Family {
    name: "cmd",
    title: "Command line execution time",
    help: "Microseconds per execution of everyday command lines, from `ar` to `yacc` (seed \
           003's PTS command set): fork + exec + wait from the worker, no shell, inputs \
           generated in --dir. A command not installed is skipped with its Debian package; \
           the family's geometric mean covers the rows every compared run measured.",
    workloads: &WORKLOADS,
};

/// The row of a workload name.
pub fn find(name: &str) -> Option<&'static Cmd> {
    CMDS.iter().find(|c| c.name == name)
}

/// The Debian package providing a program, for the skip reason.
fn package(program: &str) -> &'static str {
    const PACKAGES: &[(&str, &str)] = &[
        ("ar", "binutils"),
        ("ld", "binutils"),
        ("awk", "mawk or gawk"),
        ("cmp", "diffutils"),
        ("diff", "diffutils"),
        ("sdiff", "diffutils"),
        ("compress", "ncompress"),
        ("uncompress", "ncompress"),
        ("cpio", "cpio"),
        ("egrep", "grep"),
        ("fgrep", "grep"),
        ("grep", "grep"),
        ("find", "findutils"),
        ("ex", "vim-tiny"),
        ("vi", "vim-tiny"),
        ("m4", "m4"),
        ("mail", "bsd-mailx"),
        ("make", "make"),
        ("cc", "gcc"),
        ("more", "util-linux"),
        ("nroff", "groff-base"),
        ("groff", "groff-base"),
        ("ps", "procps"),
        ("sed", "sed"),
        ("sh", "dash"),
        ("tar", "tar"),
        ("yacc", "byacc"),
    ];
    PACKAGES
        .iter()
        .find(|(p, _)| *p == program)
        .map_or("coreutils", |(_, pkg)| pkg)
}

/// Where `program` is found on `PATH`, as `execvp` would find it.
pub fn which(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// [`WorkloadDef::unavailable`]: the first program of the row (the command,
/// the tools that make its inputs, what it runs itself) missing from `PATH`.
fn unavailable(w: &WorkloadDef, _: &kscale_core::Params) -> Option<String> {
    let c = find(w.name)?;
    let line = match parse_line(c.line) {
        Ok(l) => l,
        Err(e) => return Some(format!("bad command line in kscale's table: {e}")),
    };
    for p in c.programs(&line.argv[0]) {
        if which(p).is_none() {
            return Some(format!(
                "{p}: not installed (Debian package {})",
                package(p)
            ));
        }
    }
    // Sending mail must not leave the scratch directory: bsd-mailx with
    // `expandaddr` writes a `./file` recipient itself and starts no
    // sendmail; another mailx might hand the message to the MTA.
    if line.argv[0] == "mail" {
        let real = which("mail").and_then(|p| std::fs::canonicalize(p).ok());
        if real
            .as_ref()
            .and_then(|p| p.file_name())
            .is_none_or(|n| n != "bsd-mailx")
        {
            return Some(format!(
                "mail: {} is not bsd-mailx, which kscale knows writes to a local file without \
                 sending (Debian package bsd-mailx)",
                real.map_or("it".into(), |p| p.display().to_string())
            ));
        }
    }
    None
}

/// A command line split into words, with its redirections.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub argv: Vec<String>,
    pub stdin: Option<String>,
    pub stdout: Option<String>,
}

/// Splits a table line the way a shell would for the subset the table uses:
/// words separated by spaces, `'single quotes'`, `<file` and `>file`.
/// Anything else a shell would interpret is refused, so no line silently
/// means something different here than typed into a shell.
pub fn parse_line(s: &str) -> Result<Line, String> {
    let mut words: Vec<(String, bool)> = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(ch) = chars.next() {
        match ch {
            ' ' => {
                if in_word {
                    words.push((std::mem::take(&mut cur), quoted));
                    quoted = false;
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                quoted = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => cur.push(c),
                        None => return Err(format!("unterminated quote in `{s}`")),
                    }
                }
            }
            '"' | '\\' | '$' | '`' | '|' | '&' | ';' | '*' | '?' | '(' | ')' => {
                return Err(format!("`{ch}` outside single quotes in `{s}`"))
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push((cur, quoted));
    }
    let mut line = Line {
        argv: Vec::new(),
        stdin: None,
        stdout: None,
    };
    let mut it = words.into_iter();
    while let Some((w, quoted)) = it.next() {
        let redirect = if quoted {
            None
        } else if let Some(rest) = w.strip_prefix('<') {
            Some((&mut line.stdin, rest.to_string()))
        } else if let Some(rest) = w.strip_prefix('>') {
            Some((&mut line.stdout, rest.to_string()))
        } else {
            None
        };
        match redirect {
            Some((slot, rest)) => {
                let target = if rest.is_empty() {
                    it.next()
                        .map(|(t, _)| t)
                        .ok_or_else(|| format!("redirection without a file in `{s}`"))?
                } else {
                    rest
                };
                if slot.replace(target).is_some() {
                    return Err(format!("two redirections of one stream in `{s}`"));
                }
            }
            None => line.argv.push(w),
        }
    }
    if line.argv.is_empty() {
        return Err(format!("no command in `{s}`"));
    }
    Ok(line)
}

/// The per-trial copy of the inputs, removed however the trial ends.
struct WorkDir(PathBuf);

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn cstring(b: impl Into<Vec<u8>>, what: &str) -> Result<CString> {
    CString::new(b).with_context(|| format!("{what} contains a NUL byte"))
}

/// A command ready to fork and exec: everything the child touches is made
/// before the fork.
struct Prepared {
    path: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
    cwd: CString,
    stdin: CString,
    stdout: CString,
    /// The command's stderr: an in-memory file, emptied before each run and
    /// read for the first line when a run fails. A file in the scratch
    /// directory would be truncated on every run, and on a journalling file
    /// system that alone costs hundreds of µs — time no user's command pays.
    stderr: std::os::fd::OwnedFd,
    status: i32,
    line: &'static str,
}

impl Prepared {
    fn new(c: &'static Cmd, work: &Path) -> Result<Prepared> {
        let line = parse_line(c.line).map_err(anyhow::Error::msg)?;
        let path =
            which(&line.argv[0]).with_context(|| format!("{}: not installed", line.argv[0]))?;
        // SAFETY: geteuid/getegid cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let argv = line
            .argv
            .iter()
            .map(|a| {
                let a = a.replace("{uid}", &uid.to_string());
                cstring(a.replace("{gid}", &gid.to_string()), "an argument")
            })
            .collect::<Result<Vec<_>>>()?;
        let rel = |f: &str| cstring(work.join(f).into_os_string().into_vec(), "a path");
        Ok(Prepared {
            path: cstring(path.into_os_string().into_vec(), "the program's path")?,
            argv,
            envp: environment(work)?,
            cwd: cstring(work.as_os_str().as_bytes(), "the scratch directory")?,
            stdin: match &line.stdin {
                Some(f) => rel(f)?,
                None => CString::from(c"/dev/null"),
            },
            stdout: match &line.stdout {
                Some(f) => rel(f)?,
                None => CString::from(c"/dev/null"),
            },
            stderr: {
                // SAFETY: a NUL-terminated name and valid flags.
                let fd =
                    unsafe { libc::memfd_create(c"kscale-cmd-stderr".as_ptr(), libc::MFD_CLOEXEC) };
                if fd < 0 {
                    return Err(std::io::Error::last_os_error()).context("memfd_create");
                }
                // SAFETY: fd was just created here and is owned by nothing else.
                unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) }
            },
            status: c.status,
            line: c.line,
        })
    }

    /// One execution: fork (or spawn) + exec + wait; the time from before
    /// the process is made to after the wait.
    fn exec_once(&self, spawn: &Spawn) -> Result<Duration> {
        let mut argv: Vec<*const libc::c_char> = self.argv.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        let mut envp: Vec<*const libc::c_char> = self.envp.iter().map(|a| a.as_ptr()).collect();
        envp.push(std::ptr::null());
        let err = std::os::fd::AsRawFd::as_raw_fd(&self.stderr);
        // SAFETY: our own memfd; empties it and rewinds the shared offset.
        if unsafe { libc::ftruncate(err, 0) != 0 || libc::lseek(err, 0, libc::SEEK_SET) != 0 } {
            return Err(std::io::Error::last_os_error()).context("emptying the stderr capture");
        }
        let start = Instant::now();
        let pid = match spawn {
            Spawn::Fork => self.fork(&argv, &envp, err)?,
            Spawn::PosixSpawn(actions) => {
                let mut pid = 0;
                // SAFETY: every pointer is valid and NUL-terminated for the
                // call; the file actions were initialised in Spawn::of.
                let r = unsafe {
                    libc::posix_spawn(
                        &mut pid,
                        self.path.as_ptr(),
                        &actions.0,
                        std::ptr::null(),
                        argv.as_ptr().cast(),
                        envp.as_ptr().cast(),
                    )
                };
                if r != 0 {
                    return Err(std::io::Error::from_raw_os_error(r))
                        .with_context(|| format!("posix_spawn of `{}`", self.line));
                }
                pid
            }
        };
        self.wait(pid, start)
    }

    /// The forked child: the scratch directory, the redirections, execve.
    fn fork(
        &self,
        argv: &[*const libc::c_char],
        envp: &[*const libc::c_char],
        err: libc::c_int,
    ) -> Result<libc::pid_t> {
        // SAFETY: the worker is single-threaded; the child only makes
        // async-signal-safe calls on memory prepared before the fork and
        // leaves with execve or _exit.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(std::io::Error::last_os_error()).context("fork");
        }
        if pid == 0 {
            // SAFETY: see above; every pointer outlives the child's use of it.
            unsafe {
                // dup2 clears close-on-exec on fd 2.
                if libc::dup2(err, 2) < 0 {
                    libc::_exit(126);
                }
                let say = |msg: &[u8]| {
                    libc::write(2, msg.as_ptr().cast(), msg.len());
                };
                if libc::chdir(self.cwd.as_ptr()) != 0 {
                    say(b"kscale: cannot enter the scratch directory\n");
                    libc::_exit(126);
                }
                let input = libc::open(self.stdin.as_ptr(), libc::O_RDONLY);
                if input < 0 || libc::dup2(input, 0) < 0 {
                    say(b"kscale: cannot open the command's input\n");
                    libc::_exit(126);
                }
                let output = libc::open(
                    self.stdout.as_ptr(),
                    libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
                    0o644,
                );
                if output < 0 || libc::dup2(output, 1) < 0 {
                    say(b"kscale: cannot open the command's output\n");
                    libc::_exit(126);
                }
                for fd in [input, output] {
                    if fd > 2 {
                        libc::close(fd);
                    }
                }
                libc::execve(self.path.as_ptr(), argv.as_ptr(), envp.as_ptr());
                say(b"kscale: execve failed\n");
                libc::_exit(127);
            }
        }
        Ok(pid)
    }

    /// Waits for `pid`; its time since `start`, or why it failed.
    fn wait(&self, pid: libc::pid_t, start: Instant) -> Result<Duration> {
        let mut status = 0;
        loop {
            // SAFETY: waits for the child just forked; status is a valid int.
            let r = unsafe { libc::waitpid(pid, &mut status, 0) };
            if r == pid {
                break;
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e).context("waitpid");
            }
        }
        let took = start.elapsed();
        if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == self.status {
            return Ok(took);
        }
        // The child's writes moved the shared offset; read from the start.
        let mut captured = vec![0u8; 4096];
        let first = std::os::unix::fs::FileExt::read_at(
            &std::fs::File::from(self.stderr.try_clone()?),
            &mut captured,
            0,
        )
        .ok()
        .map(|n| {
            captured.truncate(n);
            captured
        })
        .and_then(|b| {
            String::from_utf8_lossy(&b)
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .map(str::to_string)
        })
        .unwrap_or_else(|| "nothing on stderr".into());
        if libc::WIFSIGNALED(status) {
            bail!(
                "`{}` was killed by signal {}: {first}",
                self.line,
                libc::WTERMSIG(status)
            );
        }
        bail!(
            "`{}` exited with status {} (expected {}): {first}",
            self.line,
            libc::WEXITSTATUS(status),
            self.status
        )
    }
}

/// How [`Prepared::exec_once`] makes the process, from the `spawn` param.
enum Spawn {
    Fork,
    PosixSpawn(SpawnActions),
}

/// posix_spawn's file actions for one prepared command: the same scratch
/// directory and redirections the forked child makes itself.
struct SpawnActions(libc::posix_spawn_file_actions_t);

impl Drop for SpawnActions {
    fn drop(&mut self) {
        // SAFETY: initialised in Spawn::of and destroyed only here.
        unsafe { libc::posix_spawn_file_actions_destroy(&mut self.0) };
    }
}

impl Spawn {
    fn of(name: &str, p: &Prepared) -> Result<Spawn> {
        match name {
            "fork" => Ok(Spawn::Fork),
            "posix_spawn" => {
                // SAFETY: a zeroed value is what init overwrites.
                let mut a = SpawnActions(unsafe { std::mem::zeroed() });
                let check = |r: libc::c_int, what: &str| {
                    if r == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::from_raw_os_error(r)).context(what.to_string())
                    }
                };
                // SAFETY: a is a valid file-actions object; the paths are
                // NUL-terminated and outlive it (both live in `p`, dropped
                // after the Spawn in `run`), and glibc copies them anyway.
                unsafe {
                    check(
                        libc::posix_spawn_file_actions_init(&mut a.0),
                        "posix_spawn_file_actions_init",
                    )?;
                    check(
                        libc::posix_spawn_file_actions_addchdir_np(&mut a.0, p.cwd.as_ptr()),
                        "posix_spawn: chdir into the scratch directory",
                    )?;
                    check(
                        libc::posix_spawn_file_actions_addopen(
                            &mut a.0,
                            0,
                            p.stdin.as_ptr(),
                            libc::O_RDONLY,
                            0,
                        ),
                        "posix_spawn: the command's input",
                    )?;
                    check(
                        libc::posix_spawn_file_actions_addopen(
                            &mut a.0,
                            1,
                            p.stdout.as_ptr(),
                            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
                            0o644,
                        ),
                        "posix_spawn: the command's output",
                    )?;
                    check(
                        libc::posix_spawn_file_actions_adddup2(
                            &mut a.0,
                            std::os::fd::AsRawFd::as_raw_fd(&p.stderr),
                            2,
                        ),
                        "posix_spawn: the command's stderr",
                    )?;
                }
                Ok(Spawn::PosixSpawn(a))
            }
            other => bail!("spawn={other}: expected fork or posix_spawn"),
        }
    }
}

/// The commands' environment: the worker's, with the locale fixed to C (a
/// locale changes sort and grep by an order of magnitude) and HOME, TMPDIR
/// and MAILRC inside the scratch directory, so no command reads the user's
/// start-up files or writes outside it.
fn environment(work: &Path) -> Result<Vec<CString>> {
    let fixed: [(&str, OsString); 5] = [
        ("LC_ALL", "C".into()),
        ("HOME", work.join(inputs::HOME).into_os_string()),
        ("TMPDIR", work.join(inputs::TMP).into_os_string()),
        ("MAILRC", work.join(inputs::MAILRC).into_os_string()),
        ("TERM", "dumb".into()),
    ];
    let mut out = Vec::new();
    for (k, v) in std::env::vars_os() {
        if fixed.iter().any(|(f, _)| OsStr::new(f) == k) || k == "LANG" || k == "LANGUAGE" {
            continue;
        }
        let mut kv = k.into_vec();
        kv.push(b'=');
        kv.extend(v.into_vec());
        out.push(cstring(kv, "an environment variable")?);
    }
    for (k, v) in fixed {
        let mut kv = k.as_bytes().to_vec();
        kv.push(b'=');
        kv.extend(v.into_vec());
        out.push(cstring(kv, "an environment variable")?);
    }
    Ok(out)
}

fn run(ctx: &TrialCtx) -> Result<TrialOutput> {
    let c = find(&ctx.workload).with_context(|| format!("no command line `{}`", ctx.workload))?;
    let work = WorkDir(ctx.dir.join(format!("cmd-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&work.0);
    std::fs::create_dir(&work.0).with_context(|| format!("cannot create {}", work.0.display()))?;
    inputs::generate(&work.0, c.inputs)?;
    let p = Prepared::new(c, &work.0)?;
    let spawn = Spawn::of(&ctx.param(&PARAMS[0])?, &p)?;
    let (per_op, n) = ctx.time_per_op(|n| {
        let mut total = Duration::ZERO;
        for _ in 0..n {
            c.reset.apply(&work.0)?;
            total += p.exec_once(&spawn)?;
        }
        Ok(total)
    })?;
    Ok(TrialOutput::new(n).with(&TIME, per_op * 1e6))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_like_a_shell() {
        let l = parse_line("tr 'a-z' A-Z <f10k.txt").unwrap();
        assert_eq!(l.argv, ["tr", "a-z", "A-Z"]);
        assert_eq!(l.stdin.as_deref(), Some("f10k.txt"));
        let l = parse_line("cpio -o < list > out.cpio").unwrap();
        assert_eq!(l.argv, ["cpio", "-o"]);
        assert_eq!(l.stdout.as_deref(), Some("out.cpio"));
        assert_eq!(
            parse_line("echo '<not a redirect>'").unwrap().argv[1],
            "<not a redirect>"
        );
        assert!(parse_line("ls | wc").is_err());
        assert!(parse_line("echo 'open").is_err());
        assert!(parse_line("cat <").is_err());
    }

    #[test]
    fn every_row_is_well_formed() {
        let mut names = std::collections::HashSet::new();
        for c in CMDS {
            assert!(names.insert(c.name), "duplicate row {}", c.name);
            let l = parse_line(c.line).unwrap_or_else(|e| panic!("{}: {e}", c.name));
            assert_eq!(
                c.name.split('.').next(),
                Some(l.argv[0].as_str()),
                "{} runs {}",
                c.name,
                l.argv[0]
            );
        }
        // Every row of seed 003's table (docs/families/cmd.md).
        assert_eq!(CMDS.len(), 114);
        let quick = CMDS.iter().filter(|c| c.quick).count();
        assert!((8..=12).contains(&quick), "{quick} quick rows");
        assert_eq!(WORKLOADS.len(), CMDS.len());
        for (w, c) in WORKLOADS.iter().zip(CMDS) {
            assert_eq!(w.name, c.name);
        }
    }

    #[test]
    fn missing_program_names_its_package() {
        assert_eq!(package("compress"), "ncompress");
        assert_eq!(package("cat"), "coreutils");
    }
}
