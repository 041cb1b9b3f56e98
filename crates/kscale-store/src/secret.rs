//! Keeping secrets out of records (docs/store.md). A run's command line,
//! options and system snapshot are stored and then shown by `show`,
//! `export` and the HTML report, which are made to be shared; a store
//! password or a peer token in them would travel with every copy. The
//! store masks them when it records a run and again when it reads one, so
//! runs recorded before masking existed come out masked too. Masking is
//! idempotent and pure.

use crate::location::{mask_password_params, mask_url};
use serde_json::Value;

/// What replaces a secret.
pub const MASK: &str = "***";

/// Is an option or key named like a secret (`--token`, `password`,
/// `peer_token`…)? Its value is masked whatever it looks like.
pub fn is_secret_name(name: &str) -> bool {
    let n = name.trim_start_matches('-').to_ascii_lowercase();
    ["token", "password", "passwd", "secret"]
        .iter()
        .any(|w| n.contains(w))
}

/// A command line with its secrets masked: the value of a secret-named
/// option (`--token X`, `--token=X`), the password of any URL
/// (`postgres://user:SECRET@host/db`, as `--db URL` or `--db=URL`) and any
/// `password=` parameter of a connection string.
pub fn mask_args<I, S>(args: I) -> Vec<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut out = Vec::new();
    let mut hide_next = false;
    for a in args {
        let a = a.as_ref();
        if hide_next {
            out.push(MASK.to_string());
            hide_next = false;
            continue;
        }
        match a.strip_prefix("--").and_then(|o| o.split_once('=')) {
            Some((name, _)) if is_secret_name(name) => out.push(format!("--{name}={MASK}")),
            Some((name, value)) => out.push(format!("--{name}={}", mask_text(value))),
            None if a.starts_with("--") && is_secret_name(a) => {
                out.push(a.to_string());
                hide_next = true;
            }
            None => out.push(mask_text(a)),
        }
    }
    out
}

/// Text with the password of every URL in it, and every `password=`
/// parameter, masked. A URL runs from its scheme to the next whitespace.
pub fn mask_text(s: &str) -> String {
    if !s.contains("://") {
        return mask_password_params(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(sep) = rest.find("://") {
        // The scheme: the letters, digits, `+`, `-` and `.` before `://`.
        let start = rest[..sep]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |i| i + 1);
        let end = rest[sep..]
            .find(char::is_whitespace)
            .map_or(rest.len(), |i| sep + i);
        out.push_str(&mask_password_params(&rest[..start]));
        out.push_str(&mask_url(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(&mask_password_params(rest));
    out
}

/// A JSON value with every string masked as [`mask_text`] masks it and the
/// value of every secret-named key ([`is_secret_name`]) replaced by
/// [`MASK`] (unless it is null or empty: nothing to hide).
pub fn mask_json(v: &Value) -> Value {
    match v {
        Value::String(s) => Value::String(mask_text(s)),
        Value::Array(a) => Value::Array(a.iter().map(mask_json).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| {
                    let empty = v.is_null() || v.as_str() == Some("");
                    let v = if is_secret_name(k) && !empty {
                        Value::String(MASK.into())
                    } else {
                        mask_json(v)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SECRET: &str = "s3cret";

    #[test]
    fn command_lines_lose_passwords_and_tokens() {
        let args = [
            "kscale",
            "--db",
            "postgres://kscale:s3cret@db.example/lab",
            "tune",
            "plan.toml",
            "--db=postgresql://u:s3cret@h/d",
            "--token",
            "s3cret",
            "--token=s3cret",
            "--peer",
            "h1:7117,h2",
            "--db",
            "host=/run/postgresql dbname=lab password=s3cret",
            "--label",
            "x",
        ];
        let got = mask_args(args);
        assert_eq!(
            got,
            [
                "kscale",
                "--db",
                "postgres://kscale:***@db.example/lab",
                "tune",
                "plan.toml",
                "--db=postgresql://u:***@h/d",
                "--token",
                "***",
                "--token=***",
                "--peer",
                "h1:7117,h2",
                "--db",
                "host=/run/postgresql dbname=lab password=***",
                "--label",
                "x",
            ]
        );
        assert!(!got.concat().contains(SECRET));
        assert_eq!(mask_args(&got), got, "idempotent");
        // Nothing to mask: unchanged.
        let plain = ["kscale", "run", "syscall.null", "--db=/tmp/k.db", "--quick"];
        assert_eq!(mask_args(plain), plain);
    }

    #[test]
    fn urls_inside_text_are_masked() {
        assert_eq!(
            mask_text("connect to postgres://u:s3cret@h/d failed; retry http://a:b@c/ ok"),
            "connect to postgres://u:***@h/d failed; retry http://a:***@c/ ok"
        );
        assert_eq!(
            mask_text("PGPASSWORD=s3cret kscale"),
            "PGPASSWORD=*** kscale"
        );
        assert_eq!(mask_text("://odd"), "://odd");
        assert_eq!(mask_text("no secret here"), "no secret here");
    }

    #[test]
    fn json_strings_and_secret_keys_are_masked() {
        let v = json!({
            "dir": "/tmp",
            "db": "postgres://u:s3cret@h/d",
            "peers": ["a:1", {"token": "s3cret", "host": "b"}],
            "peer_token": "s3cret",
            "token": null,
            "n": 3,
        });
        let m = mask_json(&v);
        assert!(!m.to_string().contains(SECRET), "{m}");
        assert_eq!(m["db"], "postgres://u:***@h/d");
        assert_eq!(m["peers"][1]["token"], "***");
        assert_eq!(m["peer_token"], "***");
        assert_eq!(m["token"], Value::Null);
        assert_eq!(m["dir"], "/tmp");
        assert_eq!(m["n"], 3);
        assert_eq!(mask_json(&m), m, "idempotent");
    }
}
