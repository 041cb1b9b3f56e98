//! `kscale vm` with real parts: Debian's QEMU and a Debian cloud kernel,
//! booted emulated (TCG, which every machine has). One boot runs one
//! quick workload and its run comes back labelled and marked; a run
//! killed with SIGINT or SIGKILL while QEMU runs leaves no QEMU and no
//! scratch file. The kernel is found in $KSCALE_TEST_KERNEL, else in the
//! cache `.ci/run` fills (/var/cache/kscale-kernels), else downloaded
//! there with `apt-get download` where apt can.

mod common;
use common::{assert_exit, marked_processes, refused, signal, skip, wait_for, Env};
use nix::sys::signal::Signal;
use std::path::{Path, PathBuf};
use std::process::Stdio;

const PACKAGE: &str = "linux-image-6.1.0-50-cloud-amd64";
const RELEASE: &str = "6.1.0-50-cloud-amd64";
const CACHE: &str = "/var/cache/kscale-kernels";

/// The vmlinuz of [`PACKAGE`] unpacked (not installed) in `dir`.
fn unpacked(dir: &Path) -> PathBuf {
    dir.join(PACKAGE)
        .join("boot")
        .join(format!("vmlinuz-{RELEASE}"))
}

/// Downloads and unpacks [`PACKAGE`] into [`CACHE`]; why not, if it cannot.
fn download() -> Result<PathBuf, String> {
    let cache = Path::new(CACHE);
    std::fs::create_dir_all(cache).map_err(|e| format!("{CACHE}: {e}"))?;
    let st = std::process::Command::new("apt-get")
        .args(["download", "-qq", PACKAGE])
        .current_dir(cache)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("apt-get: {e}"))?;
    if !st.success() {
        return Err(format!("apt-get download {PACKAGE} failed ({st})"));
    }
    let deb = std::fs::read_dir(cache)
        .map_err(|e| e.to_string())?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{PACKAGE}_")))
        })
        .ok_or("apt-get download left no .deb")?;
    let st = std::process::Command::new("dpkg")
        .arg("-x")
        .arg(&deb)
        .arg(cache.join(PACKAGE))
        .status()
        .map_err(|e| format!("dpkg: {e}"))?;
    if !st.success() {
        return Err(format!("dpkg -x {} failed", deb.display()));
    }
    Ok(unpacked(cache))
}

/// QEMU and a Debian kernel image, or `None` after a [`skip`] naming
/// what is missing.
fn parts() -> Option<PathBuf> {
    static KERNEL: std::sync::Mutex<Option<Result<PathBuf, String>>> = std::sync::Mutex::new(None);
    let qemu = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("qemu-system-x86_64").is_file()));
    if !qemu {
        skip("QEMU is not installed (Debian package qemu-system-x86)");
        return None;
    }
    let mut k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    let found = k.get_or_insert_with(|| {
        if let Some(p) = std::env::var_os("KSCALE_TEST_KERNEL") {
            return Ok(PathBuf::from(p));
        }
        let cached = unpacked(Path::new(CACHE));
        if cached.is_file() {
            return Ok(cached);
        }
        download()
    });
    match found {
        Ok(p) => Some(p.clone()),
        Err(why) => {
            skip(&format!("no Debian kernel image to boot: {why}"));
            None
        }
    }
}

/// `kscale vm` scratch directories left in `dir`.
fn scratch(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("kscale-vm-"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn an_emulated_up_boot_brings_its_run_back_marked() {
    let Some(kernel) = parts() else { return };
    let env = Env::new();
    let out = env
        .cmd(&["vm", "--kernel"])
        .arg(&kernel)
        .args(["--up", "--boots", "1", "--accel", "tcg", "--", "run"])
        .args(["syscall.null", "--quick", "--trial-time", "0.05"])
        .env("TMPDIR", env.path())
        .output()
        .expect("start kscale");
    assert_exit(&out, 0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("stored run 1"), "{err}");
    let e = env.export("latest");
    let sys = &e["system"];
    assert_eq!(sys["kernel"]["release"], RELEASE, "{sys}");
    assert!(
        sys["kernel"]["cmdline"]
            .as_str()
            .is_some_and(|c| c.contains("nosmp")),
        "{sys}"
    );
    assert_eq!(sys["cpu"]["online_count"], 1, "{sys}");
    assert_eq!(sys["vm"]["accel"], "TCG", "{sys}");
    assert_eq!(sys["vm"]["emulated"], true, "{sys}");
    assert_eq!(sys["vm"]["up"], true, "{sys}");
    assert_eq!(e["run"]["label"], format!("{RELEASE} up"));
    let primary = env.primary("latest");
    assert_eq!(primary.len(), 1, "{primary:?}");
    assert_eq!(primary[0]["status"], "done", "{:?}", primary[0]);
    assert!(primary[0]["mean"].as_f64().unwrap_or(0.0) > 0.0);
    let show = env.show("latest");
    assert!(
        show.contains("emulated (TCG): not the kernel's speed"),
        "{show}"
    );
    assert!(scratch(env.path()).is_empty(), "{:?}", scratch(env.path()));
}

/// Starts `kscale vm` marked, waits for its QEMU, and sends `sig` to kscale.
fn stop_while_booting(env: &Env, kernel: &Path, mark: &str, sig: Signal) -> std::process::Child {
    let kernel = kernel.to_string_lossy().into_owned();
    let mut c = std::process::Command::new(common::bin());
    c.current_dir(env.path())
        .env("KSCALE_TEST_MARK", mark)
        .env("TMPDIR", env.path())
        .arg("--db")
        .arg(env.db())
        .args(["vm", "--kernel", &kernel, "--accel", "tcg", "--boots", "3"])
        .args(["--", "run", "syscall.null", "--quick"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let child = c.spawn().expect("spawn kscale");
    let qemu = || {
        marked_processes(mark)
            .iter()
            .any(|p| common::comm(*p).starts_with("qemu"))
    };
    assert!(wait_for(qemu, 60), "QEMU never started");
    assert!(!scratch(env.path()).is_empty(), "no scratch directory");
    signal(&child, sig);
    child
}

#[test]
fn no_qemu_and_no_scratch_outlive_a_stopped_or_killed_kscale() {
    let Some(kernel) = parts() else { return };
    let env = Env::new();
    let mark = format!("vm-int-{}", std::process::id());
    let child = stop_while_booting(&env, &kernel, &mark, Signal::SIGINT);
    let out = child.wait_with_output().expect("wait");
    assert_exit(&out, 130);
    assert!(
        marked_processes(&mark).is_empty(),
        "{:?}",
        marked_processes(&mark)
    );
    assert!(scratch(env.path()).is_empty(), "{:?}", scratch(env.path()));

    let mark = format!("vm-kill-{}", std::process::id());
    let mut child = stop_while_booting(&env, &kernel, &mark, Signal::SIGKILL);
    let _ = child.wait();
    assert!(
        wait_for(|| marked_processes(&mark).is_empty(), 10),
        "left behind: {:?}",
        marked_processes(&mark)
            .iter()
            .map(|p| (*p, common::comm(*p)))
            .collect::<Vec<_>>()
    );
    assert!(
        wait_for(|| scratch(env.path()).is_empty(), 10),
        "{:?}",
        scratch(env.path())
    );
}

#[test]
fn bad_vm_input_is_one_line_and_status_2() {
    let env = Env::new();
    let no_image = env.path().join("no-such-bzImage");
    let no_image = no_image.to_str().expect("UTF-8");
    refused(
        &env,
        &["vm", "--kernel", no_image, "--", "run", "syscall.null"],
        "bad --kernel",
    );
    let text = env.path().join("notes.txt");
    std::fs::write(&text, "not a kernel").expect("write");
    let text = text.to_str().expect("UTF-8");
    refused(
        &env,
        &["vm", "--kernel", text, "--", "run", "syscall.null"],
        "not an x86 kernel image",
    );
    refused(
        &env,
        &["doctor", "--seconds", "1", "--kernel", text],
        "not an x86 kernel image",
    );

    let Some(kernel) = parts() else { return };
    let k = kernel.to_str().expect("UTF-8");
    for (args, needle) in [
        (&["--cpus", "0"][..], "bad --cpus `0`"),
        (&["--boots", "0"][..], "bad --boots 0"),
        (&["--memory", "1"][..], "bad --memory 1"),
    ] {
        let mut a = vec!["vm", "--kernel", k];
        a.extend(args);
        a.extend(["--", "run", "syscall.null"]);
        refused(&env, &a, needle);
    }
    refused(
        &env,
        &["vm", "--kernel", k, "--", "run", "nosuch.workload"],
        "nosuch",
    );
    let out = env
        .cmd(&["vm", "--kernel", k, "--", "run", "syscall.null"])
        .env("KSCALE_QEMU", env.path().join("no-qemu"))
        .output()
        .expect("run");
    common::assert_refused(&out, "KSCALE_QEMU", "a missing QEMU");
}
