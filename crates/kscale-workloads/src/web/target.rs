//! `web.target`: the same load and mix against a web server outside
//! kscale — the user's own — that serves a file set written by `kscale web
//! fileset`. The set's manifest, served beside it, tells the load how many
//! directories there are; the dynamic kinds go to paths under the
//! `dynamic` prefix, or, without one, the mix is static-only and the result
//! says so. No server CPU is measured: the server is not kscale's process.

use super::fileset::MANIFEST;
use super::response::{parse_response, Parsed};
use anyhow::{bail, Context, Result};
use kscale_core::params::parse_http_url;
use kscale_core::Params;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Where and what the load sends to an external server.
pub(super) struct Target {
    pub url: String,
    pub addr: SocketAddr,
    pub dirs: u64,
    /// The URL's path: the file set's root on the server.
    pub base: String,
    /// The dynamic paths' prefix, `None` for a static-only server.
    pub dynamic: Option<String>,
}

pub(super) fn resolve(p: &Params) -> Result<Target> {
    let url = p.get("target")?.to_string();
    let u = parse_http_url(&url).with_context(|| format!("target={url}: not an http:// URL"))?;
    let addr = (u.host.as_str(), u.port)
        .to_socket_addrs()
        .with_context(|| format!("target={url}: cannot resolve {}", u.host))?
        .next()
        .with_context(|| format!("target={url}: {} has no address", u.host))?;
    let dynamic = match p.get("dynamic")? {
        "none" => None,
        d if d.starts_with('/') => Some(d.trim_end_matches('/').to_string()),
        d => bail!("dynamic={d}: accepted: none, or a path prefix starting with /"),
    };
    let dirs = manifest_dirs(&url, addr, &u.host, &u.path)?;
    Ok(Target {
        url,
        addr,
        dirs,
        base: u.path,
        dynamic,
    })
}

/// Reads the file set's manifest from the server: its directory count.
fn manifest_dirs(url: &str, addr: SocketAddr, host: &str, base: &str) -> Result<u64> {
    let timeout = Duration::from_secs(5);
    let mut s = TcpStream::connect_timeout(&addr, timeout)
        .with_context(|| format!("target {url}: cannot connect to {addr}"))?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    let path = format!("{base}/{MANIFEST}");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .with_context(|| format!("target {url}: cannot send a request"))?;
    let mut buf = Vec::new();
    s.take(1 << 20)
        .read_to_end(&mut buf)
        .with_context(|| format!("target {url}: no answer to GET {path}"))?;
    let (status, len) = match parse_response(&buf) {
        Ok(Parsed::Done { status, len }) => (status, len),
        Ok(Parsed::Partial) => bail!("target {url}: an incomplete answer to GET {path}"),
        Err(e) => bail!("target {url} does not answer as an HTTP server: {e:#}"),
    };
    if status != 200 {
        bail!(
            "target {url} serves no kscale file set: GET {path} answered HTTP {status} (write one \
             with `kscale web fileset --dir DOCROOT` and serve DOCROOT)"
        );
    }
    let head = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(buf.len(), |i| i + 4);
    let body = &buf[head.min(buf.len())..len.min(buf.len())];
    let json = String::from_utf8_lossy(body);
    let v: serde_json::Value = serde_json::from_str(json.trim())
        .with_context(|| format!("target {url}: {path} is not a kscale file set manifest"))?;
    v.get("dirs")
        .and_then(|d| d.as_u64())
        .filter(|d| *d > 0)
        .with_context(|| format!("target {url}: {path} names no directory count"))
}
