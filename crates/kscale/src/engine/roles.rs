//! One trial of a macro workload (docs/macro.md): the parent starts the
//! server role confined to the case's CPUs, the load role on the CPUs the
//! configuration leaves free (or on `kscale peer`s), keeps time — ramp-up,
//! `begin`, the measured window, `end` — and turns the roles' outputs into
//! the trial's values. Every role process runs in its own process group,
//! registered with the signal handler, and is killed when its handle drops,
//! so a crash, a hang, a timeout or Ctrl-C leaves nothing behind.

use super::load::LoadHandle;
use super::peers::PeerSet;
use crate::signals;
use kscale_sys::procstat::Snapshot;
use kscale_workloads::roles::{
    self, Endpoint, Role, RoleLine, RoleOutput, RoleRequest, Roles, Share, Timing,
};
use kscale_workloads::{TrialOutput, TrialRequest, WorkloadDef};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A role process: its stdin for control lines, its stdout lines arriving on
/// a channel, the tail of its stderr for error messages.
pub struct RoleProc {
    child: Child,
    pid: i32,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
    _registered: signals::Registered,
}

impl RoleProc {
    /// Starts `kscale __worker` for one role in a new process group and hands
    /// it the request; the worker pins itself to `req.cpus`.
    pub fn spawn(req: &TrialRequest) -> Result<RoleProc, String> {
        let (mut child, registered) = super::worker::spawn_worker(req)?;
        let pid = child.id() as i32;
        let stdin = child.stdin.take();
        let (tx, lines) = mpsc::channel();
        if let Some(out) = child.stdout.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        let stderr = Arc::new(Mutex::new(String::new()));
        if let Some(mut err) = child.stderr.take() {
            let buf = stderr.clone();
            std::thread::spawn(move || {
                let mut chunk = [0u8; 4096];
                while let Ok(n) = err.read(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    if let Ok(mut b) = buf.lock() {
                        b.push_str(&String::from_utf8_lossy(&chunk[..n]));
                        // Only the tail is ever shown.
                        if b.len() > 16_384 {
                            let cut = b.len() - 8_192;
                            let cut = (cut..b.len()).find(|i| b.is_char_boundary(*i)).unwrap_or(0);
                            b.drain(..cut);
                        }
                    }
                }
            });
        }
        Ok(RoleProc {
            child,
            pid,
            stdin,
            lines,
            stderr,
            _registered: registered,
        })
    }

    /// Sends a control line (`begin`, `end`, `stop`); a role that is gone
    /// shows up when its output is read.
    pub fn send(&mut self, cmd: &str) {
        if let Some(s) = self.stdin.as_mut() {
            let _ = writeln!(s, "{cmd}");
            let _ = s.flush();
        }
    }

    /// A line if one has arrived; an error once the role is gone.
    pub fn try_line(&mut self, what: &str) -> Result<Option<String>, String> {
        match self.lines.try_recv() {
            Ok(l) => Ok(Some(l)),
            Err(mpsc::TryRecvError::Empty) => Ok(None),
            Err(mpsc::TryRecvError::Disconnected) => Err(self.death(what)),
        }
    }

    /// The role's next line, or why there is none by `deadline`.
    pub fn next_line(&mut self, deadline: Instant, what: &str) -> Result<RoleLine, String> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self
                .lines
                .recv_timeout(left.min(Duration::from_millis(100)))
            {
                Ok(line) if line.trim().is_empty() => continue,
                Ok(line) => return RoleLine::parse(&line).map_err(|e| format!("{e:#}")),
                Err(RecvTimeoutError::Timeout) => {
                    if let Some(sig) = signals::interrupted() {
                        return Err(format!("interrupted by signal {sig}"));
                    }
                    if Instant::now() >= deadline {
                        return Err(format!("{what} did not answer in time and was killed"));
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return Err(self.death(what)),
            }
        }
    }

    /// Why a role's output ended: its exit and the last line of its stderr.
    fn death(&mut self, what: &str) -> String {
        use std::os::unix::process::ExitStatusExt;
        let status = {
            let end = Instant::now() + Duration::from_secs(2);
            loop {
                match self.child.try_wait() {
                    Ok(Some(s)) => break Some(s),
                    Ok(None) if Instant::now() < end => {
                        std::thread::sleep(Duration::from_millis(10))
                    }
                    _ => break None,
                }
            }
        };
        // Give the stderr reader a moment to catch the last words.
        std::thread::sleep(Duration::from_millis(20));
        let last = self
            .stderr
            .lock()
            .map(|b| {
                b.lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("")
                    .trim()
                    .to_string()
            })
            .unwrap_or_default();
        let how = match status {
            Some(s) => match s.signal() {
                Some(sig) => format!("was killed by signal {sig}"),
                None => format!("exited with status {}", s.code().unwrap_or(-1)),
            },
            None => "closed its output".to_string(),
        };
        if last.is_empty() {
            format!("{what} {how}")
        } else {
            format!("{what} {how}: {last}")
        }
    }
}

impl Drop for RoleProc {
    fn drop(&mut self) {
        self.stdin.take();
        kscale_sys::process::kill_group(self.pid);
        let _ = self.child.wait();
    }
}

struct LocalLoad(RoleProc);

impl LoadHandle for LocalLoad {
    fn send(&mut self, cmd: &str) {
        self.0.send(cmd)
    }
    fn next_line(&mut self, deadline: Instant) -> Result<RoleLine, String> {
        self.0.next_line(deadline, "the load generator")
    }
    fn host(&self) -> String {
        "local".into()
    }
}

/// Where a trial's load runs.
pub enum LoadPlace<'a> {
    /// On this host's CPUs: `fixed` (`--load-cpus`) or those [`load_cpus`]
    /// chooses.
    Local {
        available: Vec<usize>,
        fixed: Option<Vec<usize>>,
    },
    /// On peers, the spread param split evenly among them.
    Peers(&'a mut PeerSet),
}

/// CPUs for a local load (docs/placement.md, "Where the load runs"): `fixed`
/// as given, else free CPUs sharing no core with the configuration, on its
/// node when it has enough; what is shared when that is impossible.
pub fn load_cpus(
    available: &[usize],
    config: &[usize],
    fixed: Option<&[usize]>,
) -> kscale_core::topo::LoadPlan {
    if let Some(f) = fixed {
        let both: Vec<usize> = f.iter().copied().filter(|c| config.contains(c)).collect();
        return kscale_core::topo::LoadPlan {
            cpus: f.to_vec(),
            shared: (!both.is_empty()).then(|| {
                format!(
                    "the measured CPUs {} (--load-cpus)",
                    kscale_core::cpus::format_cpulist(&both)
                )
            }),
        };
    }
    let flat;
    let topo = match kscale_sys::topology::machine() {
        Ok(t) => t,
        Err(_) => {
            flat = kscale_core::Topology::default();
            &flat
        }
    };
    topo.load_cpus(available, config)
}

/// Sleeps until `until`, watching for Ctrl-C.
fn sleep_until(until: Instant) -> Result<(), String> {
    signals::sleep_until(until).map_err(|sig| format!("interrupted by signal {sig}"))
}

fn expect_ready(line: Result<RoleLine, String>, what: &str) -> Result<Endpoint, String> {
    match line? {
        RoleLine::Ready(e) => Ok(e),
        RoleLine::Output(_) => Err(format!("{what} ended before it was ready")),
    }
}

fn expect_output(line: Result<RoleLine, String>, what: &str) -> Result<RoleOutput, String> {
    match line? {
        RoleLine::Output(o) => Ok(o),
        RoleLine::Ready(_) => Err(format!("{what} announced itself twice")),
    }
}

/// Runs one trial of a macro workload and returns its values, histograms,
/// role CPU times and the CPU accounting of the configuration's CPUs over the
/// measured window.
pub fn run_trial(
    w: &'static WorkloadDef,
    req: &TrialRequest,
    timeout: Duration,
    mut place: LoadPlace<'_>,
) -> Result<TrialOutput, String> {
    let roles: &Roles = w.roles.ok_or_else(|| format!("{} has no roles", w.id()))?;
    let deadline = Instant::now() + timeout;
    let peers = matches!(place, LoadPlace::Peers(_));
    let mut notes = Vec::new();
    let (server, endpoint) = match roles.server {
        Some(_) => {
            let (p, ep) = start_server(req, peers, deadline)?;
            (Some(p), Some(ep))
        }
        None => (None, None),
    };
    let (loads, all_cpus) = start_loads(&mut place, req, endpoint.as_ref(), deadline, &mut notes)?;
    let mut running = Running {
        loads,
        server,
        deadline,
    };
    let (before, after, outputs) = running.window(roles, req)?;
    let combined = roles::Combined {
        server: running.stop_server()?,
        loads: outputs,
    };
    let ours = combined.server_cpu_s().unwrap_or(0.0) + combined.load_cpu_s();
    let others =
        all_cpus.and_then(|cpus| kscale_sys::procstat::others_pct(&before, &after, &cpus, ours));
    let mut out = roles::finish(
        roles,
        w.metrics,
        &kscale_core::Params(req.params.clone()),
        &combined,
    )
    .map_err(|e| format!("{e:#}"))?;
    out.notes.extend(notes);
    out.accounting = kscale_sys::procstat::delta(&before, &after, &req.cpus).map(|mut a| {
        a.others_pct = others;
        a
    });
    Ok(out)
}

/// The server role on the case's CPUs, once it says where it listens:
/// on every address when peers bring the load, else on loopback only.
fn start_server(
    req: &TrialRequest,
    peers: bool,
    deadline: Instant,
) -> Result<(RoleProc, Endpoint), String> {
    let mut r = req.clone();
    r.role = Some(RoleRequest {
        role: Role::Server,
        config_cpus: req.cpus.clone(),
        endpoint: None,
        bind: if peers { "0.0.0.0" } else { "127.0.0.1" }.into(),
        share: Share::default(),
    });
    let mut p = RoleProc::spawn(&r)?;
    let ep = expect_ready(p.next_line(deadline, "the server"), "the server")?;
    Ok((p, ep))
}

/// A trial's load generators, local or on peers.
type Loads<'a> = Vec<Box<dyn LoadHandle + 'a>>;

/// The load generators where `place` says, each ready. Local ones also
/// give every CPU the trial's processes run on — the share others took of
/// them is the trial's (`others_pct`) — and a note when the load had to
/// share the measured CPUs.
fn start_loads<'a>(
    place: &'a mut LoadPlace<'_>,
    req: &TrialRequest,
    endpoint: Option<&Endpoint>,
    deadline: Instant,
    notes: &mut Vec<String>,
) -> Result<(Loads<'a>, Option<Vec<usize>>), String> {
    let mut loads: Loads<'a> = Vec::new();
    let mut all_cpus: Option<Vec<usize>> = None;
    match place {
        LoadPlace::Local { available, fixed } => {
            let plan = load_cpus(available, &req.cpus, fixed.as_deref());
            let mut cpus = req.cpus.clone();
            cpus.extend(plan.cpus.iter().filter(|c| !req.cpus.contains(c)));
            all_cpus = Some(cpus);
            if let Some(what) = plan.shared {
                notes.push(format!("load generator shared {what}"));
            }
            let mut r = req.clone();
            r.cpus = plan.cpus;
            r.role = Some(RoleRequest {
                role: Role::Load,
                config_cpus: req.cpus.clone(),
                endpoint: endpoint.cloned().map(|mut e| {
                    e.host = "127.0.0.1".into();
                    e
                }),
                bind: String::new(),
                share: Share::default(),
            });
            loads.push(Box::new(LocalLoad(RoleProc::spawn(&r)?)));
        }
        LoadPlace::Peers(set) => loads.extend(set.start_loads(req, endpoint)?),
    }
    for l in loads.iter_mut() {
        let what = format!("the load generator ({})", l.host());
        expect_ready(l.next_line(deadline), &what)?;
    }
    Ok((loads, all_cpus))
}

/// A trial's roles once they are ready. The loads come first so that,
/// dropped on an error, they are killed before the server they drive.
struct Running<'a> {
    loads: Loads<'a>,
    server: Option<RoleProc>,
    deadline: Instant,
}

impl Running<'_> {
    /// A control line to the server and every load generator.
    fn send_all(&mut self, cmd: &str) {
        if let Some(s) = self.server.as_mut() {
            s.send(cmd);
        }
        for l in self.loads.iter_mut() {
            l.send(cmd);
        }
    }

    /// The measured window as the workload keeps time — a ramp-up and a
    /// fixed duration, or until the loads have done their work — with
    /// /proc/stat at its start and end, and the loads' outputs.
    fn window(
        &mut self,
        roles: &Roles,
        req: &TrialRequest,
    ) -> Result<(Snapshot, Snapshot, Vec<RoleOutput>), String> {
        match roles.timing {
            Timing::Duration => {
                let duration = kscale_core::Params(req.params.clone())
                    .seconds(roles::DURATION.name)
                    .map_err(|e| e.to_string())?;
                sleep_until(Instant::now() + roles::ramp(duration))?;
                let before = kscale_sys::procstat::read();
                self.send_all("begin");
                sleep_until(Instant::now() + Duration::from_secs_f64(duration))?;
                self.send_all("end");
                let after = kscale_sys::procstat::read();
                let outputs = self.load_outputs()?;
                Ok((before, after, outputs))
            }
            Timing::Work => {
                let before = kscale_sys::procstat::read();
                self.send_all("begin");
                let outputs = self.load_outputs()?;
                if let Some(s) = self.server.as_mut() {
                    s.send("end");
                }
                let after = kscale_sys::procstat::read();
                Ok((before, after, outputs))
            }
        }
    }

    /// Each load generator's output, with the host its CPU times are of.
    fn load_outputs(&mut self) -> Result<Vec<RoleOutput>, String> {
        let mut outputs = Vec::with_capacity(self.loads.len());
        for l in self.loads.iter_mut() {
            let what = format!("the load generator ({})", l.host());
            outputs.push(with_host(
                expect_output(l.next_line(self.deadline), &what)?,
                l.host(),
            ));
        }
        Ok(outputs)
    }

    /// Stops the server and takes its output; within 10 s, since the load
    /// that kept it busy is over.
    fn stop_server(&mut self) -> Result<Option<RoleOutput>, String> {
        let Some(s) = self.server.as_mut() else {
            return Ok(None);
        };
        s.send("stop");
        let limit = self.deadline.min(Instant::now() + Duration::from_secs(10));
        Ok(Some(expect_output(
            s.next_line(limit, "the server"),
            "the server",
        )?))
    }
}

fn with_host(mut o: RoleOutput, host: String) -> RoleOutput {
    o.cpu.host = host;
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_takes_the_free_cpus_or_shares() {
        // This machine's topology: which free CPUs depends on it, but the
        // load never takes a measured CPU while one is free…
        let p = load_cpus(&[0, 1, 2, 3], &[0], None);
        assert!(!p.cpus.is_empty() && !p.cpus.contains(&0), "{p:?}");
        // …and says so when it must.
        let p = load_cpus(&[0, 1], &[0, 1], None);
        assert_eq!(p.cpus, [0, 1]);
        assert_eq!(
            p.shared.as_deref(),
            Some("the measured CPUs: the configuration takes every CPU")
        );
        let p = load_cpus(&[0, 1, 2], &[1], Some(&[1, 2]));
        assert_eq!(p.cpus, [1, 2]);
        assert_eq!(
            p.shared.as_deref(),
            Some("the measured CPUs 1 (--load-cpus)")
        );
    }
}
