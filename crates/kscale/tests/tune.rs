//! `kscale tune`: the guarantee that every setting comes back however a
//! study ends (docs/tune.md). Sysctls are changed only inside network
//! namespaces the tests create (net.ipv4.* is per namespace), filesystems
//! are loop mounts in temp dirs, so nothing host-wide is touched while
//! other tests run beside these.

mod common;

use common::netns::Netns;
use common::{skip, Env};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// A value read inside the namespace.
fn read_in(ns: &Netns, path: &str) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.name, "cat", path])
        .output()
        .expect("ip netns exec cat");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn write_in(ns: &Netns, path: &str, value: &str) {
    let ok = Command::new("ip")
        .args(["netns", "exec", &ns.name, "sh", "-c"])
        .arg(format!("echo {value} > {path}"))
        .status()
        .expect("ip netns exec sh")
        .success();
    assert!(ok, "cannot write {path} in {}", ns.name);
}

const FIN: &str = "/proc/sys/net/ipv4/tcp_fin_timeout";
const KEEPALIVE: &str = "/proc/sys/net/ipv4/tcp_keepalive_time";

/// A plan of two sysctl steps and, when `fs`, a scratch filesystem whose
/// options a third step changes. syscall.null keeps the figure cheap: the
/// point is the journal.
fn plan(dir: &Path, fin: u32, keepalive: u32, fs: bool) -> std::path::PathBuf {
    let mut text = String::from("[target]\nworkloads = [\"syscall.null\"]\ncpus = \"1\"\n");
    if fs {
        text.push_str("fs = { size = \"32m\", options = \"data=ordered\" }\n");
    }
    text.push_str(&format!(
        r#"
[[step]]
name = "fin"
rationale = "a shorter FIN timeout"
settings = [{{ kind = "sysctl", key = "net.ipv4.tcp_fin_timeout", value = {fin} }}]

[[step]]
name = "keepalive"
rationale = "a shorter keepalive"
settings = [{{ kind = "sysctl", key = "net.ipv4.tcp_keepalive_time", value = {keepalive} }}]
"#
    ));
    if fs {
        text.push_str(
            r#"
[[step]]
name = "writeback"
rationale = "metadata-only journalling"
settings = [{ kind = "mount", value = "data=writeback,noatime" }]
"#,
        );
    }
    let p = dir.join("plan.toml");
    std::fs::write(&p, text).expect("write plan");
    p
}

/// Namespace and a root check, or the reason to skip.
fn setup(tag: &str) -> Option<(Env, Netns)> {
    if !root() {
        skip("kscale tune tests change sysctls and mount loop devices: need root");
        return None;
    }
    match Netns::new(tag) {
        Ok(ns) => Some((Env::new(), ns)),
        Err(e) => {
            skip(&format!("cannot make a network namespace: {e}"));
            None
        }
    }
}

fn db_count(env: &Env, sql: &str) -> i64 {
    let Ok(c) = rusqlite::Connection::open(env.db()) else {
        return 0;
    };
    c.query_row(sql, [], |r| r.get(0)).unwrap_or(0)
}

/// Starts a study in the namespace with trials long enough to be caught
/// mid-step.
fn start(env: &Env, ns: &Netns, plan: &Path) -> Child {
    ns.kscale(env, None)
        .args(["tune", "--quick", "--trial-time", "1", "--no-progress"])
        .arg(plan)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start kscale tune")
}

/// Waits until `unrestored` journal entries exist and the run of step
/// `runs - 1` has started: the study is in the middle of that step.
fn wait_mid_step(env: &Env, unrestored: i64, runs: i64) {
    let ok = common::wait_for(
        || {
            db_count(
                env,
                "SELECT count(*) FROM journal WHERE restored_at IS NULL",
            ) >= unrestored
                && db_count(env, "SELECT count(*) FROM runs") >= runs
        },
        90,
    );
    assert!(ok, "the study never reached the step");
    std::thread::sleep(Duration::from_millis(300));
}

fn wait_exit(child: &mut Child) -> std::process::Output {
    let out = std::mem::replace(child, Command::new("true").spawn().expect("true"));
    let out = out.wait_with_output().expect("wait");
    let _ = child.wait();
    out
}

fn loop_devices_of(image: &Path) -> String {
    let out = Command::new("losetup").arg("-a").output();
    let text = out
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    text.lines()
        .filter(|l| l.contains(&*image.to_string_lossy()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The study's scratch filesystem image in `dir`, if one is there.
fn images_in(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.to_string_lossy().contains(".kscale-tune-"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn sigkill_mid_step_then_restore_brings_every_sysctl_back_and_runs_refuse_until_then() {
    let Some((env, ns)) = setup("tk") else { return };
    // Values unlike any default, so a restore cannot pass by accident.
    write_in(&ns, FIN, "57");
    write_in(&ns, KEEPALIVE, "7111");
    let p = plan(env.path(), 23, 3333, false);
    let mut child = start(&env, &ns, &p);
    // Both steps applied, the three states' runs under way: their trials
    // interleaved, each state switched in before its trial. Caught while
    // the last state's trial (a second long) runs.
    wait_mid_step(&env, 2, 3);
    assert!(
        common::wait_for(|| read_in(&ns, KEEPALIVE) == "3333", 60),
        "the keepalive step's state never came"
    );
    common::signal(&child, nix::sys::signal::Signal::SIGKILL);
    let _ = child.wait();
    // Nothing restored itself: SIGKILL gives no chance.
    let left = (read_in(&ns, FIN), read_in(&ns, KEEPALIVE));
    assert!(
        [("23", "3333"), ("23", "7111"), ("57", "7111")]
            .contains(&(left.0.as_str(), left.1.as_str())),
        "{left:?} is none of the study's states"
    );
    assert_eq!(
        db_count(
            &env,
            "SELECT count(*) FROM journal WHERE restored_at IS NULL"
        ),
        2
    );

    // run and tune refuse, in one line naming the restore command.
    for args in [
        vec!["run", "syscall.null", "--quick"],
        vec!["tune", p.to_str().expect("utf-8 path")],
    ] {
        let out = ns.kscale(&env, None).args(&args).output().expect("run");
        common::assert_refused(&out, "tune --restore", &format!("{args:?}"));
    }

    let out = ns
        .kscale(&env, None)
        .args(["tune", "--restore"])
        .output()
        .expect("restore");
    common::assert_exit(&out, 0);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches("restored").count(), 2, "{text}");
    assert_eq!(read_in(&ns, FIN), "57");
    assert_eq!(read_in(&ns, KEEPALIVE), "7111");
    // The journal is clean: a run may start again.
    let out = ns
        .kscale(&env, None)
        .args(["tune", "--restore"])
        .output()
        .expect("restore again");
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to restore"));
}

#[test]
fn sigkill_with_a_loop_mount_then_restore_unmounts_and_removes_it() {
    if !root() {
        skip("loop mounts need root");
        return;
    }
    let env = Env::new();
    // On the host: only the loop mount under the temp dir changes here.
    let text = r#"[target]
workloads = ["syscall.null"]
cpus = "1"
fs = { size = "32m", options = "data=ordered" }

[[step]]
name = "writeback"
rationale = "metadata-only journalling"
settings = [{ kind = "mount", value = "data=writeback,noatime" }]
"#;
    let p = env.path().join("plan.toml");
    std::fs::write(&p, text).expect("plan");
    let mut child = Command::new(common::bin())
        .current_dir(env.path())
        .env_remove("KSCALE_DB")
        .arg("--db")
        .arg(env.db())
        .args(["tune", "--quick", "--trial-time", "1", "--no-progress"])
        .arg(&p)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start");
    // The mount and its new options journalled, the step's run started.
    wait_mid_step(&env, 2, 2);
    let images = images_in(env.path());
    let mp = images
        .iter()
        .find(|p| p.extension().is_some_and(|e| e == "mnt"))
        .cloned();
    let image = images
        .iter()
        .find(|p| p.extension().is_some_and(|e| e == "img"))
        .cloned();
    let (Some(mp), Some(image)) = (mp, image) else {
        let _ = child.kill();
        let out = wait_exit(&mut child);
        // A machine without loop devices fails the study's set-up.
        skip(&format!(
            "no loop filesystem was made: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
        return;
    };
    let opts = kscale_mount_options(&mp);
    assert!(
        opts.as_deref().is_some_and(|o| o.contains("noatime")),
        "{opts:?}"
    );
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        kscale_mount_options(&mp).is_some(),
        "SIGKILL left it mounted"
    );

    let out = env.cmd(&["tune", "--restore"]).output().expect("restore");
    common::assert_exit(&out, 0);
    assert_eq!(kscale_mount_options(&mp), None);
    assert!(!image.exists() && !mp.exists());
    assert_eq!(loop_devices_of(&image), "");
}

/// Options of whatever is mounted at `mp`, from /proc/mounts.
fn kscale_mount_options(mp: &Path) -> Option<String> {
    let text = std::fs::read_to_string("/proc/mounts").ok()?;
    let mp = mp.to_string_lossy();
    text.lines().rev().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() >= 4 && f[1] == mp).then(|| f[3].to_string())
    })
}

/// SIGINT (Ctrl-C) and SIGTERM restore everything without --restore.
fn signal_restores(sig: nix::sys::signal::Signal, tag: &str) {
    let Some((env, ns)) = setup(tag) else { return };
    write_in(&ns, FIN, "58");
    write_in(&ns, KEEPALIVE, "7222");
    let p = plan(env.path(), 24, 3444, true);
    let mut child = start(&env, &ns, &p);
    // fs, fin, keepalive and the mount options: the last step under way.
    wait_mid_step(&env, 4, 4);
    assert_eq!(read_in(&ns, FIN), "24");
    common::signal(&child, sig);
    let out = wait_exit(&mut child);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + sig as i32), "{err}");
    assert!(err.contains("every setting was restored"), "{err}");
    assert_eq!(read_in(&ns, FIN), "58");
    assert_eq!(read_in(&ns, KEEPALIVE), "7222");
    assert_eq!(
        db_count(
            &env,
            "SELECT count(*) FROM journal WHERE restored_at IS NULL"
        ),
        0
    );
    assert!(images_in(env.path()).is_empty(), "the filesystem was left");
    let out = env.cmd(&["tune", "--restore"]).output().expect("restore");
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to restore"));
}

#[test]
fn ctrl_c_restores_without_restore() {
    signal_restores(nix::sys::signal::Signal::SIGINT, "ti");
}

#[test]
fn sigterm_restores_without_restore() {
    signal_restores(nix::sys::signal::Signal::SIGTERM, "tt");
}

/// Ctrl-C while a group's states take turns: the machine may be in any of
/// them, the switches wrote without journalling, and still every sysctl
/// comes back, from the entries the steps' first application journalled;
/// each state's run and step say how it ended.
#[test]
fn ctrl_c_while_interleaving_restores_every_sysctl() {
    let Some((env, ns)) = setup("tn") else { return };
    write_in(&ns, FIN, "55");
    write_in(&ns, KEEPALIVE, "7444");
    let p = plan(env.path(), 27, 3777, false);
    let mut child = start(&env, &ns, &p);
    wait_mid_step(&env, 2, 3);
    // Past the first switches: trials of more than one state stored.
    assert!(
        common::wait_for(
            || db_count(&env, "SELECT count(DISTINCT case_id) FROM trials") >= 2,
            60
        ),
        "no state's trial after the first"
    );
    common::signal(&child, nix::sys::signal::Signal::SIGINT);
    let out = wait_exit(&mut child);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("every setting was restored"), "{err}");
    assert_eq!(read_in(&ns, FIN), "55");
    assert_eq!(read_in(&ns, KEEPALIVE), "7444");
    assert_eq!(
        db_count(
            &env,
            "SELECT count(*) FROM journal WHERE restored_at IS NULL"
        ),
        0
    );
    assert_eq!(
        db_count(
            &env,
            "SELECT count(*) FROM runs WHERE status = 'interrupted'"
        ),
        3
    );
    assert_eq!(
        db_count(
            &env,
            "SELECT count(*) FROM tune_steps WHERE error IS NOT NULL AND measured IS NOT NULL"
        ),
        3
    );
}

#[test]
fn a_whole_study_prints_the_staircase_writes_the_chart_and_restores() {
    let Some((env, ns)) = setup("tw") else { return };
    write_in(&ns, FIN, "59");
    let p = plan(env.path(), 25, 3555, false);
    let out = ns
        .kscale(&env, None)
        .args(["tune", "--quick", "--trial-time", "0.05", "--no-progress"])
        .arg(&p)
        .args(["-o", "study.html"])
        .output()
        .expect("tune");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    for step in [
        "baseline",
        "fin",
        "keepalive",
        "baseline-again",
        "vs baseline",
    ] {
        assert!(text.contains(step), "{step} missing from\n{text}");
    }
    // Either verdict of the drift check ("Drift: …" or "No significant
    // drift: …"), whichever this machine's noise gives.
    assert!(text.to_lowercase().contains("drift"), "{text}");
    assert_eq!(read_in(&ns, FIN), "59");
    let html = std::fs::read_to_string(env.path().join("study.html")).expect("report");
    // The staircase: a column per step (baseline, two steps, the baseline
    // again), each with its interval.
    assert!(html.contains(r#"data-kind="column""#));
    assert!(html.matches(r#"<rect class="bar mark""#).count() >= 4);
    assert!(html.matches(r#"<path class="ci mark""#).count() >= 4);
    // Laid out whole in a browser: no text outside a chart, no mark outside
    // its plot (the report's own check, docs/report.md).
    if Command::new("which")
        .arg("chromium")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        let out = Command::new("timeout")
            .args([
                "120",
                "chromium",
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
            ])
            .arg(format!(
                "--user-data-dir={}",
                env.path().join("chromium").display()
            ))
            .arg("--dump-dom")
            .arg(format!(
                "file://{}",
                env.path().join("study.html").display()
            ))
            .output()
            .expect("chromium");
        let dom = String::from_utf8_lossy(&out.stdout);
        assert!(
            dom.contains(r#"data-geometry-problems="0""#)
                && dom.contains(r#"data-interval-problems="0""#),
            "{}",
            &dom[dom.len().saturating_sub(900)..]
        );
        assert!(!dom.contains(r#"data-charts-rendered="0""#));
    } else {
        skip("no chromium to lay the report out (apt-get install chromium)");
    }
    // compare works step by step: each step is a run.
    let out = env
        .cmd(&[
            "compare",
            "plan.0-baseline",
            "plan.1-fin",
            "plan.2-keepalive",
        ])
        .output()
        .expect("compare");
    common::assert_exit(&out, 0);
    // Every step waited on idle CPUs the same way, and its snapshot says how.
    let idle: Vec<String> = ["plan.0-baseline", "plan.1-fin", "plan.2-keepalive"]
        .iter()
        .map(|r| env.export(r)["system"]["cpu_idle"]["kscale"].to_string())
        .collect();
    assert!(
        idle.iter().all(|i| i == &idle[0]) && ["\"poll\"", "\"as-is\""].contains(&idle[0].as_str()),
        "{idle:?}"
    );
}

/// Two sysctl steps switch by a write each: the baseline's and both
/// steps' trials alternate, in the order the study's stored seed draws
/// round by round, every sysctl is back afterwards, and the staircase gives
/// each step's p-value, with its test, from those trials (docs/tune.md,
/// "Interleaved steps").
#[test]
fn sysctl_steps_interleave_their_trials_in_the_seeds_random_order() {
    let Some((env, ns)) = setup("tx") else { return };
    write_in(&ns, FIN, "56");
    write_in(&ns, KEEPALIVE, "7333");
    let p = plan(env.path(), 26, 3666, false);
    let out = ns
        .kscale(&env, None)
        .args(["tune", "--quick", "--trial-time", "0.02", "--no-progress"])
        .arg(&p)
        .output()
        .expect("tune");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(read_in(&ns, FIN), "56");
    assert_eq!(read_in(&ns, KEEPALIVE), "7333");
    assert_eq!(
        db_count(
            &env,
            "SELECT count(*) FROM journal WHERE restored_at IS NULL"
        ),
        0
    );

    let db = rusqlite::Connection::open(env.db()).expect("db");
    let measured: Vec<String> = db
        .prepare("SELECT measured FROM tune_steps ORDER BY seq")
        .and_then(|mut st| {
            st.query_map([], |r| r.get::<_, String>(0))?
                .collect::<Result<_, _>>()
        })
        .expect("tune_steps");
    assert_eq!(measured.len(), 4, "{measured:?}");
    assert!(
        measured[..3].iter().all(|m| m == &measured[0]),
        "{measured:?}"
    );
    assert!(measured[3].starts_with("sequential: "), "{measured:?}");
    let seed = measured[0]
        .strip_prefix("interleaved, seed 0x")
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .unwrap_or_else(|| panic!("no seed in {measured:?}"));
    assert!(err.contains(&format!("seed {seed:#x}")), "{err}");

    // Every trial of the three states, in the order they were stored.
    let arms = ["plan.0-baseline", "plan.1-fin", "plan.2-keepalive"];
    let order: Vec<usize> = db
        .prepare(
            "SELECT r.label FROM trials t JOIN cases c ON t.case_id = c.id \
             JOIN runs r ON c.run_id = r.id ORDER BY t.id",
        )
        .and_then(|mut st| {
            st.query_map([], |r| r.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()
        })
        .expect("trials")
        .iter()
        .filter_map(|l| arms.iter().position(|a| a == l))
        .collect();
    let counts: Vec<usize> = (0..3)
        .map(|a| order.iter().filter(|&&x| x == a).count())
        .collect();
    assert!(counts.iter().all(|&c| c >= 4), "{counts:?}: {order:?}");
    // Not one state after the other: every state's trials span the others'.
    for a in 0..3 {
        let first = order.iter().position(|&x| x == a);
        let last = order.iter().rposition(|&x| x == a);
        for b in (0..3).filter(|&b| b != a) {
            assert!(
                first < order.iter().rposition(|&x| x == b)
                    && order.iter().position(|&x| x == b) < last,
                "{a} and {b} are not interleaved: {order:?}"
            );
        }
    }
    // Exactly the rounds the seed draws: each a fresh shuffle of the
    // states still measuring (one case each, so one trial a round).
    let mut rng = kscale_core::order::SplitMix64::new(seed);
    let mut want = Vec::new();
    for r in 0.. {
        let alive: Vec<usize> = (0..3).filter(|&a| counts[a] > r).collect();
        if alive.is_empty() {
            break;
        }
        want.extend(kscale_core::order::round(&mut rng, &alive));
    }
    assert_eq!(order, want);

    // The staircase: each step's p-value and its test, from those trials.
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("p (test)"), "{text}");
    for step in ["fin", "keepalive"] {
        let row = text
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(step))
            .unwrap_or_else(|| panic!("no row {step} in\n{text}"));
        assert!(row.contains("interleaved"), "{row}");
        // The cell "0.028 rank-sum" (or "<0.001 Welch t"): a p-value, then
        // the test that gave it.
        let p = ["Welch t", "Yuen t", "rank-sum"].iter().find_map(|t| {
            let before = row.split(&format!(" {t}")).next()?;
            (before.len() < row.len()).then_some(())?;
            let p = before.split_whitespace().last()?.trim_start_matches('<');
            p.parse::<f64>().ok()
        });
        assert!(p.is_some_and(|p| (0.0..=1.0).contains(&p)), "{row}");
    }
}

/// `kscale tune --quick ARGS --no-progress PLAN` in the namespace, which
/// must succeed: its stdout and stderr.
fn tune_ok(env: &Env, ns: &Netns, args: &[&str], plan: &Path) -> (String, String) {
    let out = ns
        .kscale(env, None)
        .args(["tune", "--quick"])
        .args(args)
        .arg("--no-progress")
        .arg(plan)
        .output()
        .expect("tune");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), err)
}

/// Tune's arms draw on the one budget (docs/budget.md, "One spender"): a
/// budgeted tune ends saying what its interleaved arms took.
#[test]
fn a_budgeted_tune_says_what_its_arms_drew() {
    let Some((env, ns)) = setup("tb") else { return };
    let p = plan(env.path(), 26, 3666, false);
    let (_, err) = tune_ok(&env, &ns, &["--trial-time", "0.02", "--budget", "5s"], &p);
    let arms = common::drawn(&err, "tune's arms");
    assert!(arms.is_some_and(|s| s > 0.0), "{err}");
}

#[test]
fn a_setting_that_cannot_be_changed_fails_its_step_in_one_line() {
    let Some((env, ns)) = setup("tf") else { return };
    let text = r#"[target]
workloads = ["syscall.null"]
cpus = "1"

[[step]]
name = "absent"
rationale = "a sysctl this kernel does not have"
settings = [{ kind = "sysctl", key = "net.ipv4.no_such_knob_here", value = 1 }]
"#;
    let p = env.path().join("plan.toml");
    std::fs::write(&p, text).expect("plan");
    let (stdout, err) = tune_ok(&env, &ns, &["--trial-time", "0.05"], &p);
    let line = err
        .lines()
        .find(|l| l.contains("step 1 (absent) failed"))
        .unwrap_or_default();
    assert!(line.contains("absent on this kernel"), "{err}");
    assert!(stdout.contains("failed: cannot read"));
}

#[test]
fn bad_plans_are_refused_with_file_line_and_column() {
    let env = Env::new();
    let cases: &[(&str, &str)] = &[
        (
            "[target]\nworkloads = [\"syscall.null\"]\nbogus = 1\n",
            "plan.toml:3:1: ",
        ),
        (
            "[target]\nworkloads = [\"nope.nope\"]\n",
            "plan.toml:2:14: unknown workload",
        ),
        (
            "[target]\nworkloads = [\"syscall.null\"]\n\n[[step]]\nname = \"a\"\nrationale = \"r\"\nsettings = [{ kind = \"sysctl\", key = \"kernel.x\", value = 1 }]\n\n[[step]]\nname = \"a\"\nrationale = \"r\"\nsettings = [{ kind = \"affinity\", value = \"1\" }]\n",
            "plan.toml:10:8: duplicate step `a`",
        ),
        (
            "[target]\nworkloads = [\"syscall.null\"]\n\n[[step]]\nname = \"a\"\nrationale = \"r\"\nsettings = [{ kind = \"thp\", key = \"enabled\", value = \"sometimes\" }]\n",
            "plan.toml:7:",
        ),
        ("[target\n", "plan.toml:1:"),
    ];
    for (text, want) in cases {
        std::fs::write(env.path().join("plan.toml"), text).expect("plan");
        let out = env.cmd(&["tune", "plan.toml"]).output().expect("tune");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            err.starts_with(&format!("kscale: error: {want}")),
            "want {want}, got {err}"
        );
        // Refused before anything changed: no study, no journal.
        assert_eq!(db_count(&env, "SELECT count(*) FROM tunes"), 0);
    }
}

#[test]
fn every_example_plan_parses_and_validates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/tune");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).expect("examples/tune") {
        let p = e.expect("entry").path();
        if p.extension().is_none_or(|x| x != "toml") {
            continue;
        }
        n += 1;
        let out = common::kscale()
            .args(["tune", "--check"])
            .arg(&p)
            .output()
            .expect("check");
        assert!(
            out.status.success(),
            "{}: {}",
            p.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(n >= 3, "only {n} example plans");
}

/// `--cpu-mode hotplug` takes CPUs offline: the whole machine feels it, so
/// these run only when asked for, one at a time:
/// `KSCALE_TEST_HOTPLUG=1 cargo test -p kscale --test tune hotplug -- --test-threads=1`.
fn hotplug_wanted() -> bool {
    if std::env::var_os("KSCALE_TEST_HOTPLUG").is_some_and(|v| v == "1") {
        return true;
    }
    eprintln!("not run: set KSCALE_TEST_HOTPLUG=1 to take CPUs offline in this test");
    false
}

fn online_cpus() -> String {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .unwrap_or_default()
        .trim()
        .to_string()
}

#[test]
fn hotplug_runs_bring_every_cpu_back_after_a_normal_end_and_after_sigkill() {
    if !hotplug_wanted() {
        return;
    }
    if !root() || !Path::new("/sys/devices/system/cpu/cpu1/online").exists() {
        skip("hotplug needs root and a CPU 1 that can go offline");
        return;
    }
    let before = online_cpus();
    let env = Env::new();
    let hotplug_run = |trial_time| {
        [
            "run",
            "syscall.null",
            "--cpus",
            "1",
            "--cpu-mode",
            "hotplug",
            "--quick",
            "--trial-time",
            trial_time,
            "--no-progress",
        ]
    };
    env.cmd(&hotplug_run("0.05")).assert().success();
    assert_eq!(online_cpus(), before);
    let opts = env.export("latest");
    assert_eq!(opts["run"]["options"]["cpu_mode"], "hotplug", "{opts}");

    let mark = format!("hotplug-{}", std::process::id());
    let mut child = env.spawn_marked(&mark, &hotplug_run("1"));
    wait_mid_step(&env, 1, 2);
    assert_ne!(online_cpus(), before, "no CPU went offline");
    let _ = child.kill();
    let _ = child.wait();
    assert_ne!(online_cpus(), before, "SIGKILL gives no chance to restore");
    env.cmd(&["tune", "--restore"]).assert().success();
    assert_eq!(online_cpus(), before);
}

#[test]
fn hotplug_is_refused_in_one_line_before_anything_is_measured_without_root() {
    // Changes nothing: the refusal comes before any CPU is touched.
    if !root() || !Path::new("/usr/bin/setpriv").exists() {
        skip("needs root and setpriv to run kscale as nobody");
        return;
    }
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(common::bin())
        .args([
            "--db",
            "/nonexistent/k.db",
            "run",
            "syscall.null",
            "--cpus",
            "1",
        ])
        .args(["--cpu-mode", "hotplug", "--quick", "--dir", "/tmp"])
        .output()
        .expect("setpriv");
    common::assert_refused(&out, "needs root", "--cpu-mode hotplug as nobody");
}
