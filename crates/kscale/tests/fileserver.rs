//! fileserver.mix on the real binary: a quick run and what it leaves, a
//! corrupted file failing its case, bad input, and a SIGKILLed run taking
//! its clients and their trees with it.

mod common;
use common::{
    assert_no_marked_processes, assert_none_marked, comm, marked_processes, wait_for, Env,
};
use std::path::Path;

/// Short windows: the quick sweep (clients 1 and 4), 1 s each (long enough
/// for every kind, even the 0.6 % of locks, to complete on a slow disk), two
/// counted trials.
fn quick() -> Vec<&'static str> {
    let mut args = common::two_trials("fileserver.mix", &["duration=1"]);
    args.push("--quick");
    args
}

/// A 30 s run of `clients` clients: long enough to be stopped midway.
/// In `dir`, named: a run whose directory nobody named measures the file
/// set where it settles (`/dev/shm` when `dir` is on ext4 without a
/// journal), and these tests look for what it leaves in `dir`.
fn long_run<'a>(clients: &'a str, dir: &'a str) -> [&'a str; 9] {
    [
        "run",
        "fileserver.mix",
        "--param",
        clients,
        "--param",
        "duration=30",
        "--dir",
        dir,
        "--no-progress",
    ]
}

/// Every file and directory under `dir`, except the database; a SIGKILLed
/// run's scratch directory is the next run's to remove, so only what is in
/// it counts.
fn leftovers(dir: &Path) -> Vec<String> {
    common::leftovers(dir, |e, _| {
        e.path().is_dir() && e.file_name().to_string_lossy().starts_with(".kscale-tmp-")
    })
}

#[test]
fn quick_run_measures_verifies_and_leaves_nothing() {
    let env = Env::new();
    let mark = format!("fsq-{}", std::process::id());
    let out = env
        .cmd(&quick())
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
    env.assert_primary_done("mbps", 2);
    assert_none_marked(&mark);
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
    env.run_corrupted("fileserver.mix", &[]);
    let j = env.export("latest");
    assert_eq!(j["run"]["status"], "failed");
    let err = common::failed_case_error(&j);
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
    let dir = env.path().display().to_string();
    let mut child = env.spawn_marked(&mark, &long_run("clients=4", &dir));
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
    let dir = env.path().display().to_string();
    let mut child = env.spawn_marked(&mark, &long_run("clients=2", &dir));
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
    assert_no_marked_processes(&mark);
    assert_eq!(leftovers(env.path()), Vec::<String>::new());
    assert_eq!(env.export("latest")["run"]["status"], "interrupted");
}

/// A client killed mid-trial costs its case, with the reason, and the
/// other clients and every tree go with it.
#[test]
fn a_killed_client_fails_the_case_and_leaves_nothing() {
    let env = Env::new();
    let mark = format!("fscl-{}", std::process::id());
    let dir = env.path().display().to_string();
    let child = env.spawn_marked_piped(&mark, &long_run("clients=3", &dir));
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
    common::assert_exit(&out, 1);
    let err = common::failed_case_error(&env.export("latest"));
    assert!(err.contains("was killed by SIGKILL"), "{err}");
    assert_no_marked_processes(&mark);
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
