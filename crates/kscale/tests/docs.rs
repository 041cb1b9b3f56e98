//! The repository's front doors stay true to the data behind them: the
//! README's headline table is docs/validation.md's (scripts/headline copies
//! it), and the README stays short and undated (history lives in git).

use std::path::PathBuf;

fn repo_file(rel: &str) -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::read_to_string(root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The text between `<!-- name -->` and `<!-- /name -->`.
fn block<'a>(text: &'a str, name: &str, file: &str) -> &'a str {
    let start = format!("<!-- {name} -->");
    let end = format!("<!-- /{name} -->");
    let i = text
        .find(&start)
        .unwrap_or_else(|| panic!("{file} has no {start}"));
    let j = text
        .find(&end)
        .unwrap_or_else(|| panic!("{file} has no {end}"));
    assert!(i < j, "{file}: {end} before {start}");
    &text[i + start.len()..j]
}

#[test]
fn readme_headline_is_validation_md_headline() {
    let readme = repo_file("README.md");
    let validation = repo_file("docs/validation.md");
    let ours = block(&readme, "headline", "README.md");
    let theirs = block(&validation, "headline", "docs/validation.md");
    assert!(
        theirs.contains("| families |"),
        "docs/validation.md's headline is empty: run scripts/headline"
    );
    assert_eq!(
        ours, theirs,
        "README.md's headline table differs from docs/validation.md's: run scripts/headline"
    );
}

#[test]
fn readme_is_short_and_undated() {
    let readme = repo_file("README.md");
    let lines: Vec<&str> = readme.lines().collect();
    assert!(
        lines.len() <= 250,
        "README.md has {} lines; the reference belongs in docs/",
        lines.len()
    );
    for cmd in ["cargo run --release -- study --quick", "cargo test"] {
        let at = lines.iter().position(|l| l.starts_with(cmd));
        assert!(
            matches!(at, Some(n) if n < 40),
            "`{cmd}` is not within README.md's first 40 lines (found at {at:?})"
        );
    }
    for (n, line) in lines.iter().enumerate() {
        let b = line.as_bytes();
        let dated = b.windows(10).any(|w| {
            w[..2] == *b"20"
                && w[2..4].iter().all(u8::is_ascii_digit)
                && w[4] == b'-'
                && w[5..7].iter().all(u8::is_ascii_digit)
                && w[7] == b'-'
                && w[8..10].iter().all(u8::is_ascii_digit)
        });
        assert!(!dated, "README.md:{}: a date: {line}", n + 1);
    }
}

fn kscale() -> assert_cmd::Command {
    assert_cmd::Command::cargo_bin("kscale").expect("the kscale binary")
}

#[test]
fn cli_md_is_what_the_binary_prints() {
    let out = kscale()
        .args(["man", "--markdown"])
        .output()
        .expect("kscale man");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let generated = String::from_utf8(out.stdout).expect("UTF-8");
    let stored = repo_file("docs/cli.md");
    assert!(
        generated.contains("## `kscale run`") && generated.contains("--cpus"),
        "kscale man --markdown printed no reference:\n{generated}"
    );
    assert!(
        generated == stored,
        "docs/cli.md differs from the binary's: run `cargo run -- man --markdown > docs/cli.md`"
    );
}

#[test]
fn bash_accepts_the_bash_completions() {
    let out = kscale()
        .args(["completions", "bash"])
        .output()
        .expect("kscale completions");
    assert!(out.status.success());
    let script = String::from_utf8(out.stdout).expect("UTF-8");
    assert!(
        script.contains("_kscale()") && script.contains("--cpus"),
        "{script}"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("kscale.bash");
    std::fs::write(&path, &script).expect("write");
    let st = std::process::Command::new("bash")
        .arg("-n")
        .arg(&path)
        .status()
        .expect("bash");
    assert!(st.success(), "bash -n refused the completion script");
    for shell in ["zsh", "fish", "elvish"] {
        let out = kscale()
            .args(["completions", shell])
            .output()
            .expect("kscale");
        assert!(out.status.success(), "{shell}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("study"),
            "{shell}: no sub-command in the completions"
        );
    }
    kscale()
        .args(["completions", "powershell"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("bash, zsh, fish, elvish"));
}

#[test]
fn man_pages_exist_for_every_sub_command() {
    let out = kscale()
        .args(["man", "run"])
        .output()
        .expect("kscale man run");
    assert!(out.status.success());
    let page = String::from_utf8(out.stdout).expect("UTF-8");
    assert!(
        page.starts_with(".ie") || page.contains(".TH KSCALE-RUN"),
        "{page}"
    );
    assert!(page.contains(".TH KSCALE-RUN 1"), "{page}");
    assert!(
        page.contains("cpus"),
        "the run page names no --cpus:\n{page}"
    );

    let dir = tempfile::tempdir().expect("tempdir");
    kscale()
        .args(["man", "--dir"])
        .arg(dir.path())
        .assert()
        .success();
    for name in ["kscale", "kscale-run", "kscale-study", "kscale-web-fileset"] {
        let p = dir.path().join(format!("{name}.1"));
        assert!(p.is_file(), "{} not written", p.display());
    }
    assert!(!dir.path().join("kscale-__worker.1").exists());
    // Rendered as a reader would see it, where a formatter is installed.
    if std::process::Command::new("groff")
        .arg("-v")
        .output()
        .is_ok()
    {
        let out = std::process::Command::new("groff")
            .args(["-man", "-Tutf8"])
            .arg(dir.path().join("kscale-run.1"))
            .output()
            .expect("groff");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && text.contains("--cpus"), "{text}");
    }

    kscale()
        .args(["man", "nosuch"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("accepted: study"));
}

/// Every file of the repository the references below may sit in: the
/// crates' sources, the docs, the scripts and the README.
fn sources() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut out = vec![root.join("README.md")];
    let mut dirs = vec![root.join("crates"), root.join("docs"), root.join("scripts")];
    while let Some(d) = dirs.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p
                .extension()
                .is_none_or(|x| x == "rs" || x == "md" || x == "py")
            {
                out.push(p);
            }
        }
    }
    out
}

/// Whether `doc` has `name` as a heading, or as a bold term that opens a
/// paragraph or an item (`**Who stops.**`), case aside.
fn names(doc: &str, name: &str) -> bool {
    let want = name.to_lowercase();
    doc.lines().any(|l| {
        let l = l.trim_start_matches(['-', ' ']).to_lowercase();
        let heading = l.trim_start_matches('#').trim();
        heading == want
            || (l.starts_with('#') && heading.starts_with(&format!("{want}:")))
            || l.starts_with(&format!("**{want}.**"))
            || l.starts_with(&format!("**{want}**"))
    })
}

/// GitHub's anchor for a heading.
fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == ' ' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// A reference to a section of the docs — `docs/host.md, "Idle CPUs"` in
/// a comment, or `host.md#idle-cpus` in a link — names one that exists:
/// the method was split into pages, and a reference that outlives its
/// section sends a reader nowhere.
#[test]
fn references_to_doc_sections_name_sections_that_exist() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut broken = Vec::new();
    for path in sources() {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let mut rest = text.as_str();
        while let Some(i) = rest.find("docs/") {
            rest = &rest[i + 5..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || "/_-.".contains(c)))
                .unwrap_or(rest.len());
            let file = rest[..end].trim_end_matches('.');
            if !file.ends_with(".md") {
                continue;
            }
            let Ok(doc) = std::fs::read_to_string(root.join("docs").join(file)) else {
                broken.push(format!("{}: docs/{file} does not exist", path.display()));
                continue;
            };
            let after = &rest[end..];
            if let Some(a) = after.strip_prefix('#') {
                let a: String = a
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                    .collect();
                // An anchor a script fills in (`#{anchor}`) is not one.
                let ok = a.is_empty()
                    || doc
                        .lines()
                        .filter(|l| l.starts_with('#'))
                        .any(|l| anchor(l.trim_start_matches('#').trim()) == a);
                if !ok {
                    broken.push(format!("{}: docs/{file}#{a}", path.display()));
                }
                continue;
            }
            // `, "Name"`, possibly across a comment's line break.
            let Some(after) = after.strip_prefix(',') else {
                continue;
            };
            let after =
                after.trim_start_matches(|c: char| c.is_whitespace() || c == '/' || c == '!');
            let Some(q) = after.strip_prefix('"') else {
                continue;
            };
            let Some(close) = q.find('"') else { continue };
            // A name may run onto a comment's next line.
            let name = q[..close]
                .split('\n')
                .map(|l| l.trim().trim_start_matches(['/', '!', '#']).trim())
                .collect::<Vec<_>>()
                .join(" ");
            if name.len() < 80 && !names(&doc, &name) {
                broken.push(format!("{}: docs/{file}, \"{name}\"", path.display()));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "references to sections that do not exist:\n{}",
        broken.join("\n")
    );
}
