//! Connecting to a PostgreSQL store (docs/store.md): the URL parsed by the
//! `postgres` crate (pure Rust, no libpq, no TLS), the password taken from
//! the URL or `$PGPASSWORD` and never shown.

use crate::location::mask_url;
use crate::{Result, StoreError};
use std::time::Duration;

pub(crate) fn connect(url: &str) -> Result<postgres::Client> {
    let shown = mask_url(url);
    let mut cfg: postgres::Config = url.parse().map_err(|e| StoreError::BadUrl {
        url: shown.clone(),
        why: chain(&e),
    })?;
    if cfg.get_hosts().is_empty() {
        return Err(StoreError::BadUrl {
            url: shown,
            why: "no host: give one (postgres://user@host/db) or a socket directory \
                  (postgres://user@%2Frun%2Fpostgresql/db, or ?host=/run/postgresql)"
                .into(),
        });
    }
    if cfg.get_dbname().is_none() {
        return Err(StoreError::BadUrl {
            url: shown,
            why: "no database name: add it as the path (postgres://user@host/kscale)".into(),
        });
    }
    // As libpq does: the login name when the URL names no user.
    if cfg.get_user().is_none() {
        if let Some(u) = ["USER", "LOGNAME"]
            .iter()
            .find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()))
        {
            cfg.user(&u);
        }
    }
    if cfg.get_password().is_none() {
        if let Some(p) = std::env::var_os("PGPASSWORD").filter(|p| !p.is_empty()) {
            cfg.password(p.as_encoded_bytes());
        }
    }
    if cfg.get_connect_timeout().is_none() {
        cfg.connect_timeout(Duration::from_secs(10));
    }
    if cfg.get_application_name().is_none() {
        cfg.application_name("kscale");
    }
    cfg.connect(postgres::NoTls)
        .map_err(|e| StoreError::Connect {
            url: shown,
            why: chain(&e),
        })
}

/// An error with its causes, `a: b: c` — the `postgres` crate's own
/// `Display` stops at "db error". Neither the crate's messages nor the
/// server's repeat a password.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}
