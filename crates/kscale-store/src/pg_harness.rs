//! A throw-away PostgreSQL cluster for tests: Debian's server binaries
//! (`/usr/lib/postgresql/*/bin`), `initdb` in a temp dir, a Unix socket in
//! that dir and no TCP (`listen_addresses=''`). Dropping it stops the server
//! (by its PID) and removes the dir; if the test process dies first, the
//! server gets SIGQUIT from the kernel (parent-death signal).
//!
//! PostgreSQL refuses to run as root, and tests run as root: then the server
//! runs as the `postgres` system user (the Debian package creates it), the
//! dir chowned to it. Clients connect as the superuser `postgres` by trust
//! over the socket, or as the role [`PgCluster::PW_ROLE`], which must give
//! its password (scram-sha-256), to test refused logins.
//!
//! Shared with the binary's integration tests through the `test-harness`
//! feature.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct PgCluster {
    dir: Option<tempfile::TempDir>,
    child: Child,
    stopped: bool,
}

impl PgCluster {
    /// A role that logs in only with [`PgCluster::PW`].
    pub const PW_ROLE: &'static str = "kscale_pw";
    pub const PW: &'static str = "pw-Secret-42";

    /// Starts a cluster, or says why it cannot — the caller skips with that
    /// reason (see [`cluster_or_skip`]).
    pub fn start() -> Result<PgCluster, String> {
        let bin = server_bin().ok_or(
            "no PostgreSQL server binaries in /usr/lib/postgresql/*/bin (Debian package `postgresql`)",
        )?;
        // The socket path must fit sun_path (108 bytes): a short dir in /tmp.
        let dir = tempfile::Builder::new()
            .prefix("kscale-pg.")
            .tempdir_in("/tmp")
            .map_err(|e| format!("temp dir: {e}"))?;
        let as_user = run_as()?;
        if let Some((uid, gid)) = as_user {
            chown(dir.path(), uid, gid)?;
        }
        let data = dir.path().join("data");
        let out = server_cmd(&bin.join("initdb"), as_user)
            .args([
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
                "-U",
            ])
            .arg("postgres")
            .arg("-D")
            .arg(&data)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("initdb: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "initdb failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        // Password logins for one role, trust for the rest; socket only.
        let hba = data.join("pg_hba.conf");
        std::fs::write(
            &hba,
            format!(
                "local all {} scram-sha-256\nlocal all all trust\n",
                Self::PW_ROLE
            ),
        )
        .map_err(|e| format!("{}: {e}", hba.display()))?;
        let log = std::fs::File::create(dir.path().join("server.log"))
            .map_err(|e| format!("server log: {e}"))?;
        let log2 = log.try_clone().map_err(|e| format!("server log: {e}"))?;
        let mut cmd = server_cmd(&bin.join("postgres"), as_user);
        cmd.arg("-D")
            .arg(&data)
            .arg("-k")
            .arg(dir.path())
            .args([
                "-c",
                "listen_addresses=",
                "-c",
                "fsync=off",
                "-c",
                "max_connections=60",
                "-c",
                "shared_buffers=16MB",
            ])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2);
        let child = cmd.spawn().map_err(|e| format!("postgres: {e}"))?;
        let mut c = PgCluster {
            dir: Some(dir),
            child,
            stopped: false,
        };
        c.wait_ready()?;
        let mut su = c.client("postgres")?;
        su.batch_execute(&format!(
            "CREATE ROLE {} LOGIN PASSWORD '{}'",
            Self::PW_ROLE,
            Self::PW
        ))
        .map_err(|e| format!("create role: {e}"))?;
        Ok(c)
    }

    pub fn dir(&self) -> &Path {
        self.dir
            .as_ref()
            .map_or(Path::new("/nonexistent"), |d| d.path())
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The socket directory, percent-encoded as a URL host.
    fn host(&self) -> String {
        self.dir()
            .to_string_lossy()
            .chars()
            .map(|c| match c {
                'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' | '.' | '~' => c.to_string(),
                c => {
                    let mut b = [0u8; 4];
                    c.encode_utf8(&mut b)
                        .bytes()
                        .map(|x| format!("%{x:02X}"))
                        .collect()
                }
            })
            .collect()
    }

    /// A URL for `db` as the trusted superuser.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@{}/{db}", self.host())
    }

    /// A URL for `db` as [`PgCluster::PW_ROLE`] with `password`.
    pub fn password_url(&self, db: &str, password: &str) -> String {
        format!(
            "postgres://{}:{password}@{}/{db}",
            Self::PW_ROLE,
            self.host()
        )
    }

    /// Creates an empty database `name`, owned by [`PgCluster::PW_ROLE`]
    /// (so both users can fill it), and returns its superuser URL.
    pub fn create_db(&self, name: &str) -> Result<String, String> {
        let mut su = self.client("postgres")?;
        su.batch_execute(&format!("CREATE DATABASE {name} OWNER {}", Self::PW_ROLE))
            .map_err(|e| format!("create database {name}: {e}"))?;
        Ok(self.url(name))
    }

    /// A client on `db` as the superuser, for tests that look behind the
    /// store.
    pub fn client(&self, db: &str) -> Result<postgres::Client, String> {
        postgres::Client::connect(&self.url(db), postgres::NoTls)
            .map_err(|e| format!("connect to {db}: {}", crate::pg::chain(&e)))
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                self.stopped = true;
                return Err(format!("postgres exited ({st}): {}", self.log_tail()));
            }
            if self.client("postgres").is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "postgres not ready after 60 s: {}",
                    self.log_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir().join("server.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(5)..].join(" | ")
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        if !self.stopped {
            // Fast shutdown: disconnect clients, stop cleanly.
            let pid = self.child.id() as libc::pid_t;
            unsafe { libc::kill(pid, libc::SIGINT) };
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                match self.child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() > deadline => {
                        let _ = self.child.kill();
                        let _ = self.child.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        }
        if let Some(d) = self.dir.take() {
            let _ = d.close();
        }
    }
}

/// A cluster, or `None` after printing why the test is skipped. Under `CI`
/// a skip is a failure.
pub fn cluster_or_skip(test: &str) -> Option<PgCluster> {
    match PgCluster::start() {
        Ok(c) => Some(c),
        Err(why) => {
            if std::env::var_os("CI").is_some() {
                panic!("{test}: cannot start PostgreSQL under CI: {why}");
            }
            eprintln!("SKIP {test}: cannot start PostgreSQL: {why}");
            None
        }
    }
}

/// The newest `/usr/lib/postgresql/N/bin` holding initdb and postgres.
fn server_bin() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            (bin.join("initdb").exists() && bin.join("postgres").exists()).then_some((v, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, b)| b)
}

/// `None` to run the server as ourselves; as root, the `postgres` user.
fn run_as() -> Result<Option<(u32, u32)>, String> {
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    let name = c"postgres";
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    if pw.is_null() {
        return Err("running as root and there is no `postgres` user to run the server as".into());
    }
    let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
    Ok(Some((uid, gid)))
}

fn chown(p: &Path, uid: u32, gid: u32) -> Result<(), String> {
    std::os::unix::fs::chown(p, Some(uid), Some(gid))
        .map_err(|e| format!("chown {}: {e}", p.display()))
}

/// A command for a server binary, as `user` if given, and sent SIGQUIT
/// (immediate shutdown) when the thread that started it dies.
fn server_cmd(bin: &Path, user: Option<(u32, u32)>) -> Command {
    let mut cmd = Command::new(bin);
    cmd.env("LC_ALL", "C").env_remove("PGDATA");
    unsafe {
        cmd.pre_exec(move || {
            if let Some((uid, gid)) = user {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(gid) != 0
                    || libc::setuid(uid) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
            }
            // After setuid: a credential change clears the parent-death signal.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGQUIT) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    fn children_of(pid: u32) -> Vec<u32> {
        let mut out = Vec::new();
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let status = std::fs::read_to_string(format!("/proc/{p}/status")).unwrap_or_default();
            let ppid = status
                .lines()
                .find_map(|l| l.strip_prefix("PPid:"))
                .and_then(|v| v.trim().parse::<u32>().ok());
            if ppid == Some(pid) {
                out.push(p);
            }
        }
        out
    }

    fn alive(pid: u32) -> bool {
        // A zombie is gone for our purposes: it holds no socket or file.
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| !s.contains(") Z "))
            .unwrap_or(false)
    }

    /// Dropping the cluster leaves no server process and no directory, even
    /// with a client still connected.
    #[test]
    fn drop_stops_the_server_and_removes_its_dir() {
        let Some(c) = cluster_or_skip("drop_stops_the_server_and_removes_its_dir") else {
            return;
        };
        let _client = c.client("postgres").unwrap();
        let pid = c.pid();
        let dir = c.dir().to_path_buf();
        let kids = children_of(pid);
        assert!(!kids.is_empty(), "a postmaster has background processes");
        assert!(dir.join(".s.PGSQL.5432").exists(), "socket in the temp dir");
        drop(c);
        assert!(!alive(pid), "postmaster {pid} still running");
        let deadline = Instant::now() + Duration::from_secs(10);
        while kids.iter().any(|k| alive(*k)) {
            assert!(Instant::now() < deadline, "left behind: {kids:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(!dir.exists(), "{} not removed", dir.display());
    }
}
