//! The server role on Debian's nginx, with a guardian that cleans it up.

use super::raise_nofile;
use crate::roles::{Endpoint, Phase, RoleCtx, RoleOutput};
use anyhow::{bail, Context, Result};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

// ------------------------------------------------------------------ server

/// nginx: `$KSCALE_NGINX`, /usr/sbin/nginx, or on PATH.
fn find_nginx() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("KSCALE_NGINX") {
        let p = PathBuf::from(p);
        if !p.is_file() {
            bail!(
                "nginx not found at KSCALE_NGINX={} (web.nginx needs Debian's nginx-light)",
                p.display()
            );
        }
        return Ok(p);
    }
    let mut cands = vec![PathBuf::from("/usr/sbin/nginx")];
    if let Some(path) = std::env::var_os("PATH") {
        cands.extend(std::env::split_paths(&path).map(|d| d.join("nginx")));
    }
    cands
        .into_iter()
        .find(|p| p.is_file())
        .context("nginx not found (web needs Debian's nginx-light: /usr/sbin/nginx or on PATH)")
}

/// [`crate::WorkloadDef::unavailable`] of `web.nginx`: nginx not installed.
pub fn unavailable(_: &crate::WorkloadDef, _: &kscale_core::Params) -> Option<String> {
    find_nginx().err().map(|e| format!("{e:#}"))
}

/// nginx's configuration: the file set as document root, sendfile,
/// unlimited keep-alive, and in-process handlers for the dynamic kinds.
pub fn nginx_conf(dir: &Path, docroot: &Path, port: u16, workers: usize, conns: u64) -> String {
    let d = dir.display();
    let root = docroot.display();
    let user = if nix::unistd::geteuid().is_root() {
        "user root;\n"
    } else {
        ""
    };
    // Every POST holds two more connections (the internal proxy hop), and
    // one worker may accept nearly all clients.
    let wc = (2 * conns + 1024).max(4096);
    format!(
        "{user}daemon off;
master_process on;
worker_processes {workers};
worker_rlimit_nofile {nofile};
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections {wc}; use epoll; multi_accept on; }}
http {{
  access_log off;
  sendfile on;
  tcp_nopush on;
  tcp_nodelay on;
  keepalive_timeout 300s;
  keepalive_requests 100000000;
  client_body_temp_path {d}/body;
  proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi;
  scgi_temp_path {d}/scgi;
  default_type application/octet-stream;
  log_format post '$msec $remote_addr $request_body';
  server {{
    listen 127.0.0.1:{port} backlog=65535;
    root {root};
    location = /dyn {{ default_type text/html;
      return 200 '<html><body>dynamic GET user=$arg_user file=$arg_file at $msec</body></html>'; }}
    location = /cgi {{ default_type text/html;
      return 200 '<html><body>CGI user=$arg_user file=$arg_file at $msec</body></html>'; }}
    location = /ad {{ default_type text/html;
      add_header Set-Cookie 'found_cookie=Ad_id=$cookie_my_cookie&Ad_weight=1&Expired=0';
      return 200 '<html><body>ad for $cookie_my_cookie file=$arg_file</body></html>'; }}
    location = /post {{ access_log {d}/post.log post;
      proxy_http_version 1.1; proxy_set_header Connection '';
      proxy_pass http://127.0.0.1:{port}/posted; }}
    location = /posted {{ default_type text/html; return 200 '<html><body>posted</body></html>'; }}
  }}
}}
",
        nofile = wc * 2 + 64,
    )
}

/// A running nginx and its guardian. Dropping it — or the role process
/// dying — closes the guardian's pipe; the guardian then SIGKILLs nginx's
/// process group (master and workers) and removes nginx's directory.
struct Nginx {
    master: Child,
    guardian: Option<(Child, ChildStdin)>,
    dir: PathBuf,
}

impl Nginx {
    fn start(nginx: &Path, dir: &Path, conf: &Path) -> Result<Nginx> {
        use std::os::unix::process::CommandExt;
        let master = Command::new(nginx)
            .arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(conf)
            .arg("-e")
            .arg(dir.join("error.log"))
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("cannot start {}", nginx.display()))?;
        let pgid = master.id();
        let mut n = Nginx {
            master,
            guardian: None,
            dir: dir.to_path_buf(),
        };
        let mut g = Command::new("/bin/sh")
            .arg("-c")
            .arg(r#"read _ ; kill -9 -"$1" 2>/dev/null ; rm -rf "$2""#)
            .arg("kscale-web-guard")
            .arg(pgid.to_string())
            .arg(dir)
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start nginx's guardian (/bin/sh)")?;
        let pipe = g.stdin.take().context("guardian pipe")?;
        n.guardian = Some((g, pipe));
        Ok(n)
    }

    /// The last line nginx wrote to its error log, for error messages.
    fn last_error(&self) -> String {
        std::fs::read_to_string(self.dir.join("error.log"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .map(str::to_string)
            })
            .unwrap_or_else(|| "no message in its error log".into())
    }

    /// Waits until nginx accepts connections on `port`.
    fn wait_listening(&mut self, port: u16) -> Result<()> {
        let end = Instant::now() + Duration::from_secs(15);
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        loop {
            if let Some(st) = self.master.try_wait().context("waiting for nginx")? {
                bail!("nginx exited ({st}): {}", self.last_error());
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if Instant::now() >= end {
                bail!(
                    "nginx did not listen on {addr} within 15 s: {}",
                    self.last_error()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// CPU seconds of every process in nginx's group (master and workers),
    /// from /proc: they are not our waited-for children, so getrusage does
    /// not see them inside the window.
    fn cpu_seconds(&self) -> f64 {
        let pgid = self.master.id() as i64;
        // SAFETY: sysconf takes a constant and touches no memory.
        let tck = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        let mut ticks = 0u64;
        let Ok(rd) = std::fs::read_dir("/proc") else {
            return 0.0;
        };
        for e in rd.flatten() {
            if !e
                .file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
            {
                continue;
            }
            let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
                continue;
            };
            // Fields after the parenthesised command name: state is 3, pgrp
            // 5, utime 14, stime 15 (1-based, as in proc(5)).
            let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
                continue;
            };
            let f: Vec<&str> = rest.split_whitespace().collect();
            if f.len() > 12 && f[2].parse::<i64>().ok() == Some(pgid) {
                ticks += f[11].parse::<u64>().unwrap_or(0) + f[12].parse::<u64>().unwrap_or(0);
            }
        }
        ticks as f64 / tck
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        if let Some((mut g, pipe)) = self.guardian.take() {
            drop(pipe);
            let _ = g.wait();
        } else {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(self.master.id() as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = std::fs::remove_dir_all(&self.dir);
        }
        let _ = self.master.kill();
        let _ = self.master.wait();
    }
}

/// A free loopback port. nginx binds it itself a moment later; a lost race
/// shows as nginx exiting with "Address already in use" and is retried.
fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").context("bind 127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

pub(super) fn server(ctx: &RoleCtx) -> Result<RoleOutput> {
    let nginx = find_nginx()?;
    if ctx.bind != "127.0.0.1" {
        bail!("web serves on loopback only for now: load from peers is not supported yet");
    }
    let conns = ctx.params.int("conns")?;
    raise_nofile(conns + 256)?;
    let (docroot, dirs, out) = super::fileset::for_server(ctx)?;

    let ndir = ctx.dir.join(format!("web-nginx-{}", std::process::id()));
    let workers = ctx.config_cpus.len().max(1);
    let mut attempt = 0;
    let (server, port) = loop {
        attempt += 1;
        let _ = std::fs::remove_dir_all(&ndir);
        std::fs::create_dir_all(&ndir)
            .with_context(|| format!("cannot create {}", ndir.display()))?;
        let port = free_port()?;
        let conf = ndir.join("nginx.conf");
        std::fs::write(&conf, nginx_conf(&ndir, &docroot, port, workers, conns))
            .with_context(|| format!("cannot write {}", conf.display()))?;
        let mut n = Nginx::start(&nginx, &ndir, &conf)?;
        match n.wait_listening(port) {
            Ok(()) => break (n, port),
            Err(e) if attempt < 3 && format!("{e:#}").contains("in use") => continue,
            Err(e) => return Err(e),
        }
    };
    ctx.ready(Endpoint::on_port(port, serde_json::json!({ "dirs": dirs })))?;
    let limit = Duration::from_secs(7 * 86_400);
    ctx.wait_for(Phase::Measure, limit);
    let cpu0 = server.cpu_seconds();
    ctx.wait_for(Phase::Done, limit);
    let cpu1 = server.cpu_seconds();
    ctx.wait_for(Phase::Stop, limit);
    drop(server);
    Ok(out
        .count("nginx_cpu_s", (cpu1 - cpu0).max(0.0))
        .note("server: nginx; CGI requests (0.15 %) are answered in-process (nginx runs no CGI)"))
}
