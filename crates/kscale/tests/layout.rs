//! The binary's layers, as docs/README.md and engine/mod.rs state them:
//! the engine never imports a command, and the capacity searches are a
//! client of the planner — only the run's life (lifecycle.rs) calls them,
//! and nothing else under engine/ reaches into engine/capacity.rs.

use std::path::{Path, PathBuf};

fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("read engine/").flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(sources(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out
}

fn engine() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/engine")
}

/// Lines of `text` that name module `m` as a path (`m::`, `{m,`, `, m}`…),
/// comments left out.
fn naming(text: &str, m: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("//"))
        .filter(|l| {
            l.contains(&format!("{m}::"))
                || (l.starts_with("use ")
                    && l.split(|c: char| !c.is_alphanumeric() && c != '_')
                        .any(|w| w == m))
        })
        .map(String::from)
        .collect()
}

#[test]
fn only_the_runs_life_calls_the_capacity_searches() {
    let mut bad = Vec::new();
    for f in sources(&engine()) {
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name == "capacity.rs" || name == "lifecycle.rs" || name == "mod.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&f).expect("read");
        for l in naming(&text, "capacity") {
            bad.push(format!("{}: {l}", f.display()));
        }
    }
    assert!(
        bad.is_empty(),
        "engine files reaching into capacity.rs:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_engine_never_imports_a_command() {
    let mut bad = Vec::new();
    for f in sources(&engine()) {
        let text = std::fs::read_to_string(&f).expect("read");
        for l in text.lines().map(str::trim).filter(|l| !l.starts_with("//")) {
            if l.contains("crate::cmd") {
                bad.push(format!("{}: {l}", f.display()));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn the_check_sees_what_it_looks_for() {
    assert_eq!(naming("use super::capacity;", "capacity").len(), 1);
    assert_eq!(naming("    super::capacity::run(x)", "capacity").len(), 1);
    assert_eq!(naming("use super::{capacity, gauge};", "capacity").len(), 1);
    assert!(naming("// capacity::run", "capacity").is_empty());
    assert!(naming("let capacity = 3;", "capacity").is_empty());
}
