//! Where a store lives: a file path (SQLite) or a `postgres://` URL
//! (docs/store.md), and how a URL is shown without its password.

/// Schemes that select the PostgreSQL backend.
pub const PG_SCHEMES: [&str; 2] = ["postgres://", "postgresql://"];

/// Does `--db`/`KSCALE_DB` name a server rather than a file? Any
/// `scheme://` counts, so `mysql://…` is refused as a URL instead of
/// becoming a directory named `mysql:`.
pub fn is_url(s: &str) -> bool {
    match s.find("://") {
        Some(i) => {
            i > 0
                && s[..i]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        }
        None => false,
    }
}

pub fn is_postgres_url(s: &str) -> bool {
    PG_SCHEMES.iter().any(|p| s.starts_with(p))
}

/// The URL with every password replaced by `***`: the one in the user-info
/// part (`user:secret@host`) and any `password=` parameter. Where the
/// user-info cannot be told apart from the rest (an unencoded `@` later in
/// the URL), more is masked rather than less.
pub fn mask_url(url: &str) -> String {
    let Some(start) = url.find("://").map(|i| i + 3) else {
        return mask_password_params(url);
    };
    let rest = &url[start..];
    let mut out = url[..start].to_string();
    match rest.rfind('@') {
        Some(at) => {
            let userinfo = &rest[..at];
            match userinfo.find(':') {
                Some(colon) => {
                    out.push_str(&userinfo[..colon]);
                    out.push_str(":***");
                }
                None => out.push_str(userinfo),
            }
            out.push_str(&mask_password_params(&rest[at..]));
        }
        None => out.push_str(&mask_password_params(rest)),
    }
    out
}

/// `password=secret` → `password=***`, in a query string or a key=value
/// connection string (`password='a b'` quoted as libpq allows).
pub(crate) fn mask_password_params(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.to_ascii_lowercase().find("password=") {
        let value_at = i + "password=".len();
        out.push_str(&rest[..value_at]);
        out.push_str("***");
        let tail = &rest[value_at..];
        let end = match tail.strip_prefix('\'') {
            Some(q) => q.find('\'').map_or(tail.len(), |j| j + 2),
            None => tail
                .find(|c: char| c == '&' || c.is_whitespace())
                .unwrap_or(tail.len()),
        };
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_user_info_and_password_params() {
        let cases = [
            (
                "postgres://kscale:s3cret@db.example:5432/lab",
                "postgres://kscale:***@db.example:5432/lab",
            ),
            (
                "postgresql://u:p%40ss@%2Ftmp%2Fpg/lab?sslmode=disable",
                "postgresql://u:***@%2Ftmp%2Fpg/lab?sslmode=disable",
            ),
            ("postgres://u@host/lab", "postgres://u@host/lab"),
            (
                "postgres:///lab?host=/tmp&password=hunter2&user=u",
                "postgres:///lab?host=/tmp&password=***&user=u",
            ),
            // An unencoded `@` and `/` in the password: still masked.
            ("postgres://u:a/b@c@host/lab", "postgres://u:***@host/lab"),
        ];
        for (url, want) in cases {
            assert_eq!(mask_url(url), want, "{url}");
            assert!(!mask_url(url).contains("s3cret"));
        }
        assert_eq!(
            mask_password_params("host=/tmp password='a b' dbname=lab"),
            "host=/tmp password=*** dbname=lab"
        );
    }

    #[test]
    fn urls_and_paths() {
        assert!(is_url("postgres://h/d") && is_postgres_url("postgres://h/d"));
        assert!(is_url("postgresql://h/d") && is_postgres_url("postgresql://h/d"));
        assert!(is_url("mysql://h/d") && !is_postgres_url("mysql://h/d"));
        assert!(!is_url("/var/lib/k.db"));
        assert!(!is_url("./a://b"));
        assert!(!is_url("k.db"));
    }
}
