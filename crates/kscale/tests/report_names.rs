//! "A new family is one file" holds for the report too: kscale-report
//! names no family, param or metric of the registry. Everything it needs to
//! know about one (which param a chart runs along, which metrics it draws,
//! which param's variants a table compares) comes from the definitions
//! through `WorkloadInfo`. This test reads kscale-report's sources and fails
//! on any string literal that is such a name, or that uses one as a param
//! key (`size=`) or a family prefix (`threads.`).

use std::collections::BTreeSet;
use std::path::Path;

/// The string literals of Rust source, unit tests left out.
fn literals(src: &str) -> Vec<String> {
    let code = src.split("#[cfg(test)]").next().unwrap_or(src);
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    while i < c.len() {
        // Comments.
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
            continue;
        }
        // Raw strings: r"…", r#"…"#, r##"…"## (not an identifier ending in r).
        if c[i] == 'r' && (i == 0 || !ident(c[i - 1])) {
            let mut j = i + 1;
            while c.get(j) == Some(&'#') {
                j += 1;
            }
            if c.get(j) == Some(&'"') {
                let hashes = j - i - 1;
                let mut k = j + 1;
                let mut s = String::new();
                while k < c.len() {
                    if c[k] == '"' && (1..=hashes).all(|h| c.get(k + h) == Some(&'#')) {
                        break;
                    }
                    s.push(c[k]);
                    k += 1;
                }
                out.push(s);
                i = k + 1 + hashes;
                continue;
            }
        }
        // Char literals ('x', '\n', '"'); a lifetime has no closing quote.
        if c[i] == '\'' {
            if c.get(i + 1) == Some(&'\\') {
                i += 4;
                while i < c.len() && c[i - 1] != '\'' {
                    i += 1;
                }
                continue;
            }
            if c.get(i + 2) == Some(&'\'') {
                i += 3;
                continue;
            }
            i += 1;
            continue;
        }
        if c[i] == '"' {
            let mut k = i + 1;
            let mut s = String::new();
            while k < c.len() && c[k] != '"' {
                if c[k] == '\\' {
                    k += 1;
                }
                if let Some(ch) = c.get(k) {
                    s.push(*ch);
                }
                k += 1;
            }
            out.push(s);
            i = k + 1;
            continue;
        }
        i += 1;
    }
    out
}

/// `name=` used as a key: not the tail of a longer word (`font-size=`).
fn keyed(lit: &str, name: &str) -> bool {
    let key = format!("{name}=");
    lit.match_indices(&key).any(|(at, _)| {
        lit[..at]
            .chars()
            .last()
            .is_none_or(|p| !(p.is_alphanumeric() || p == '_' || p == '-'))
    })
}

#[test]
fn kscale_report_names_no_family_param_or_metric() {
    let mut families = BTreeSet::new();
    let mut names = BTreeSet::new();
    for f in kscale_workloads::REGISTRY {
        families.insert(f.name);
        names.insert(f.name);
        for w in f.workloads {
            names.extend(w.params.iter().map(|p| p.name));
            names.extend(w.metrics.iter().map(|m| m.name));
        }
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kscale-report/src");
    let mut bad = Vec::new();
    let mut files = 0;
    // The crate's modules may be folders (svg/): every file under src/.
    let mut paths = Vec::new();
    let mut dirs = vec![src.clone()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                paths.push(p);
            }
        }
    }
    for p in paths {
        let text = std::fs::read_to_string(&p).unwrap();
        let lits = match p.extension().and_then(|e| e.to_str()) {
            Some("rs") => literals(&text),
            // The template is one literal: its words must not be names either.
            _ => text
                .split(['"', '{', '}', '<', '>'])
                .map(String::from)
                .collect(),
        };
        files += 1;
        for l in lits {
            let word = l.trim();
            if names.contains(word)
                || names.iter().any(|n| keyed(&l, n))
                || families.iter().any(|f| l.starts_with(&format!("{f}.")))
            {
                bad.push(format!("{}: {l:?}", p.display()));
            }
        }
    }
    assert!(files >= 8, "read only {files} files of {}", src.display());
    assert!(
        bad.is_empty(),
        "kscale-report names the registry:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_reader_finds_literals() {
    let l = literals(
        "let a = \"size\"; // \"ops\"\nlet b = r#\"x\"y\"#; let c = '\"'; let d = \"q\\\"r\"; fn f<'a>(_: &'a str) {}",
    );
    assert_eq!(l, vec!["size", "x\"y", "q\"r"]);
    assert!(keyed("{k}= size=4k", "size"));
    assert!(!keyed("font-size=\"12\"", "size"));
}
