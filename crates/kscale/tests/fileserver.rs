//! fileserver.mix on the real binary: a quick run and what it leaves, a
//! corrupted file failing its case, bad input, and a SIGKILLed run taking
//! its clients and their trees with it.

mod common;
use common::{assert_no_marked_processes, comm, marked_processes, wait_for, Env};
use std::path::Path;

/// Short windows: the quick sweep (clients 1 and 4), 1 s each (long enough
/// for every kind, even the 0.6 % of locks, to complete on a slow disk), two
/// counted trials.
const QUICK: &[&str] = &[
    "run",
    "fileserver.mix",
    "--quick",
    "--param",
    "duration=1",
    "--min-trials",
    "2",
    "--max-trials",
    "2",
    "--no-progress",
];

/// A 30 s run of `clients` clients: long enough to be stopped midway.
fn long_run(clients: &str) -> [&str; 7] {
    [
        "run",
        "fileserver.mix",
        "--param",
        clients,
        "--param",
        "duration=30",
        "--no-progress",
    ]
}

/// Every file and directory under `dir`, except the database.
fn leftovers(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if d == dir && name.starts_with("k.db") {
                continue;
            }
            if p.is_dir() {
                stack.push(p.clone());
                // The scratch directory of a SIGKILLed run is the next run's
                // to remove; what matters is that it is empty.
                if name.starts_with(".kscale-tmp-") {
                    continue;
                }
            }
            out.push(p.display().to_string());
        }
    }
    out
}

#[test]
fn quick_run_measures_verifies_and_leaves_nothing() {
    let env = Env::new();
    let mark = format!("fsq-{}", std::process::id());
    let out = env
        .cmd(QUICK)
        .env("KSCALE_TEST_MARK", &mark)
        .output()
        .unwrap();
    let text = common::stdout_of_success(&out, "run fileserver.mix");
    // The sweep, the metrics and the note about --dir's file system.
    assert!(
        text.contains("clients=1") && text.contains("clients=4"),
        "{text}"
    );
    for m in [
        "MB/s",
        "ops/s",
        "fsyncs/s",
        "p99_read",
        "p99_fsync",
        "p99_lock",
    ] {
        assert!(text.contains(m), "no {m} in:\n{text}");
    }
    assert!(text.contains("--dir is on "), "{text}");
    assert!(text.contains("every read verified"), "{text}");
    let primary = env.primary("latest");
    assert_eq!(primary.len(), 2, "{primary:?}");
    for r in primary {
        assert_eq!(r["status"], "done", "{r}");
        assert_eq!(r["metric"], "mbps", "{r}");
        assert!(r["mean"].as_f64().unwrap_or(0.0) > 0.0, "{r}");
    }
    assert!(
        marked_processes(&mark).is_empty(),
        "{:?}",
        marked_processes(&mark)
    );
    assert_eq!(leftovers(env.path()), Vec::<String>::new());
    assert!(
        !env.path()
            .read_dir()
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(".kscale-tmp-")),
        "scratch directory left"
    );
}

/// A byte flipped behind client 0's back (KSCALE_FAULT=corrupt:…) is read
/// back, noticed, and the case fails: no throughput for a server that
/// returns the wrong data.
#[test]
fn a_corrupted_file_fails_the_case() {
    let env = Env::new();
    let out = env
        .cmd(&[
            "run",
            "fileserver.mix",
            "--param",
            "clients=1",
            "--param",
            "duration=2",
            "--min-trials",
            "2",
            "--max-trials",
            "2",
            "--no-progress",
        ])
        .env("KSCALE_FAULT", "corrupt:fileserver.mix")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let j = env.export("latest");
    assert_eq!(j["run"]["status"], "failed");
    let r = &j["results"][0];
    assert_eq!(r["status"], "failed", "{r}");
    let err = r["error"].as_str().unwrap_or("");
    assert!(
        err.contains("client 0") && err.contains("data mismatch"),
        "{err}"
    );
    assert_eq!(leftovers(env.path()), Vec::<String>::new());
}

#[test]
fn zero_clients_is_refused() {
    let env = Env::new();
    let out = env
        .cmd(&["run", "fileserver.mix", "--param", "clients=0"])
        .output()
        .unwrap();
    common::assert_refused(&out, "clients", "clients=0");
    assert!(String::from_utf8_lossy(&out.stderr).contains('0'));
    assert!(!env.db().exists(), "a run was created for bad input");
}

/// `--dir` on a read-only mount: one line, status 2, before any run. The
/// mount is a read-only tmpfs in a mount namespace of the test's own.
#[test]
fn a_read_only_dir_is_refused() {
    let env = Env::new();
    let ro = env.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    let script = r#"mount -t tmpfs -o ro kscale-ro "$1" || exit 99
exec "$2" --db "$3" run fileserver.mix --quick --dir "$1""#;
    let Some(out) = env.kscale_in_mount_ns("cannot mount a read-only tmpfs", script, &[&ro], &[])
    else {
        return;
    };
    common::assert_refused(&out, "Read-only file system", "--dir");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--dir"));
    assert!(!env.db().exists(), "a run was created for bad input");
}

/// SIGKILL of `kscale run` mid-trial: the worker and its clients die with
/// it (PDEATHSIG), and the janitor removes the clients' trees.
#[test]
fn sigkill_of_the_parent_leaves_no_client_and_no_file() {
    let env = Env::new();
    let mark = format!("fskill-{}", std::process::id());
    let mut child = env.spawn_marked(&mark, &long_run("clients=4"));
    let clients = || {
        marked_processes(&mark)
            .into_iter()
            .filter(|p| comm(*p) == "kscale-client")
            .count()
    };
    assert!(wait_for(|| clients() == 4, 60), "the clients never started");
    // Let them fill their trees and run.
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(
        !leftovers(env.path()).is_empty(),
        "no client tree to clean up"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert_no_marked_processes(&mark);
    assert!(
        wait_for(|| leftovers(env.path()).is_empty(), 10),
        "{:?}",
        leftovers(env.path())
    );
}

/// Ctrl-C mid-trial: status 130, the run interrupted, nothing left.
#[test]
fn ctrl_c_leaves_no_client_and_no_file() {
    let env = Env::new();
    let mark = format!("fsint-{}", std::process::id());
    let mut child = env.spawn_marked(&mark, &long_run("clients=2"));
    assert!(
        wait_for(
            || marked_processes(&mark)
                .iter()
                .any(|p| comm(*p) == "kscale-client"),
            60
        ),
        "no client started"
    );
    common::signal(&child, nix::sys::signal::Signal::SIGINT);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{status:?}");
    assert!(
        wait_for(|| marked_processes(&mark).is_empty(), 10),
        "{:?}",
        marked_processes(&mark)
    );
    assert_eq!(leftovers(env.path()), Vec::<String>::new());
    assert_eq!(env.export("latest")["run"]["status"], "interrupted");
}

/// A client killed mid-trial costs its case, with the reason, and the
/// other clients and every tree go with it.
#[test]
fn a_killed_client_fails_the_case_and_leaves_nothing() {
    let env = Env::new();
    let mark = format!("fscl-{}", std::process::id());
    let child = env.spawn_marked_piped(&mark, &long_run("clients=3"));
    let client = || {
        marked_processes(&mark)
            .into_iter()
            .find(|p| comm(*p) == "kscale-client")
    };
    assert!(wait_for(|| client().is_some(), 60), "no client started");
    let victim = client().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(victim),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let r = &env.export("latest")["results"][0];
    assert_eq!(r["status"], "failed", "{r}");
    let err = r["error"].as_str().unwrap_or("");
    assert!(err.contains("was killed by SIGKILL"), "{err}");
    assert!(
        wait_for(|| marked_processes(&mark).is_empty(), 10),
        "{:?}",
        marked_processes(&mark)
    );
    assert_eq!(leftovers(env.path()), Vec::<String>::new());
}

/// The note names the file system and mount options of --dir: here a tmpfs
/// mounted with options of the test's choosing, in a mount namespace of its
/// own (as a loop mount with data=writeback would be).
#[test]
fn the_note_names_the_mount_of_dir() {
    let env = Env::new();
    let mnt = env.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let script = r#"mount -t tmpfs -o size=64m,nr_inodes=9999 kscale-fs "$1" || exit 99
exec "$2" --db "$3" run fileserver.mix --param clients=1 --param duration=0.3 --min-trials 2 --max-trials 2 --no-progress --dir "$1""#;
    let Some(out) = env.kscale_in_mount_ns("cannot mount a tmpfs", script, &[&mnt], &[]) else {
        return;
    };
    let text = common::stdout_of_success(&out, "run fileserver.mix");
    let note = text
        .lines()
        .find(|l| l.contains("--dir is on "))
        .unwrap_or_else(|| panic!("no mount note in:\n{text}"));
    assert!(
        note.contains("tmpfs (kscale-fs)") && note.contains("nr_inodes=9999"),
        "{note}"
    );
}
