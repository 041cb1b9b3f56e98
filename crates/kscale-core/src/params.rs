//! Workload parameters: their declarations, validation of user values, and
//! typed access for workload code.

use std::collections::BTreeMap;
use thiserror::Error;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// A non-negative integer.
    Int,
    /// A byte count; accepts `512`, `4k`, `0.5m`, `1g` (binary multiples).
    Size,
    /// One of a fixed set of words.
    Choice(&'static [&'static str]),
    /// A positive count, or `ncpus`: as many as the CPU configuration has
    /// (resolved by the workload, since one case runs on several).
    Count,
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
            ParamKind::Int => "int".into(),
            ParamKind::Size => "size".into(),
            ParamKind::Choice(c) => c.join("|"),
            ParamKind::Count => "count|ncpus".into(),
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
            ParamKind::Int => value
                .trim()
                .parse::<u64>()
                .map(|v| v.to_string())
                .map_err(|_| bad("a non-negative integer".into())),
            ParamKind::Size => parse_size(value)
                .map(|_| value.trim().to_ascii_lowercase())
                .ok_or_else(|| bad("a size such as 512, 4k, 0.5m or 1g".into())),
            ParamKind::Count => match value.trim() {
                "ncpus" => Ok("ncpus".into()),
                v => v
                    .parse::<u64>()
                    .ok()
                    .filter(|n| *n > 0)
                    .map(|n| n.to_string())
                    .ok_or_else(|| bad("a positive count or `ncpus`".into())),
            },
            ParamKind::Choice(choices) => {
                if choices.contains(&value) {
                    Ok(value.to_string())
                } else {
                    Err(bad(format!("one of {}", choices.join(", "))))
                }
            }
        }
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
            kind: ParamKind::Int,
            default: &["2"],
            quick: &[],
        };
        assert_eq!(i.validate("w", " 16").unwrap(), "16");
        assert!(i.validate("w", "many").is_err());
    }

    #[test]
    fn counts() {
        let p = ParamDef {
            name: "threads",
            help: "",
            kind: ParamKind::Count,
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
}
