//! fs.create and fileserver.mix on ext4 without a journal, where freeing
//! inodes slows the next creations for a minute: each run says so before its
//! first trial, fs.create keeps the created files until it ends (the case
//! note says why), and nothing is left behind. On a journalled ext4 none of that happens. Each filesystem is a
//! loop mount in a mount namespace of the test's own, unmounted by the
//! script's trap; the loop device goes with it (mount -o loop sets autoclear).

mod common;
use common::Env;

/// Runs fs.create size=0 and a short fileserver.mix on a fresh ext4 made with `mkfs_opts`; returns the
/// script's stdout and stderr, or `None` after printing why it was skipped.
fn run_on_ext4(env: &Env, mkfs_opts: &str) -> Option<(String, String)> {
    let body = r#""$kscale" --db "$db" run fs.create --param size=0 --cpus 1 --min-trials 2 \
    --max-trials 2 --trial-time 0.02 --no-progress --dir "$mnt" || exit 1
"$kscale" --db "$db" run fileserver.mix --param clients=1 --param duration=0.2 --cpus 1 \
    --min-trials 2 --max-trials 2 --no-progress --dir "$mnt" || exit 1
echo "left: $(find "$mnt" -mindepth 1 -not -path "$mnt/lost+found*" | wc -l)""#;
    let name = format!("fs{}", mkfs_opts.len());
    let (out, img) = env.on_fresh_ext4(&name, 256 << 20, mkfs_opts, "", body)?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{text}\n{err}");
    assert!(text.contains("left: 0"), "files left behind:\n{text}");
    common::assert_loop_detached(&img);
    Some((text, err))
}

#[test]
fn unjournalled_ext4_is_named_before_the_run_and_created_files_are_kept() {
    let env = Env::new();
    let Some((text, err)) = run_on_ext4(&env, "-O ^has_journal") else {
        return;
    };
    let caveat = err
        .lines()
        .position(|l| l.contains("ext4 without a journal") && l.contains("last minute"))
        .unwrap_or_else(|| panic!("no caveat on stderr:\n{err}"));
    // Before the first trial: the run's header comes first, nothing else
    // has been measured yet.
    assert!(
        err.lines().take(caveat).all(|l| !l.contains("failed")),
        "{err}"
    );
    assert!(text.contains("kept until the run ends"), "{text}");
    // fileserver.mix deletes as it creates: its caveat names the window.
    assert!(
        err.lines()
            .any(|l| l.contains("ext4 without a journal") && l.contains("0.2 s windows")),
        "no fileserver caveat on stderr:\n{err}"
    );
}

#[test]
fn journalled_ext4_gets_no_caveat_and_lat_fs_unlinking() {
    let env = Env::new();
    let Some((text, err)) = run_on_ext4(&env, "") else {
        return;
    };
    assert!(!err.contains("without a journal"), "{err}");
    assert!(!text.contains("kept until"), "{text}");
}

/// A study under a budget does not spend it on a case that cannot settle
/// in its directory: on ext4 without a journal it leaves fs.create out
/// before its first trial, names it with the reason, and measures the rest
/// of the family (fs.delete).
#[test]
fn a_budgeted_study_leaves_out_what_cannot_settle_in_its_directory() {
    let env = Env::new();
    let body = r#""$kscale" --db "$db" study --suite micro --quick --budget 20s --no-profile \
    --no-progress --dir "$mnt" >/dev/null || exit 1
"$kscale" --db "$db" show latest || exit 1"#;
    let Some((out, img)) = env.on_fresh_ext4("fsstudy", 256 << 20, "-O ^has_journal", "", body)
    else {
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}\n{err}");
    let said = err
        .lines()
        .position(|l| l.contains("leaves out the cases that cannot settle in"))
        .unwrap_or_else(|| panic!("no leave-out line on stderr:\n{err}"));
    assert!(
        err.lines().nth(said + 1).is_some_and(
            |l| l.trim_start().starts_with("fs.create: ") && l.contains("without a journal")
        ),
        "{err}"
    );
    assert!(err.contains("the study measures"), "{err}");
    // Stored: the run names it, and has no fs.create case but fs.delete's.
    assert!(text.contains("left out by the study's plan"), "{text}");
    assert!(text.contains("  fs.create: "), "{text}");
    assert!(!text.contains("File creations"), "{text}");
    assert!(text.contains("File removals"), "{text}");
    common::assert_loop_detached(&img);
}

/// A study started from a directory on ext4 without a journal, where
/// nobody named another, measures fs.create where it settles instead of
/// leaving it out: it says where and why in one line, the run records the
/// line, and the scratch directory it made there is gone afterwards.
#[test]
fn a_study_started_on_unjournalled_ext4_measures_file_cases_where_they_settle() {
    let env = Env::new();
    let body = r#"cd "$mnt" || exit 1
"$kscale" --db "$db" study --suite micro --quick --budget 20s --no-profile \
    --no-progress >/dev/null || exit 1
"$kscale" --db "$db" show latest || exit 1
"$kscale" --db "$db" export latest --format json | grep -o '"dir": "[^"]*"'"#;
    let Some((out, img)) = env.on_fresh_ext4("fsmoved", 256 << 20, "-O ^has_journal", "", body)
    else {
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}\n{err}");
    let line = err
        .lines()
        .find(|l| l.contains("cannot settle in") && l.contains("the study works in"))
        .unwrap_or_else(|| panic!("no line saying where the study measures:\n{err}"));
    assert!(line.contains("fs.create"), "{line}");
    assert!(line.contains("ext4 without a journal"), "{line}");
    assert!(
        !err.contains("leaves out the cases that cannot settle"),
        "{err}"
    );
    let place = line
        .split("the study works in ")
        .nth(1)
        .and_then(|r| r.split(", where").next())
        .expect("a place");
    // Recorded with the run, and the run measured there: fs.create is not
    // left out for its directory (a budget this short on a busy machine may
    // still leave it out for its noise, as any case).
    assert!(text.contains("the study works in"), "{text}");
    assert!(
        !text
            .lines()
            .any(|l| l.trim_start().starts_with("fs.create: ") && l.contains("without a journal")),
        "{text}"
    );
    assert!(
        text.contains(&format!("{place}, where they settle")),
        "{text}"
    );
    // The run's options name the place it measured in.
    assert!(text.contains(&format!("\"dir\": \"{place}\"")), "{text}");
    // The place is shared: another test's run may be working there now
    // (its process alive); what the study left would be a dead one's.
    let alive = |n: &str| {
        n.split('-')
            .nth(2)
            .and_then(|pid| pid.parse::<u32>().ok())
            .is_some_and(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists())
    };
    let left: Vec<String> = std::fs::read_dir(place)
        .expect("the place is readable")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".kscale-tmp-") || n.starts_with(".kscale-probe-"))
        .filter(|n| !alive(n))
        .collect();
    assert!(left.is_empty(), "left in {place}: {left:?}");
    common::assert_loop_detached(&img);
}

/// A run started there without `--dir` does as the study does: it
/// measures fs.create where it settles and says so in one line, recorded
/// with the run; two runs a minute apart on that root read 110,000 and
/// 5,600 files/s.
#[test]
fn a_run_started_on_unjournalled_ext4_measures_file_cases_where_they_settle() {
    let env = Env::new();
    let body = r#"cd "$mnt" || exit 1
"$kscale" --db "$db" run fs.create --param size=0 --cpus 1 --min-trials 2 --max-trials 2 \
    --trial-time 0.02 --no-progress >/dev/null || exit 1
"$kscale" --db "$db" show latest || exit 1"#;
    let Some((out, img)) = env.on_fresh_ext4("fsrun", 256 << 20, "-O ^has_journal", "", body)
    else {
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}\n{err}");
    let line = err
        .lines()
        .find(|l| l.contains("cannot settle in") && l.contains("the run works in"))
        .unwrap_or_else(|| panic!("no line saying where the run measures:\n{err}"));
    assert!(
        line.contains("fs.create") && line.contains("ext4 without a journal"),
        "{line}"
    );
    // Measured there: no caveat about the root's inodes, and recorded.
    assert!(!text.contains("kept until"), "{text}");
    assert!(text.contains("the run works in"), "{text}");
    common::assert_loop_detached(&img);
}
