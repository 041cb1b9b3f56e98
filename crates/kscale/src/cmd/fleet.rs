//! `kscale fleet --hosts A,B run-options…`: the same measurement on many
//! machines at once, through the system `ssh` (docs/fleet.md). For each
//! host: a scratch directory, the kscale binary copied there (after a libc
//! check) or `--remote-bin`, the run with a store of its own, its progress
//! streamed back, its export imported here under the host's name, and the
//! scratch directory removed. A host that fails costs that host only.

pub mod progress;
pub mod ssh;

use crate::error::user;
use crate::output::{out, outln, Format};
use anyhow::Result;
use clap::{Args as _, FromArgMatches};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use ssh::{quote, Failure, Host, Ssh};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{ExitCode, Stdio};
use std::sync::{mpsc, Arc, Mutex};

#[derive(clap::Args)]
#[command(
    after_help = "Fleet options come first; everything from the first other word on is \
what each host runs: `kscale run` options (the default), `run …` or `study …`.

Examples:
  kscale fleet --hosts lab1,lab2 syscall --quick --cpus 1,all
  kscale fleet --hosts-file hosts.txt --compare --suite micro --quick
  kscale fleet --hosts root@10.0.0.7:2222 --remote-bin /opt/kscale study --quick"
)]
pub struct Args {
    /// Hosts as ssh takes them, `[USER@]HOST[:PORT]`, comma-separated or repeated.
    #[arg(
        long,
        value_name = "HOST[,HOST…]",
        value_delimiter = ',',
        required_unless_present = "hosts_file",
        conflicts_with = "hosts_file"
    )]
    hosts: Vec<String>,
    /// A file with one host per line (`#` comments).
    #[arg(long, value_name = "FILE")]
    hosts_file: Option<PathBuf>,
    /// Use this kscale on the hosts instead of copying this one.
    #[arg(long, value_name = "PATH")]
    remote_bin: Option<String>,
    /// Where the hosts' scratch directories are made (default /tmp).
    #[arg(long, value_name = "DIR", default_value = "/tmp")]
    remote_dir: String,
    /// Hosts measured at the same time.
    #[arg(long, value_name = "N", default_value_t = 8)]
    parallel: usize,
    /// Label of the imported runs; `{host}` is replaced by the host (default `{host}`).
    #[arg(long, value_name = "LABEL")]
    label: Option<String>,
    /// Print `kscale compare` of the hosts' runs at the end.
    #[arg(long)]
    compare: bool,
    /// An ssh configuration file instead of ~/.ssh/config (ssh -F).
    #[arg(long, value_name = "FILE")]
    ssh_config: Option<PathBuf>,
    /// An extra ssh option (ssh -o), repeatable: `--ssh-option Port=2222`.
    #[arg(long = "ssh-option", value_name = "OPT")]
    ssh_options: Vec<String>,
    /// Do not draw the progress display.
    #[arg(long)]
    no_progress: bool,
    /// What each host runs: run options, `run …` or `study …`.
    #[arg(
        value_name = "RUN-OPTIONS",
        trailing_var_arg = true,
        allow_hyphen_values = true,
        required = true
    )]
    command: Vec<String>,
}

/// The remote kscale's command line (without `--db`/`--dir`), validated here
/// so that a typo costs one line before any host is contacted.
pub fn remote_command(words: &[String]) -> Result<Vec<String>> {
    let (sub, rest) = match words.first().map(String::as_str) {
        Some("study") => ("study", &words[1..]),
        Some("run") => ("run", &words[1..]),
        _ => ("run", words),
    };
    let argv = std::iter::once(sub.to_string()).chain(rest.iter().cloned());
    let one_line = |e: clap::Error| {
        let text = e.to_string();
        let line = text
            .lines()
            .next()
            .unwrap_or("")
            .trim_start_matches("error: ")
            .to_string();
        user(format!("bad {sub} options for the fleet: {line}"))
    };
    if sub == "study" {
        super::study::Args::augment_args(clap::Command::new("study"))
            .try_get_matches_from(argv)
            .map_err(one_line)?;
    } else {
        let m = super::run::Args::augment_args(clap::Command::new("run"))
            .try_get_matches_from(argv)
            .map_err(one_line)?;
        let a = super::run::Args::from_arg_matches(&m).map_err(one_line)?;
        if a.resume.is_some() {
            return Err(user("a fleet measures afresh; --resume is not accepted"));
        }
        if a.select.targets.is_empty() && a.select.suite.is_none() {
            return Err(user(
                "nothing to run: give targets (e.g. `syscall`) or --suite",
            ));
        }
        crate::engine::plan::resolve_targets(
            &a.select.targets,
            a.select.suite.as_deref(),
            a.run.quick,
        )?;
    }
    if rest.iter().any(|w| w == "--dir" || w.starts_with("--dir=")) {
        return Err(user(
            "--dir is chosen by the fleet (a scratch directory under --remote-dir)",
        ));
    }
    Ok(std::iter::once(sub.to_string())
        .chain(rest.iter().cloned())
        .collect())
}

/// Everything the host threads share.
struct Job {
    ssh: Ssh,
    remote_bin: Option<String>,
    remote_dir: String,
    command: Vec<String>,
    local_exe: PathBuf,
}

/// What a host thread reports to the main thread.
enum Event {
    Line(usize, String),
    Progress(usize, u64, u64, String),
    Done(usize, Result<serde_json::Value, Failure>),
}

/// A host's end: the id of its imported run, or why there is none (`None`
/// when its thread never reported).
type Outcome = Option<Result<i64, Failure>>;

pub fn run(args: Args, db: Option<PathBuf>) -> Result<ExitCode> {
    let hosts = distinct_hosts(&args)?;
    if args.parallel == 0 {
        return Err(user("bad --parallel 0: at least 1 host at a time"));
    }
    let labels = labels(&args, &hosts)?;
    if !args.remote_dir.starts_with('/') {
        return Err(user(format!(
            "bad --remote-dir `{}`: must be an absolute path",
            args.remote_dir
        )));
    }
    let command = remote_command(&args.command)?;
    let store = super::open_store(db)?;
    crate::signals::install();

    let job = Arc::new(Job {
        ssh: Ssh {
            config: args.ssh_config.clone(),
            options: args.ssh_options.clone(),
        },
        remote_bin: args.remote_bin.clone(),
        remote_dir: args.remote_dir.trim_end_matches('/').to_string(),
        command,
        local_exe: std::env::current_exe()?,
    });
    let display = Display::new(&hosts, args.no_progress);
    let (threads, rx) = start_hosts(job, &hosts, args.parallel);
    let outcome = gather(rx, &hosts, &labels, &display, &store);
    for t in threads {
        let _ = t.join();
    }
    let _ = display.multi.clear();
    finish(&args, &hosts, &labels, &outcome, &store, display.width)
}

/// The hosts from `--hosts` or `--hosts-file`; a host named twice would
/// import two runs under one label, so it is refused.
fn distinct_hosts(args: &Args) -> Result<Vec<Host>> {
    let hosts = match &args.hosts_file {
        Some(f) => ssh::parse_file(f)?,
        None => ssh::parse_list(&args.hosts)?,
    };
    for (i, h) in hosts.iter().enumerate() {
        if hosts[..i].iter().any(|o| o.name == h.name) {
            return Err(user(format!("host `{}` is named twice", h.name)));
        }
    }
    Ok(hosts)
}

/// Each host's label for its imported run, checked before any host is
/// contacted so that a bad `--label` costs no measurement.
fn labels(args: &Args, hosts: &[Host]) -> Result<Vec<String>> {
    let labels: Vec<String> = hosts
        .iter()
        .map(|h| {
            args.label
                .as_deref()
                .unwrap_or("{host}")
                .replace("{host}", &h.name)
        })
        .collect();
    for l in &labels {
        crate::engine::args::check_label(l)?;
    }
    Ok(labels)
}

/// The progress display: a bar per host, drawn only on a terminal; without
/// it the hosts' lines go to stderr with a `kscale: fleet:` prefix.
struct Display {
    multi: MultiProgress,
    bars: Vec<ProgressBar>,
    draw: bool,
    /// The longest host name, so that bars and summary rows line up.
    width: usize,
}

impl Display {
    /// A bar per host, each saying "connecting" until its thread reports.
    fn new(hosts: &[Host], no_progress: bool) -> Display {
        use std::io::IsTerminal;
        let draw = !no_progress && std::io::stderr().is_terminal();
        let multi = MultiProgress::with_draw_target(if draw {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        });
        let width = hosts.iter().map(|h| h.name.len()).max().unwrap_or(4);
        let style = ProgressStyle::with_template(&format!(
            "{{prefix:{width}}} {{bar:25}} {{pos:>4}}/{{len:4}} trials {{msg}}"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        let bars: Vec<ProgressBar> = hosts
            .iter()
            .map(|h| {
                let b = multi.add(ProgressBar::new(0));
                b.set_style(style.clone());
                b.set_prefix(h.name.clone());
                b.set_message("connecting");
                b
            })
            .collect();
        Display {
            multi,
            bars,
            draw,
            width,
        }
    }

    /// A line a host's run printed, above the bars so they are not torn.
    fn line(&self, host: &str, l: &str) {
        let line = format!("{host}: {l}");
        if self.draw {
            self.multi.suspend(|| eprintln!("{line}"));
        } else {
            eprintln!("kscale: fleet: {line}");
        }
    }

    /// A host's end on its bar. Failures are named once, in the summary (or
    /// the one-line error when no host could be reached).
    fn done(&self, i: usize, host: &str, r: &Result<i64, Failure>) {
        match r {
            Ok(id) => self.bars[i].finish_with_message(format!("done: run {id}")),
            Err(e) => self.bars[i].abandon_with_message(format!("FAILED: {e}")),
        }
        if let (false, Ok(id)) = (self.draw, r) {
            eprintln!("kscale: fleet: {host}: done, imported as run {id}");
        }
    }
}

/// `--parallel` threads that take hosts from one queue until it is empty;
/// each host ends in one `Event::Done` on the returned channel.
fn start_hosts(
    job: Arc<Job>,
    hosts: &[Host],
    parallel: usize,
) -> (Vec<std::thread::JoinHandle<()>>, mpsc::Receiver<Event>) {
    let queue = Arc::new(Mutex::new(
        hosts.iter().cloned().enumerate().collect::<VecDeque<_>>(),
    ));
    let (tx, rx) = mpsc::channel();
    let mut threads = Vec::new();
    for _ in 0..parallel.min(hosts.len()) {
        let (queue, tx, job) = (queue.clone(), tx.clone(), job.clone());
        threads.push(std::thread::spawn(move || loop {
            let next = queue.lock().ok().and_then(|mut q| q.pop_front());
            let Some((i, host)) = next else { return };
            let result = if crate::signals::interrupted().is_some() {
                Err(Failure::Failed("interrupted before it started".into()))
            } else {
                one_host(&job, i, &host, &tx)
            };
            let _ = tx.send(Event::Done(i, result));
        }));
    }
    (threads, rx)
}

/// The hosts' events until every thread is gone: lines and progress to the
/// display, each export imported here as it arrives.
fn gather(
    rx: mpsc::Receiver<Event>,
    hosts: &[Host],
    labels: &[String],
    display: &Display,
    store: &kscale_store::Store,
) -> Vec<Outcome> {
    let mut outcome: Vec<Outcome> = vec![None; hosts.len()];
    for ev in rx {
        match ev {
            Event::Line(i, l) => display.line(&hosts[i].name, &l),
            Event::Progress(i, pos, len, msg) => {
                display.bars[i].set_length(len);
                display.bars[i].set_position(pos);
                display.bars[i].set_message(msg);
            }
            Event::Done(i, r) => {
                let r = r.and_then(|v| {
                    super::import::import_value(store, &v, Some(&labels[i]))
                        .map_err(|e| Failure::Failed(format!("import failed: {e}")))
                        .map(|o| match o {
                            kscale_store::ImportOutcome::Imported(id)
                            | kscale_store::ImportOutcome::AlreadyThere(id) => id,
                        })
                });
                display.done(i, &hosts[i].name, &r);
                outcome[i] = Some(r);
            }
        }
    }
    outcome
}

/// The summary and the exit status: the signal's status when interrupted,
/// one error when no host could be reached, 1 when some host failed.
fn finish(
    args: &Args,
    hosts: &[Host],
    labels: &[String],
    outcome: &[Outcome],
    store: &kscale_store::Store,
    width: usize,
) -> Result<ExitCode> {
    let ok: Vec<i64> = outcome
        .iter()
        .filter_map(|o| o.as_ref().and_then(|r| r.as_ref().ok()).copied())
        .collect();
    let failures: Vec<(String, Failure)> = hosts
        .iter()
        .zip(outcome)
        .filter_map(|(h, o)| match o {
            Some(Ok(_)) => None,
            Some(Err(e)) => Some((h.name.clone(), e.clone())),
            None => Some((h.name.clone(), Failure::Failed("no result".into()))),
        })
        .collect();
    if let Some(sig) = crate::signals::interrupted() {
        eprintln!(
            "kscale: fleet interrupted by signal {sig}; every remote run was stopped and its scratch directory removed"
        );
        return Ok(ExitCode::from((128 + sig).clamp(0, 255) as u8));
    }
    if ok.is_empty()
        && failures
            .iter()
            .all(|(_, f)| matches!(f, Failure::Unreachable(_)))
    {
        let list: Vec<String> = failures.iter().map(|(h, f)| format!("{h} ({f})")).collect();
        return Err(user(format!(
            "no host could be reached: {}",
            list.join("; ")
        )));
    }

    outln!("fleet of {} hosts:", hosts.len())?;
    for ((h, o), label) in hosts.iter().zip(outcome).zip(labels) {
        match o {
            Some(Ok(id)) => {
                let row = store.run(*id)?;
                outln!(
                    "  {:width$}  run {id} ({label}): {} cases, {} failed, {}",
                    h.name,
                    row.cases_total,
                    row.cases_failed,
                    row.status
                )?
            }
            Some(Err(e)) => outln!("  {:width$}  FAILED: {e}", h.name)?,
            None => outln!("  {:width$}  FAILED: no result", h.name)?,
        }
    }
    if args.compare {
        compare_hosts(store, &ok)?;
    }
    if failures.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        let names: Vec<&str> = failures.iter().map(|(h, _)| h.as_str()).collect();
        eprintln!(
            "kscale: error: {} of {} hosts failed: {}",
            failures.len(),
            hosts.len(),
            names.join(", ")
        );
        Ok(ExitCode::from(1))
    }
}

/// `--compare`: the hosts' runs side by side; a comparison that cannot be
/// made is said in the output, since the runs themselves are imported.
fn compare_hosts(store: &kscale_store::Store, ok: &[i64]) -> Result<()> {
    if ok.len() < 2 {
        outln!(
            "\n--compare needs at least two hosts' runs; got {}",
            ok.len()
        )?;
        return Ok(());
    }
    let data = ok
        .iter()
        .map(|id| store.load_run(*id))
        .collect::<Result<Vec<_>, _>>()?;
    let refs: Vec<&kscale_store::RunData> = data.iter().collect();
    match kscale_report::compare::compare(&refs, &super::Registry) {
        Ok(cmp) => {
            outln!()?;
            let tables = kscale_report::compare::tables(&cmp);
            out!("{}", Format::Terminal.exporter().tables(&tables))?
        }
        Err(e) => outln!("\ncannot compare the hosts' runs: {e}")?,
    }
    Ok(())
}

/// The remote scratch directory; removed (and any process of the run
/// stopped first) when dropped, however the host's part ended.
struct Scratch<'a> {
    job: &'a Job,
    host: &'a Host,
    dir: String,
}

impl Drop for Scratch<'_> {
    fn drop(&mut self) {
        let d = quote(&self.dir);
        // The run stops by itself once its ssh is gone; wait up to 15 s for
        // it, then kill what is left, then remove the directory.
        let script = format!(
            "p=$(cat {d}/pid 2>/dev/null); n=0; \
             while [ -n \"$p\" ] && kill -0 \"$p\" 2>/dev/null && [ $n -lt 75 ]; do sleep 0.2; n=$((n+1)); done; \
             [ -n \"$p\" ] && kill -KILL \"$p\" 2>/dev/null; \
             rm -rf {d}"
        );
        let _ = self.job.ssh.cleanup(self.host, &script);
    }
}

/// ELF program headers of this binary: does it name a dynamic loader?
fn is_static(exe: &std::path::Path) -> bool {
    let Ok(b) = std::fs::read(exe) else {
        return false;
    };
    // 64-bit little-endian ELF only; anything else is treated as dynamic.
    if b.len() < 64 || &b[..4] != b"\x7fELF" || b[4] != 2 || b[5] != 1 {
        return false;
    }
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let u64_at = |o: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[o..o + 8]);
        u64::from_le_bytes(a) as usize
    };
    let (phoff, phentsize, phnum) = (u64_at(32), u16_at(54), u16_at(56));
    !(0..phnum).any(|i| {
        let o = phoff + i * phentsize;
        // PT_INTERP = 3
        o + 4 <= b.len() && u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]) == 3
    })
}

/// `2.36` → (2, 36).
fn version(s: &str) -> Option<(u32, u32)> {
    let mut it = s.trim().split('.');
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// Can this binary run there? A static one anywhere with the same machine
/// type; a dynamic one needs glibc at least as new as the one here.
fn compatible(exe: &std::path::Path, arch: &str, libc: &str) -> Result<(), String> {
    let here = kscale_sys::snapshot::take("", "");
    let my_arch = here["kernel"]["machine"]
        .as_str()
        .unwrap_or(std::env::consts::ARCH);
    if arch != my_arch {
        return Err(format!(
            "the host is {arch} and this kscale is built for {my_arch}; pass --remote-bin with a kscale built for it"
        ));
    }
    if is_static(exe) {
        return Ok(());
    }
    let mine = here["libc"]["version"].as_str().unwrap_or("");
    let theirs = libc.strip_prefix("glibc ").unwrap_or("");
    match (version(mine), version(theirs)) {
        (Some(m), Some(t)) if t >= m => Ok(()),
        (Some(_), Some(_)) => Err(format!(
            "the host has glibc {theirs}, older than the glibc {mine} this kscale is linked against; \
             copy a static build (cargo build --release --target x86_64-unknown-linux-musl) with --remote-bin"
        )),
        _ => Err(format!(
            "this kscale is linked against glibc {mine} and the host has no glibc ({libc}); \
             copy a static build with --remote-bin"
        )),
    }
}

/// One host's part: probe, copy, run, fetch the export.
fn one_host(
    job: &Job,
    i: usize,
    host: &Host,
    tx: &mpsc::Sender<Event>,
) -> Result<serde_json::Value, Failure> {
    let say = |m: &str| {
        let _ = tx.send(Event::Progress(i, 0, 0, m.to_string()));
    };
    say("connecting");
    let (scratch, there) = make_scratch(job, host)?;
    let d = quote(&scratch.dir);
    let bin = match &job.remote_bin {
        Some(b) => quote(b),
        None => {
            there.check_room(job)?;
            say("copying kscale");
            job.ssh.output_with_input(
                host,
                &format!("cat > {d}/kscale && chmod 755 {d}/kscale"),
                &job.local_exe,
            )?;
            format!("{d}/kscale")
        }
    };
    if crate::signals::interrupted().is_some() {
        return Err(Failure::Failed("interrupted".into()));
    }
    run_there(job, host, &d, &bin, i, tx)?;
    say("fetching results");
    let text = job.ssh.output(
        host,
        &format!("{bin} --db {d}/k.db export latest --format json"),
    )?;
    serde_json::from_str(&text)
        .map_err(|e| Failure::Failed(format!("the host's export is not JSON: {e}")))
}

/// What the probe learnt of a host, to decide whether this kscale can be
/// copied there.
struct There {
    arch: String,
    libc: String,
    /// Free space in the scratch directory's file system.
    free_kb: u64,
}

impl There {
    /// Can this kscale run there, and is there room for it, its store and
    /// the workloads' scratch files?
    fn check_room(&self, job: &Job) -> Result<(), Failure> {
        compatible(&job.local_exe, &self.arch, &self.libc).map_err(Failure::Failed)?;
        let size_kb = std::fs::metadata(&job.local_exe)
            .map(|m| m.len() / 1024)
            .unwrap_or(0);
        let need = size_kb + 256 * 1024;
        if self.free_kb < need {
            return Err(Failure::Failed(format!(
                "lacks space: {} MiB free under {}, {} MiB needed",
                self.free_kb / 1024,
                job.remote_dir,
                need / 1024
            )));
        }
        Ok(())
    }
}

/// One ssh round trip for the machine type, the glibc and a fresh scratch
/// directory with its free space; from here on the directory is removed
/// however the host's part ends.
fn make_scratch<'a>(job: &'a Job, host: &'a Host) -> Result<(Scratch<'a>, There), Failure> {
    let parent = quote(&job.remote_dir);
    let probe = format!(
        "uname -m; getconf GNU_LIBC_VERSION 2>/dev/null || echo none; \
         mkdir -p {parent} && d=$(mktemp -d {parent}/kscale-fleet.XXXXXX) && echo \"$d\" && df -Pk \"$d\" | tail -n 1"
    );
    let out = job.ssh.output(host, &probe)?;
    let lines: Vec<&str> = out.lines().collect();
    let [arch, libc, dir, df, ..] = lines[..] else {
        return Err(Failure::Failed(format!(
            "cannot make a scratch directory under {}: {}",
            job.remote_dir,
            ssh::last_line(&out)
        )));
    };
    let scratch = Scratch {
        job,
        host,
        dir: dir.trim().to_string(),
    };
    let free_kb: u64 = df
        .split_whitespace()
        .nth(3)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let there = There {
        arch: arch.trim().to_string(),
        libc: libc.trim().to_string(),
        free_kb,
    };
    Ok((scratch, there))
}

/// The run in the scratch directory `d`, its progress relayed to the main
/// thread; an exit other than 0 is the host's failure.
fn run_there(
    job: &Job,
    host: &Host,
    d: &str,
    bin: &str,
    i: usize,
    tx: &mpsc::Sender<Event>,
) -> Result<(), Failure> {
    // The run, with a watchdog on ssh's standard input: when the ssh
    // connection goes (Ctrl-C here, a lost network), the watchdog sends the
    // run SIGTERM and the run stops and cleans up as on a local Ctrl-C.
    let words: Vec<String> = job.command.iter().map(|w| quote(w)).collect();
    let script = format!(
        "exec 3<&0 </dev/null; cd {d} || exit 1; \
         KSCALE_PROGRESS=lines {bin} --db {d}/k.db {} --dir {d} 3<&- >/dev/null & p=$!; \
         echo $p > {d}/pid; \
         ( cat <&3 >/dev/null 2>&1 & c=$!; echo $c > {d}/cat.pid; wait $c; \
           [ -e {d}/done ] || kill -TERM $p ) >/dev/null 2>&1 & \
         exec 3<&-; wait $p; s=$?; touch {d}/done; \
         n=0; while [ ! -s {d}/cat.pid ] && [ $n -lt 50 ]; do sleep 0.1; n=$((n+1)); done; \
         kill $(cat {d}/cat.pid) 2>/dev/null; exit $s",
        words.join(" ")
    );
    let mut c = job.ssh.command(host, &script);
    c.stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = c
        .spawn()
        .map_err(|e| Failure::Failed(format!("cannot start ssh: {e}")))?;
    // Ctrl-C here kills ssh's process group; the watchdog does the rest.
    let _registered = crate::signals::Registered::new(child.id() as i32);
    let _stdin = child.stdin.take();
    let last = match child.stderr.take() {
        Some(err) => relay(err, i, tx),
        None => String::new(),
    };
    let status = child
        .wait()
        .map_err(|e| Failure::Failed(format!("ssh: {e}")))?;
    if crate::signals::interrupted().is_some() {
        return Err(Failure::Failed("interrupted".into()));
    }
    match status.code() {
        Some(0) => Ok(()),
        Some(255) => Err(Failure::Unreachable(format!("connection lost: {last}"))),
        code => Err(Failure::Failed(format!(
            "the run failed ({}): {last}",
            code.map_or("killed".to_string(), |c| format!("exit {c}"))
        ))),
    }
}

/// The remote run's stderr as events: progress lines to the host's bar,
/// other lines as they are. Returns the last line, which says why when the
/// run fails.
fn relay(err: impl std::io::Read, i: usize, tx: &mpsc::Sender<Event>) -> String {
    let mut last = String::new();
    for line in BufReader::new(err).lines() {
        let Ok(line) = line else { break };
        match line.strip_prefix(progress::PREFIX) {
            Some(p) => match progress::parse(p) {
                Some((pos, len, msg)) => {
                    let _ = tx.send(Event::Progress(i, pos, len, msg));
                }
                None => {
                    let _ = tx.send(Event::Line(i, p.trim().to_string()));
                }
            },
            None if line.trim().is_empty() => {}
            None => {
                last = line.trim().to_string();
                if !line.starts_with("kscale: run ") {
                    let _ = tx.send(Event::Line(i, last.clone()));
                }
            }
        }
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn remote_commands() {
        assert_eq!(
            remote_command(&words("syscall --quick")).unwrap(),
            words("run syscall --quick")
        );
        assert_eq!(
            remote_command(&words("study --quick")).unwrap(),
            words("study --quick")
        );
        for bad in [
            "nosuch",
            "syscall --bogus",
            "--resume latest",
            "syscall --dir /x",
            "--quick",
        ] {
            assert!(remote_command(&words(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn this_binary_is_checked() {
        let exe = std::env::current_exe().unwrap();
        let here = kscale_sys::snapshot::take("", "");
        let arch = here["kernel"]["machine"].as_str().unwrap().to_string();
        let glibc = format!("glibc {}", here["libc"]["version"].as_str().unwrap());
        assert!(compatible(&exe, &arch, &glibc).is_ok());
        assert!(compatible(&exe, "riscv64", &glibc).is_err());
        if !is_static(&exe) {
            let e = compatible(&exe, &arch, "glibc 2.1").unwrap_err();
            assert!(e.contains("older"), "{e}");
            assert!(compatible(&exe, &arch, "none").is_err());
        }
    }
}
