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
