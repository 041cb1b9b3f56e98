//! `kscale web fileset`: writes the `web` family's SPECweb99 file set for a
//! web server outside kscale, which `kscale run web --target URL` then
//! drives (docs/families/web.md). The set is the one the family's own
//! servers serve: the same directories for the same `--conns`, the same
//! bytes for the same `--seed`, and a manifest the load reads back.

use crate::error::user;
use crate::output::outln;
use anyhow::Result;
use kscale_workloads::web;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(after_help = "Examples:
  kscale web fileset --dir /srv/www --conns 800      SPECweb99's set for 800 connections
  kscale run web --target http://127.0.0.1:8080/     then drive the server serving /srv/www")]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// Write the deterministic SPECweb99 file set (and its manifest) into a directory.
    Fileset(FilesetArgs),
    /// Serve a file set with kscale's own web server until Ctrl-C (for other load generators,
    /// such as wrk in scripts/validate-web).
    Serve(ServeArgs),
    /// Print the nginx configuration web.nginx runs its server with, for an nginx started by
    /// hand (scripts/validate-web points wrk at one).
    NginxConf(NginxConfArgs),
}

#[derive(clap::Args)]
struct NginxConfArgs {
    /// nginx's own directory: its pid file, error log and temporary files.
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// The document root (a file set from `kscale web fileset`).
    #[arg(long, value_name = "DIR")]
    root: PathBuf,
    /// The port to listen on, on 127.0.0.1.
    #[arg(long, value_name = "PORT")]
    port: u16,
    /// Worker processes.
    #[arg(long, value_name = "N", default_value_t = 1)]
    workers: usize,
    /// Connections the server is sized for (worker_connections and the file limit).
    #[arg(long, value_name = "N", default_value_t = 800)]
    conns: u64,
}

#[derive(clap::Args)]
struct ServeArgs {
    /// The file set's directory (written by `kscale web fileset`).
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// Address to listen on.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:8080")]
    listen: String,
    /// The server's design: thread-pool or epoll.
    #[arg(long, default_value = "epoll")]
    mode: String,
    /// CPUs the server sizes itself for (epoll: one event loop each; thread-pool: 16
    /// threads each); confine it with taskset.
    #[arg(long, value_name = "N", default_value_t = 1)]
    cpus: usize,
}

#[derive(clap::Args)]
struct FilesetArgs {
    /// Directory to write into (created if missing); serve it as the document root.
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// Connections the set is sized for (SPECweb99: (25 + 3.28·conns)/5 directories).
    #[arg(long, value_name = "N", default_value_t = 800)]
    conns: u64,
    /// Cap on the set's bytes (`64m`, `2g`); default a quarter of the free memory and of the
    /// free disk of DIR.
    #[arg(long, value_name = "SIZE")]
    fileset: Option<String>,
    /// Seed of the file contents (the run's `seed` param).
    #[arg(long, value_name = "S", default_value_t = 1)]
    seed: u64,
}

pub fn run(args: Args) -> Result<ExitCode> {
    match args.command {
        Sub::Fileset(a) => fileset(a),
        Sub::Serve(a) => serve(a),
        Sub::NginxConf(a) => nginx_conf(a),
    }
}

/// The configuration is web.nginx's own, so a reference tool pointed at
/// an nginx started with it meets the server kscale's load meets, not a
/// hand-kept copy that drifts from it.
fn nginx_conf(a: NginxConfArgs) -> Result<ExitCode> {
    if a.port == 0 {
        return Err(user("--port 0: give the port nginx listens on (1-65535)"));
    }
    if a.workers == 0 {
        return Err(user("--workers 0: give nginx's worker processes (≥ 1)"));
    }
    if a.conns == 0 {
        return Err(user(
            "--conns 0: give the connections nginx is sized for (≥ 1)",
        ));
    }
    outln!(
        "{}",
        web::nginx_conf(&a.dir, &a.root, a.port, a.workers, a.conns).trim_end()
    )?;
    Ok(ExitCode::SUCCESS)
}

fn serve(a: ServeArgs) -> Result<ExitCode> {
    let mode = web::Mode::parse(&a.mode).map_err(|e| user(format!("--{e}")))?;
    let addr: std::net::SocketAddrV4 = a.listen.parse().map_err(|_| {
        user(format!(
            "--listen {}: accepted: an IPv4 ADDR:PORT such as 127.0.0.1:8080",
            a.listen
        ))
    })?;
    if !a.dir.join(web::MANIFEST).is_file() {
        return Err(user(format!(
            "--dir {}: no file set there (no {}); write one with `kscale web fileset`",
            a.dir.display(),
            web::MANIFEST
        )));
    }
    if a.cpus == 0 {
        return Err(user("--cpus 0: give the CPUs the server runs on (≥ 1)"));
    }
    crate::signals::install();
    let stop = || crate::signals::interrupted().is_some();
    let scratch = std::env::temp_dir();
    let served = web::serve(&a.dir, &scratch, addr, mode, a.cpus, &stop, |port| {
        outln!("kscale web serve: {} on {}:{port}", a.mode, addr.ip())
    })?;
    outln!(
        "served {} requests ({} CGI, {} errors) with {}",
        served.requests,
        served.cgi_runs,
        served.errors,
        served.what
    )?;
    Ok(ExitCode::SUCCESS)
}

fn fileset(a: FilesetArgs) -> Result<ExitCode> {
    if a.conns == 0 {
        return Err(user(
            "--conns 0: give the connection count the set is for (≥ 1)",
        ));
    }
    if a.dir.exists() && !a.dir.is_dir() {
        return Err(user(format!(
            "--dir {}: exists and is not a directory",
            a.dir.display()
        )));
    }
    std::fs::create_dir_all(&a.dir)
        .map_err(|e| user(format!("--dir {}: cannot create it: {e}", a.dir.display())))?;
    let probe = a.dir.join(".kscale-probe");
    std::fs::write(&probe, b"").map_err(|e| {
        user(format!(
            "--dir {}: cannot write in it: {e}",
            a.dir.display()
        ))
    })?;
    let _ = std::fs::remove_file(&probe);
    let cap = match &a.fileset {
        None => web::auto_cap(&a.dir),
        Some(s) => kscale_core::params::parse_size(s)
            .filter(|c| *c > 0)
            .ok_or_else(|| {
                user(format!(
                    "--fileset {s}: accepted: a size such as 64m or 2g (bytes, binary multiples)"
                ))
            })?,
    };
    let (dirs, capped) = web::fileset_dirs(a.conns, cap);
    // A set written before by another command would be reused as is.
    let _ = std::fs::remove_file(a.dir.join(".complete"));
    web::write_fileset(&a.dir, dirs, a.seed)?;
    outln!(
        "wrote {dirs} directories ({} MB) and {} into {}",
        (dirs * web::DIR_BYTES) >> 20,
        web::MANIFEST,
        a.dir.display()
    )?;
    if capped {
        outln!("{}", web::cap_note(a.conns, dirs))?;
    }
    Ok(ExitCode::SUCCESS)
}
