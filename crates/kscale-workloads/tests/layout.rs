//! The crate's layout, held by a test so it cannot drift back: no source
//! file over 900 lines, no family importing another family's module (what
//! two families need lives in `src/shared/`), and one epoll wrapper.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const MAX_LINES: usize = 900;

/// The one file allowed to call epoll(7).
const EPOLL_WRAPPER: &str = "shared/epoll.rs";
const EPOLL_CALLS: &[&str] = &[
    "epoll_create",
    "epoll_ctl(",
    "epoll_wait(",
    "SYS_epoll_pwait",
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`, by its path relative to `src/`.
fn sources(dir: &Path, out: &mut BTreeMap<String, String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let rel = p
                .strip_prefix(src())
                .unwrap()
                .to_string_lossy()
                .into_owned();
            out.insert(rel, std::fs::read_to_string(&p).unwrap());
        }
    }
}

fn all_sources() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    sources(&src(), &mut out);
    assert!(out.len() > 20, "found only {} source files", out.len());
    out
}

/// The family a file belongs to: `chat/server.rs` and `fs.rs` are in
/// families `chat` and `fs`; `shared/…`, `roles.rs`, `lib.rs` in none.
fn family_of<'a>(file: &str, families: &[&'a str]) -> Option<&'a str> {
    let first = file.split('/').next()?;
    let first = first.strip_suffix(".rs").unwrap_or(first);
    families.iter().copied().find(|f| *f == first)
}

/// The crate modules `text` names: `crate::x::…`, `crate::x;` and every
/// first segment of `use crate::{x::…, y, …}`.
fn crate_modules(text: &str) -> Vec<String> {
    let word = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = Vec::new();
    for (i, _) in text.match_indices("crate::") {
        // `kscale_workloads::crate::` cannot occur; skip `$crate::`.
        if text[..i].ends_with('$') {
            continue;
        }
        let rest = &text[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut item_start = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        item_start = true;
                        continue;
                    }
                    c if c.is_whitespace() => continue,
                    _ => {}
                }
                if item_start && depth == 0 {
                    out.push(word(&group[j..]));
                }
                item_start = false;
            }
        } else {
            out.push(word(rest));
        }
    }
    out
}

#[test]
fn no_source_file_is_over_900_lines() {
    let long: Vec<String> = all_sources()
        .iter()
        .map(|(f, t)| (f, t.lines().count()))
        .filter(|(_, n)| *n > MAX_LINES)
        .map(|(f, n)| format!("src/{f}: {n} lines"))
        .collect();
    assert!(
        long.is_empty(),
        "split these by role (a family folder, or src/shared/ for what \
         families share); at most {MAX_LINES} lines each:\n{}",
        long.join("\n")
    );
}

#[test]
fn no_family_imports_another_familys_module() {
    let families: Vec<&str> = kscale_workloads::REGISTRY.iter().map(|f| f.name).collect();
    let mut found = Vec::new();
    for (file, text) in all_sources() {
        if file == "lib.rs" {
            continue; // the registry names every family
        }
        let mine = family_of(&file, &families);
        for m in crate_modules(&text) {
            if families.contains(&m.as_str()) && Some(m.as_str()) != mine {
                let who = mine.map_or("a shared module".to_string(), |f| format!("family {f}"));
                found.push(format!("src/{file} ({who}) uses crate::{m}"));
            }
        }
    }
    found.dedup();
    assert!(
        found.is_empty(),
        "move what is shared into src/shared/ instead:\n{}",
        found.join("\n")
    );
}

#[test]
fn epoll_is_wrapped_once() {
    let files = all_sources();
    let wrapper = files
        .get(EPOLL_WRAPPER)
        .unwrap_or_else(|| panic!("src/{EPOLL_WRAPPER} is missing"));
    for call in EPOLL_CALLS {
        assert!(wrapper.contains(call), "src/{EPOLL_WRAPPER} has no {call}");
    }
    let elsewhere: Vec<String> = files
        .iter()
        .filter(|(f, _)| f.as_str() != EPOLL_WRAPPER)
        .flat_map(|(f, t)| {
            EPOLL_CALLS
                .iter()
                .filter(|c| t.contains(*c))
                .map(move |c| format!("src/{f} calls {c}"))
        })
        .collect();
    assert!(
        elsewhere.is_empty(),
        "use crate::shared::epoll::Epoll instead:\n{}",
        elsewhere.join("\n")
    );
}

#[test]
fn the_checks_see_what_they_look_for() {
    let families = ["chat", "net", "web"];
    assert_eq!(family_of("chat/server.rs", &families), Some("chat"));
    assert_eq!(family_of("net.rs", &families), Some("net"));
    assert_eq!(family_of("shared/sock.rs", &families), None);
    let text = "use crate::net::Dial;\nuse crate::{roles::RoleCtx, web, shared::{a, b}};\n\
                let x = crate::syscall::HELLO;\nmacro_rules! m { () => { $crate::chat } }";
    assert_eq!(
        crate_modules(text),
        ["net", "roles", "web", "shared", "syscall"]
    );
}
