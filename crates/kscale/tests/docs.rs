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
