//! The system `ssh` client as kscale's way to other machines: the user's
//! own configuration, keys and agent, never a password prompt
//! (`BatchMode=yes`). Hosts are what ssh accepts: `[USER@]HOST[:PORT]`,
//! where HOST may be an alias from the ssh configuration.

use crate::error::user;
use anyhow::Result;
use std::path::Path;
use std::process::{Command, Stdio};

/// One fleet host as given on the command line or in a hosts file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    /// As the user wrote it; names the host in labels and messages.
    pub name: String,
    /// `[USER@]HOST` as ssh takes it.
    pub dest: String,
    pub port: Option<u16>,
}

impl Host {
    /// `[USER@]HOST[:PORT]`, an IPv6 address in brackets (`[::1]:2222`).
    pub fn parse(s: &str) -> Result<Host, String> {
        let s = s.trim();
        let bad = |why: &str| {
            Err(format!(
                "bad host `{s}`: {why} (expected [USER@]HOST[:PORT])"
            ))
        };
        if s.is_empty() {
            return bad("empty");
        }
        if s.starts_with('-') {
            return bad("a host must not start with `-`");
        }
        if let Some(c) = s
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || "._-@:[]%".contains(*c)))
        {
            return bad(&format!("`{c}` is not allowed in a host name"));
        }
        let (userpart, hostport) = match s.rsplit_once('@') {
            Some((u, h)) if !u.is_empty() && !u.contains('@') => (Some(u), h),
            Some(_) => return bad("bad user"),
            None => (None, s),
        };
        let (host, port) = if let Some(rest) = hostport.strip_prefix('[') {
            let Some((h, after)) = rest.split_once(']') else {
                return bad("unclosed `[`");
            };
            match after {
                "" => (h, None),
                p => match p.strip_prefix(':') {
                    Some(p) => (h, Some(p)),
                    None => return bad("junk after `]`"),
                },
            }
        } else if hostport.matches(':').count() == 1 {
            let (h, p) = hostport.split_once(':').unwrap_or((hostport, ""));
            (h, Some(p))
        } else if hostport.contains(':') {
            return bad("an IPv6 address needs brackets");
        } else {
            (hostport, None)
        };
        if host.is_empty() {
            return bad("no host name");
        }
        let port = match port {
            None => None,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 => Some(n),
                _ => return bad(&format!("port `{p}` is not 1-65535")),
            },
        };
        Ok(Host {
            name: s.to_string(),
            dest: match userpart {
                Some(u) => format!("{u}@{host}"),
                None => host.to_string(),
            },
            port,
        })
    }
}

/// `--hosts a,b,c` (repeatable).
pub fn parse_list(specs: &[String]) -> Result<Vec<Host>> {
    let mut out = Vec::new();
    for s in specs.iter().flat_map(|s| s.split(',')) {
        out.push(Host::parse(s).map_err(user)?);
    }
    Ok(out)
}

/// A hosts file: one host per line; blank lines and `#` comments are
/// skipped. A bad line is named by its number.
pub fn parse_file(path: &Path) -> Result<Vec<Host>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| user(format!("cannot read hosts file {}: {e}", path.display())))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let h = Host::parse(line)
            .map_err(|e| user(format!("hosts file {} line {}: {e}", path.display(), i + 1)))?;
        out.push(h);
    }
    if out.is_empty() {
        return Err(user(format!("hosts file {} names no host", path.display())));
    }
    Ok(out)
}

/// How to call ssh: the user's extra options (`--ssh-config`, `--ssh-option`).
#[derive(Clone, Debug, Default)]
pub struct Ssh {
    pub config: Option<std::path::PathBuf>,
    pub options: Vec<String>,
}

impl Ssh {
    /// `ssh … HOST -- REMOTE_COMMAND`, in its own process group so that a
    /// Ctrl-C reaches kscale alone and kscale decides how remote runs end.
    pub fn command(&self, host: &Host, remote: &str) -> Command {
        let mut c = Command::new("ssh");
        if let Some(f) = &self.config {
            c.arg("-F").arg(f);
        }
        c.args(["-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]);
        c.args(["-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]);
        for o in &self.options {
            c.arg("-o").arg(o);
        }
        if let Some(p) = host.port {
            c.arg("-p").arg(p.to_string());
        }
        c.arg("-T").arg(&host.dest).arg("--").arg(remote);
        std::os::unix::process::CommandExt::process_group(&mut c, 0);
        c.stdin(Stdio::null());
        c
    }

    /// Runs a short remote command and returns its standard output, or the
    /// reason it failed (ssh's own last line when the host was not reached).
    /// Ctrl-C kills it.
    pub fn output(&self, host: &Host, remote: &str) -> Result<String, Failure> {
        self.call(host, remote, None, true)
    }

    /// [`Ssh::output`] with a file as the remote command's standard input.
    pub fn output_with_input(
        &self,
        host: &Host,
        remote: &str,
        input: &Path,
    ) -> Result<String, Failure> {
        self.call(host, remote, Some(input), true)
    }

    /// [`Ssh::output`] that a Ctrl-C does not stop: the clean-up after one.
    pub fn cleanup(&self, host: &Host, remote: &str) -> Result<String, Failure> {
        self.call(host, remote, None, false)
    }

    fn call(
        &self,
        host: &Host,
        remote: &str,
        input: Option<&Path>,
        killable: bool,
    ) -> Result<String, Failure> {
        let mut c = self.command(host, remote);
        if let Some(f) = input {
            let file = std::fs::File::open(f)
                .map_err(|e| Failure::Failed(format!("cannot read {}: {e}", f.display())))?;
            c.stdin(file);
        }
        let child = c
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Failure::Failed(format!("cannot start ssh: {e}")))?;
        let _registered = killable.then(|| crate::signals::Registered::new(child.id() as i32));
        let out = child
            .wait_with_output()
            .map_err(|e| Failure::Failed(format!("ssh: {e}")))?;
        let err = last_line(&String::from_utf8_lossy(&out.stderr));
        match out.status.code() {
            Some(0) => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
            // ssh's own failures (connection, authentication) exit 255.
            Some(255) => Err(Failure::Unreachable(err)),
            code => Err(Failure::Failed(format!(
                "remote command failed ({}): {err}",
                code.map_or("killed".to_string(), |c| format!("exit {c}"))
            ))),
        }
    }
}

/// Why a host's part of the fleet did not happen.
#[derive(Clone, Debug, PartialEq)]
pub enum Failure {
    /// ssh could not reach or log in to the host.
    Unreachable(String),
    Failed(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Unreachable(e) => write!(f, "unreachable: {e}"),
            Failure::Failed(e) => write!(f, "{e}"),
        }
    }
}

pub fn last_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("no message")
        .to_string()
}

/// A word for a POSIX shell, quoted when it needs to be.
pub fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts() {
        let h = Host::parse("root@10.0.0.1:2222").unwrap();
        assert_eq!((h.dest.as_str(), h.port), ("root@10.0.0.1", Some(2222)));
        let h = Host::parse("lab-3").unwrap();
        assert_eq!((h.dest.as_str(), h.port), ("lab-3", None));
        let h = Host::parse("me@[fe80::1%eth0]:22").unwrap();
        assert_eq!((h.dest.as_str(), h.port), ("me@fe80::1%eth0", Some(22)));
        for bad in [
            "",
            "-oProxyCommand=x",
            "a b",
            "h:0",
            "h:99999",
            "::1",
            "a;b",
            "@h",
        ] {
            assert!(Host::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hosts_file_names_the_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("hosts");
        std::fs::write(&f, "# lab\nh1\n\nh2:22 # second\nbad host\n").unwrap();
        let e = parse_file(&f).unwrap_err().to_string();
        assert!(e.contains("line 5") && e.contains("bad host"), "{e}");
        std::fs::write(&f, "h1\nh2:22 # second\n").unwrap();
        assert_eq!(parse_file(&f).unwrap().len(), 2);
    }

    #[test]
    fn quoting() {
        assert_eq!(quote("syscall.null"), "syscall.null");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
    }
}
