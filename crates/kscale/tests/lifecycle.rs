//! Runs that end badly: SIGKILL then --resume, Ctrl-C/SIGTERM, a crashing
//! worker and a hanging one. Nothing may be left behind and the store must
//! stay consistent.

mod common;
use common::{
    assert_exit, assert_no_marked_processes, assert_none_marked, signal, wait_for, Env, SLOW_RUN,
};

fn trials(env: &Env) -> i64 {
    rusqlite::Connection::open(env.db())
        .and_then(|c| c.query_row("SELECT count(*) FROM trials", [], |r| r.get(0)))
        .unwrap_or(0)
}

/// The result of workload `w` in an export.
fn result_of(j: &serde_json::Value, w: &str) -> serde_json::Value {
    j["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["workload"] == w)
        .cloned()
        .unwrap_or_else(|| panic!("no result for {w}: {j}"))
}

/// A resumed run says how long what is left of it takes, not the whole
/// run: of two cases, one finished before the run stopped.
#[test]
fn a_resumed_run_says_how_long_its_unfinished_cases_take() {
    let env = Env::new();
    env.quick_on_cpu1(&["syscall.null", "syscall.read"], &["--trial-time", "0.05"])
        .assert()
        .success();
    // As if it had stopped before syscall.read's first trial.
    let c = rusqlite::Connection::open(env.db()).unwrap();
    c.execute_batch(
        "UPDATE runs SET status = 'interrupted';
         DELETE FROM trials WHERE case_id IN (SELECT id FROM cases WHERE workload = 'syscall.read');
         UPDATE cases SET status = 'pending', converged = NULL WHERE workload = 'syscall.read';",
    )
    .unwrap();
    drop(c);
    let out = env
        .cmd(&["run", "--resume", "latest", "--no-progress"])
        .assert()
        .success();
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(err.contains("its 1 case takes about"), "{err}");
    assert_eq!(env.export("latest")["run"]["status"], "complete");
}

#[test]
fn sigkill_then_resume_completes_the_run() {
    let env = Env::new();
    let mark = format!("kill-{}", std::process::id());
    let mut child = env.spawn_marked(&mark, SLOW_RUN);
    assert!(wait_for(|| trials(&env) >= 4, 60), "no trials were stored");
    child.kill().unwrap(); // SIGKILL: no chance to clean up
    child.wait().unwrap();

    // Workers die with their parent (PDEATHSIG).
    assert_no_marked_processes(&mark);

    // The database is consistent and the run is visibly unfinished.
    let c = rusqlite::Connection::open(env.db()).unwrap();
    let ok: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
    let status: String = c
        .query_row("SELECT status FROM runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(status, "running");
    let before = trials(&env);
    let orphans: i64 = c
        .query_row(
            "SELECT count(*) FROM trials WHERE case_id NOT IN (SELECT id FROM cases)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(orphans, 0);
    drop(c);

    env.cmd(&["run", "--resume", "latest", "--no-progress"])
        .assert()
        .success();
    assert_eq!(env.export("latest")["run"]["status"], "complete");
    let results = env.primary("latest");
    assert_eq!(results.len(), 6, "3 workloads × 2 configurations");
    for r in &results {
        assert_eq!(r["status"], "done", "{r}");
        assert!(r["n"].as_u64().unwrap() >= 3, "{r}");
    }
    assert!(trials(&env) > before, "resume added trials");
    // Trials stored before the kill were kept, not redone from scratch.
    let c = rusqlite::Connection::open(env.db()).unwrap();
    let warmups: i64 = c
        .query_row("SELECT count(*) FROM trials WHERE warmup = 1", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(warmups, 6, "exactly one warm-up per case");
}

fn interrupt_with(sig: nix::sys::signal::Signal, code: i32) {
    let env = Env::new();
    let mark = format!("sig{}-{}", sig as i32, std::process::id());
    let mut child = env.spawn_marked(&mark, SLOW_RUN);
    assert!(wait_for(|| trials(&env) >= 2, 60), "no trials were stored");
    signal(&child, sig);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(code), "{status:?}");
    assert_none_marked(&mark);
    assert!(
        env.scratch_dirs().is_empty(),
        "scratch dir left: {:?}",
        env.scratch_dirs()
    );
    let j = env.export("latest");
    assert_eq!(j["run"]["status"], "interrupted");
}

#[test]
fn ctrl_c_cleans_up_and_marks_interrupted() {
    interrupt_with(nix::sys::signal::Signal::SIGINT, 130);
}

#[test]
fn sigterm_cleans_up_and_marks_interrupted() {
    interrupt_with(nix::sys::signal::Signal::SIGTERM, 143);
}

#[test]
fn crashing_worker_costs_one_case() {
    let env = Env::new();
    let out = env
        .tiny_run(&["syscall.null", "syscall.read"], "1", "crash")
        .env("KSCALE_FAULT", "crash:syscall.read")
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("failed"), "{stdout}");
    let j = env.export("latest");
    let by = |w: &str| result_of(&j, w);
    assert_eq!(by("syscall.null")["status"], "done");
    assert_eq!(by("syscall.read")["status"], "failed");
    assert!(by("syscall.read")["error"]
        .as_str()
        .unwrap()
        .contains("signal 6"));
    assert!(env.scratch_dirs().is_empty());
}

#[test]
fn hanging_worker_is_killed_with_its_group() {
    let env = Env::new();
    let mark = format!("hang-{}", std::process::id());
    let out = env
        .tiny_run(&["syscall.null", "syscall.pipe"], "1", "hang")
        .env("KSCALE_FAULT", "hang:syscall.null")
        .env("KSCALE_TRIAL_TIMEOUT", "1")
        .env("KSCALE_TEST_MARK", &mark)
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let null = result_of(&env.export("latest"), "syscall.null");
    assert_eq!(null["status"], "failed");
    assert!(
        null["error"].as_str().unwrap().contains("timed out"),
        "{null}"
    );
    assert_none_marked(&mark);
}

/// A run SIGKILLed where it moved its file cases (`/dev/shm`, the
/// temporary directory) cannot remove its scratch there; the next run,
/// wherever it works, does, once the owner is gone, and leaves a live
/// run's alone.
#[test]
fn a_killed_runs_scratch_in_a_settling_place_is_removed_by_the_next_run() {
    let place = std::path::Path::new("/dev/shm");
    if !place.is_dir() {
        common::skip("no /dev/shm");
        return;
    }
    // A pid that was a process and is no more.
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let stale = place.join(format!(".kscale-tmp-{dead}-test{}", std::process::id()));
    let live = place.join(format!(".kscale-tmp-{}-test", std::process::id()));
    for d in [&stale, &live] {
        std::fs::create_dir_all(d.join("inner")).unwrap();
    }
    let env = Env::new();
    env.assert_next_run_clears_scratch();
    let stale_gone = !stale.exists();
    let live_kept = live.exists();
    let _ = std::fs::remove_dir_all(&stale);
    let _ = std::fs::remove_dir_all(&live);
    assert!(stale_gone, "{} left", stale.display());
    assert!(live_kept, "a live run's scratch was removed");
}
