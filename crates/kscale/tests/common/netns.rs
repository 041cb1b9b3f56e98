//! Network namespaces as test hosts: each test makes its own, with names and
//! addresses derived from its process id and a tag, and deletes them when the
//! guard drops, so nothing outlives a test and parallel tests never collide.
#![allow(dead_code)]

use std::process::Command;

pub struct Netns {
    pub name: String,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Netns {
    /// A fresh namespace with loopback up, or why it cannot be made (not
    /// root, no `ip`, namespaces refused).
    pub fn new(tag: &str) -> Result<Netns, String> {
        let name = format!("kst-{}-{tag}", std::process::id());
        ip(&["netns", "add", &name])?;
        let ns = Netns { name };
        ip(&["-n", &ns.name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// [`Netns::new`], or `None` after a [`super::skip`] saying why not.
    pub fn or_skip(tag: &str) -> Option<Netns> {
        Netns::new(tag)
            .map_err(|e| super::skip(&format!("network namespaces refused: {e}")))
            .ok()
    }

    /// A command run inside the namespace.
    pub fn command(&self, program: &std::path::Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]).arg(program);
        c
    }

    /// `kscale --db <the env's database> …` inside the namespace, run from
    /// the env's directory without colour and, given a mark, marked so that
    /// the test can find every process of the run afterwards.
    pub fn kscale(&self, env: &super::Env, mark: Option<&str>) -> Command {
        let mut c = self.command(&super::bin());
        c.current_dir(env.path())
            .env("NO_COLOR", "1")
            .arg("--db")
            .arg(env.db());
        if let Some(m) = mark {
            c.env("KSCALE_TEST_MARK", m);
        }
        c
    }

    /// The namespace's TCP socket tables (IPv4 and IPv6, header lines
    /// included), or `None` when they cannot be read.
    pub fn tcp_table(&self) -> Option<String> {
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.name,
                "cat",
                "/proc/net/tcp",
                "/proc/net/tcp6",
            ])
            .output()
            .ok()?;
        Some(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Listening TCP sockets in the namespace (IPv4 and IPv6): in a fresh
    /// namespace every one of them belongs to the test.
    pub fn listening_sockets(&self) -> usize {
        let Some(table) = self.tcp_table() else {
            return usize::MAX;
        };
        table
            .lines()
            .filter(|l| l.split_whitespace().nth(3) == Some("0A"))
            .count()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// Two namespaces joined by a veth pair: `a` at 10.R.S.1, `b` at 10.R.S.2,
/// with R from the pair's number in this process and S from the process id.
pub struct Pair {
    pub a: Netns,
    pub b: Netns,
    pub a_ip: String,
    pub b_ip: String,
    /// The veth end inside `a`.
    pub a_veth: String,
}

/// Tells apart the pairs of one test binary, whose tests run in parallel.
static PAIRS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Pair {
    /// [`Pair::new`], or `None` after a [`super::skip`] saying why not.
    pub fn or_skip(tag: &str) -> Option<Pair> {
        Pair::new(tag)
            .map_err(|e| super::skip(&format!("network namespaces refused: {e}")))
            .ok()
    }

    pub fn new(tag: &str) -> Result<Pair, String> {
        let a = Netns::new(&format!("{tag}a"))?;
        let b = Netns::new(&format!("{tag}b"))?;
        let pid = std::process::id();
        // Tests of one binary run in parallel threads of one process, so the
        // pair's number tells them apart in link names and subnets.
        let n = PAIRS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 100;
        let net = format!("10.{}.{}", 100 + n, pid % 256);
        let (va, vb) = (
            format!("kva{}x{n}", pid % 100_000),
            format!("kvb{}x{n}", pid % 100_000),
        );
        ip(&["link", "add", &va, "type", "veth", "peer", "name", &vb])?;
        let setup = || -> Result<(), String> {
            ip(&["link", "set", &va, "netns", &a.name])?;
            ip(&["link", "set", &vb, "netns", &b.name])?;
            ip(&[
                "-n",
                &a.name,
                "addr",
                "add",
                &format!("{net}.1/24"),
                "dev",
                &va,
            ])?;
            ip(&[
                "-n",
                &b.name,
                "addr",
                "add",
                &format!("{net}.2/24"),
                "dev",
                &vb,
            ])?;
            ip(&["-n", &a.name, "link", "set", &va, "up"])?;
            ip(&["-n", &b.name, "link", "set", &vb, "up"])
        };
        if let Err(e) = setup() {
            let _ = ip(&["link", "del", &va]);
            return Err(e);
        }
        Ok(Pair {
            a,
            b,
            a_ip: format!("{net}.1"),
            b_ip: format!("{net}.2"),
            a_veth: va,
        })
    }
}
