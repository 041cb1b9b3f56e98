//! Workload parameters: their declarations, validation of user values, and
//! typed access for workload code.

use std::collections::BTreeMap;
use thiserror::Error;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ParamKind {
    /// An integer in `min..=max`.
    Int { min: u64, max: u64 },
    /// A byte count in `min..=max`; accepts `512`, `4k`, `0.5m`, `1g` (binary
    /// multiples).
    Size { min: u64, max: u64 },
    /// One of a fixed set of words (an enum such as `mode=threads|epoll`).
    Choice(&'static [&'static str]),
    /// A positive count up to `max`, or `ncpus`: as many as the CPU
    /// configuration has (resolved by the workload, since one case runs on
    /// several).
    Count { max: u64 },
    /// A length of time in seconds, a decimal number in `min..=max`. The
    /// runner lets a trial's time limit grow with these params, so a long
    /// fixed-duration trial is never killed for its length.
    Seconds { min: f64, max: f64 },
    /// Free text: printable, no spaces, no `,` (the `--param` list separator).
    Str,
    /// A network address: `HOST`, `HOST:PORT` or `[V6]:PORT`, where HOST is
    /// an IP literal or a host name.
    Addr,
    /// An HTTP server's URL, `http://HOST[:PORT][/PATH]` (see
    /// [`parse_http_url`]). A workload with such a param drives a server
    /// outside kscale: `run --target URL` gives it, and families and suites
    /// leave the workload out unless it is named.
    Url,
}

impl ParamKind {
    /// Any non-negative integer.
    pub const INT: ParamKind = ParamKind::Int {
        min: 0,
        max: u64::MAX,
    };
    /// Any byte count, zero included.
    pub const SIZE: ParamKind = ParamKind::Size {
        min: 0,
        max: u64::MAX,
    };
    /// Any positive count or `ncpus`.
    pub const COUNT: ParamKind = ParamKind::Count { max: u64::MAX };
}

/// A param as declared in a workload's registry entry. `default` is the sweep
/// a normal run expands into; `quick` the shorter one `--quick` uses.
#[derive(Clone, Copy, Debug)]
pub struct ParamDef {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: ParamKind,
    pub default: &'static [&'static str],
    pub quick: &'static [&'static str],
}

impl ParamDef {
    pub fn values(&self, quick: bool) -> &'static [&'static str] {
        if quick && !self.quick.is_empty() {
            self.quick
        } else {
            self.default
        }
    }

    pub fn kind_label(&self) -> String {
        match self.kind {
            ParamKind::Int { min, max } => {
                format!("int{}", range_label(min, max, |v| v.to_string()))
            }
            ParamKind::Size { min, max } => format!("size{}", range_label(min, max, size_label)),
            ParamKind::Choice(c) => c.join("|"),
            ParamKind::Count { max } => {
                if max == u64::MAX {
                    "count|ncpus".into()
                } else {
                    format!("count 1..{max}|ncpus")
                }
            }
            ParamKind::Seconds { min, max } => format!("seconds {min}..{max}"),
            ParamKind::Str => "text".into(),
            ParamKind::Addr => "host[:port]".into(),
            ParamKind::Url => "http://host[:port]/[path]".into(),
        }
    }

    /// Checks a user-supplied value and returns it in canonical form.
    pub fn validate(&self, workload: &str, value: &str) -> Result<String, ParamError> {
        let bad = |accepted: String| ParamError::BadValue {
            workload: workload.to_string(),
            param: self.name.to_string(),
            value: value.to_string(),
            accepted,
        };
        match self.kind {
            ParamKind::Int { min, max } => value
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|v| (min..=max).contains(v))
                .map(|v| v.to_string())
                .ok_or_else(|| {
                    bad(format!(
                        "an integer{}",
                        range_words(min, max, |v| v.to_string())
                    ))
                }),
            ParamKind::Size { min, max } => parse_size(value)
                .filter(|v| (min..=max).contains(v))
                .map(|_| value.trim().to_ascii_lowercase())
                .ok_or_else(|| {
                    bad(format!(
                        "a size such as 512, 4k, 0.5m or 1g{}",
                        range_words(min, max, size_label)
                    ))
                }),
            ParamKind::Count { max } => match value.trim() {
                "ncpus" => Ok("ncpus".into()),
                v => v
                    .parse::<u64>()
                    .ok()
                    .filter(|n| (1..=max).contains(n))
                    .map(|n| n.to_string())
                    .ok_or_else(|| {
                        bad(if max == u64::MAX {
                            "a positive count or `ncpus`".into()
                        } else {
                            format!("a count from 1 to {max}, or `ncpus`")
                        })
                    }),
            },
            ParamKind::Choice(choices) => {
                if choices.contains(&value.trim()) {
                    Ok(value.trim().to_string())
                } else {
                    Err(bad(format!("one of {}", choices.join(", "))))
                }
            }
            ParamKind::Seconds { min, max } => value
                .trim()
                .trim_end_matches('s')
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= min && *v <= max)
                .map(|v| v.to_string())
                .ok_or_else(|| bad(format!("seconds from {min} to {max}"))),
            ParamKind::Str => {
                let v = value.trim();
                if !v.is_empty()
                    && v.len() <= 256
                    && v.chars().all(|c| c.is_ascii_graphic() && c != ',')
                {
                    Ok(v.to_string())
                } else {
                    Err(bad(
                        "1 to 256 printable characters without spaces or commas".into(),
                    ))
                }
            }
            ParamKind::Addr => parse_addr(value.trim())
                .map(|_| value.trim().to_string())
                .ok_or_else(|| bad("HOST, HOST:PORT or [IPV6]:PORT (port 1-65535)".into())),
            ParamKind::Url => parse_http_url(value.trim())
                .map(|_| value.trim().to_string())
                .ok_or_else(|| bad("an http://HOST[:PORT][/PATH] URL".into())),
        }
    }
}

/// Splits `HOST`, `HOST:PORT` or `[V6]:PORT` into host and optional port.
/// Hosts are IP literals or host names (letters, digits, `-`, `.`); nothing is
/// resolved here, so parsing never touches the network.
pub fn parse_addr(s: &str) -> Option<(String, Option<u16>)> {
    let port = |p: &str| p.parse::<u16>().ok().filter(|p| *p > 0);
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        host.parse::<std::net::Ipv6Addr>().ok()?;
        return match after {
            "" => Some((host.to_string(), None)),
            a => Some((host.to_string(), Some(port(a.strip_prefix(':')?)?))),
        };
    }
    if s.parse::<std::net::Ipv6Addr>().is_ok() {
        return Some((s.to_string(), None));
    }
    let (host, p) = match s.rsplit_once(':') {
        Some((h, p)) => (h, Some(port(p)?)),
        None => (s, None),
    };
    let name_ok = !host.is_empty()
        && host.len() <= 253
        && host
            .split('.')
            .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
    name_ok.then(|| (host.to_string(), p))
}

/// A parsed `http://HOST[:PORT][/PATH]` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpUrl {
    pub host: String,
    pub port: u16,
    /// The path prefix, without a trailing `/` (empty for the root).
    pub path: String,
}

/// Parses an `http://` URL (no query, fragment or user part); the port
/// defaults to 80. Other schemes, `https` included, are refused: kscale's
/// load generator speaks plain HTTP/1.1.
pub fn parse_http_url(s: &str) -> Option<HttpUrl> {
    let rest = s.strip_prefix("http://")?;
    let (auth, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if path.contains(['?', '#']) || auth.contains('@') {
        return None;
    }
    let (host, port) = parse_addr(auth)?;
    let path = path.trim_end_matches('/');
    if path.split('/').any(|c| c == "..") || !path.chars().all(|c| c.is_ascii_graphic()) {
        return None;
    }
    Some(HttpUrl {
        host,
        port: port.unwrap_or(80),
        path: path.to_string(),
    })
}

fn size_label(v: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "g"), (1 << 20, "m"), (1 << 10, "k")];
    for (m, u) in UNITS {
        if v >= m && v.is_multiple_of(m) {
            return format!("{}{u}", v / m);
        }
    }
    v.to_string()
}

/// ` 2..1024`, ` ≥ 1` or nothing for an unbounded range.
fn range_label(min: u64, max: u64, f: fn(u64) -> String) -> String {
    match (min, max) {
        (0, u64::MAX) => String::new(),
        (m, u64::MAX) => format!(" ≥{}", f(m)),
        (m, x) => format!(" {}..{}", f(m), f(x)),
    }
}

/// ` from 2 to 1024`, ` of at least 1` or nothing.
fn range_words(min: u64, max: u64, f: fn(u64) -> String) -> String {
    match (min, max) {
        (0, u64::MAX) => String::new(),
        (m, u64::MAX) => format!(" of at least {}", f(m)),
        (m, x) => format!(" from {} to {}", f(m), f(x)),
    }
}

#[derive(Debug, Error, PartialEq)]
pub enum ParamError {
    #[error("workload {workload} has no param `{param}` (params: {known})")]
    Unknown {
        workload: String,
        param: String,
        known: String,
    },
    #[error("bad value `{value}` for {workload} param `{param}`: expected {accepted}")]
    BadValue {
        workload: String,
        param: String,
        value: String,
        accepted: String,
    },
    #[error("param `{0}` is missing")]
    Missing(String),
}

/// Parses `512`, `4k`, `10K`, `0.5m`, `8MB`, `1g` into bytes (binary multiples).
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim().to_ascii_lowercase();
    let s = s.strip_suffix('b').unwrap_or(&s);
    let (num, mult) = match s.chars().last()? {
        'k' => (&s[..s.len() - 1], 1u64 << 10),
        'm' => (&s[..s.len() - 1], 1u64 << 20),
        'g' => (&s[..s.len() - 1], 1u64 << 30),
        _ => (s, 1u64),
    };
    let v: f64 = num.parse().ok()?;
    if !v.is_finite() || v < 0.0 {
        return None;
    }
    let bytes = v * mult as f64;
    if bytes > u64::MAX as f64 / 2.0 || bytes.fract() != 0.0 {
        return None;
    }
    Some(bytes as u64)
}

/// The concrete params of one case.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Params(pub BTreeMap<String, String>);

impl Params {
    pub fn get(&self, name: &str) -> Result<&str, ParamError> {
        self.0
            .get(name)
            .map(String::as_str)
            .ok_or_else(|| ParamError::Missing(name.to_string()))
    }
    pub fn int(&self, name: &str) -> Result<u64, ParamError> {
        let v = self.get(name)?;
        v.parse().map_err(|_| ParamError::BadValue {
            workload: String::new(),
            param: name.into(),
            value: v.into(),
            accepted: "an integer".into(),
        })
    }
    /// A [`ParamKind::Count`] value, with `ncpus` resolved to `ncpus`.
    pub fn count(&self, name: &str, ncpus: usize) -> Result<u64, ParamError> {
        match self.get(name)? {
            "ncpus" => Ok(ncpus.max(1) as u64),
            _ => self.int(name),
        }
    }
    /// A [`ParamKind::Seconds`] value.
    pub fn seconds(&self, name: &str) -> Result<f64, ParamError> {
        let v = self.get(name)?;
        v.trim_end_matches('s')
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .ok_or_else(|| ParamError::BadValue {
                workload: String::new(),
                param: name.into(),
                value: v.into(),
                accepted: "seconds".into(),
            })
    }
    pub fn size(&self, name: &str) -> Result<u64, ParamError> {
        let v = self.get(name)?;
        parse_size(v).ok_or_else(|| ParamError::BadValue {
            workload: String::new(),
            param: name.into(),
            value: v.into(),
            accepted: "a size".into(),
        })
    }
}

/// Every combination of the given value lists, in declaration order with the
/// last param varying fastest.
pub fn cartesian(lists: &[(String, Vec<String>)]) -> Vec<BTreeMap<String, String>> {
    let mut out = vec![BTreeMap::new()];
    for (name, values) in lists {
        let mut next = Vec::with_capacity(out.len() * values.len().max(1));
        for base in &out {
            for v in values {
                let mut m = base.clone();
                m.insert(name.clone(), v.clone());
                next.push(m);
            }
        }
        out = next;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("4k"), Some(4096));
        assert_eq!(parse_size("10K"), Some(10240));
        assert_eq!(parse_size("0.5m"), Some(512 * 1024));
        assert_eq!(parse_size("8MB"), Some(8 << 20));
        assert_eq!(parse_size("1g"), Some(1 << 30));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size("-1k"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("0.3"), None);
    }

    #[test]
    fn validate_choice_and_int() {
        let p = ParamDef {
            name: "pattern",
            help: "",
            kind: ParamKind::Choice(&["random", "sequential"]),
            default: &["random"],
            quick: &[],
        };
        assert!(p.validate("w", "random").is_ok());
        let e = p.validate("w", "zigzag").unwrap_err().to_string();
        assert!(
            e.contains("zigzag") && e.contains("random, sequential"),
            "{e}"
        );
        let i = ParamDef {
            name: "procs",
            help: "",
            kind: ParamKind::Int { min: 2, max: 1024 },
            default: &["2"],
            quick: &[],
        };
        assert_eq!(i.validate("w", " 16").unwrap(), "16");
        assert!(i.validate("w", "many").is_err());
        let e = i.validate("w", "0").unwrap_err().to_string();
        assert!(e.contains("from 2 to 1024"), "{e}");
        assert!(i.validate("w", "1025").is_err());
    }

    #[test]
    fn sizes_seconds_text_and_addresses() {
        let p = |kind| ParamDef {
            name: "x",
            help: "",
            kind,
            default: &["1"],
            quick: &[],
        };
        let size = p(ParamKind::Size {
            min: 512,
            max: 1 << 30,
        });
        assert!(size.validate("w", "0").is_err());
        assert_eq!(size.validate("w", "4K").unwrap(), "4k");
        assert!(
            size.kind_label().contains("512..1g"),
            "{}",
            size.kind_label()
        );
        let secs = p(ParamKind::Seconds {
            min: 0.1,
            max: 3600.0,
        });
        assert_eq!(secs.validate("w", "120").unwrap(), "120");
        assert_eq!(secs.validate("w", "2.5s").unwrap(), "2.5");
        assert!(secs.validate("w", "0").is_err());
        assert!(secs.validate("w", "nan").is_err());
        let text = p(ParamKind::Str);
        assert!(text.validate("w", "a/b").is_ok());
        assert!(text.validate("w", "a b").is_err());
        let addr = p(ParamKind::Addr);
        for ok in [
            "127.0.0.1",
            "10.0.0.2:12865",
            "[::1]:80",
            "::1",
            "peer-1.lab:9",
        ] {
            assert!(addr.validate("w", ok).is_ok(), "{ok}");
        }
        for bad in ["", "host:0", "host:99999", "a b", "[::1", "x:y", "-:"] {
            assert!(addr.validate("w", bad).is_err(), "{bad}");
        }
        assert_eq!(parse_addr("[::1]:80"), Some(("::1".into(), Some(80))));
    }

    #[test]
    fn counts() {
        let p = ParamDef {
            name: "threads",
            help: "",
            kind: ParamKind::COUNT,
            default: &["ncpus"],
            quick: &[],
        };
        assert_eq!(p.validate("w", "ncpus").unwrap(), "ncpus");
        assert_eq!(p.validate("w", "4").unwrap(), "4");
        assert!(p.validate("w", "0").is_err());
        let params = Params(
            [("threads".to_string(), "ncpus".to_string())]
                .into_iter()
                .collect(),
        );
        assert_eq!(params.count("threads", 2).unwrap(), 2);
    }

    #[test]
    fn cartesian_order() {
        let c = cartesian(&[
            ("a".into(), vec!["1".into(), "2".into()]),
            ("b".into(), vec!["x".into(), "y".into()]),
        ]);
        let flat: Vec<String> = c.iter().map(|m| format!("{}{}", m["a"], m["b"])).collect();
        assert_eq!(flat, ["1x", "1y", "2x", "2y"]);
        assert_eq!(cartesian(&[]).len(), 1);
    }

    #[test]
    fn http_urls_parse() {
        let u = parse_http_url("http://127.0.0.1:8080/").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("127.0.0.1", 8080, "")
        );
        let u = parse_http_url("http://web.example/files/").unwrap();
        assert_eq!((u.port, u.path.as_str()), (80, "/files"));
        assert_eq!(parse_http_url("http://[::1]:81").unwrap().host, "::1");
        for bad in [
            "https://127.0.0.1/",
            "ftp://h/",
            "127.0.0.1:80",
            "http://",
            "http://h:0/",
            "http://h/?q=1",
            "http://u@h/",
            "http://h/../x",
        ] {
            assert!(parse_http_url(bad).is_none(), "{bad}");
        }
    }
}
