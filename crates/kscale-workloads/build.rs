//! Builds the tiny helper program that `syscall.fork_exec` executes. It is
//! compiled with the system C compiler (the one Rust already needs for
//! linking) rather than the `cc` crate, because one static executable needs
//! no more than one command line. Static linking keeps the dynamic loader out
//! of the measured path; if the C library has no static archive the helper is
//! linked dynamically and the build says so.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn compile(cc: &str, extra: &[&str], src: &Path, out: &Path) -> Result<(), String> {
    let output = Command::new(cc)
        .args(extra)
        .args(["-O2", "-s", "-o"])
        .arg(out)
        .arg(src)
        .output()
        .map_err(|e| format!("cannot run {cc}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).trim().to_string())
    }
}

fn main() {
    println!("cargo:rerun-if-changed=helpers/hello.c");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");

    let manifest =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let src = manifest.join("helpers/hello.c");
    let out = out_dir.join("hello");
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());

    let linkage = match compile(&cc, &["-static"], &src, &out) {
        Ok(()) => "static",
        Err(static_err) => match compile(&cc, &[], &src, &out) {
            Ok(()) => {
                println!(
                    "cargo:warning=syscall.fork_exec helper linked dynamically (static link failed: {static_err}); its figure includes the dynamic loader"
                );
                "dynamic"
            }
            Err(e) => {
                println!(
                    "cargo:warning=cannot build the syscall.fork_exec helper with {cc} ({e}); fork_exec and fork_sh will fail at run time"
                );
                std::fs::write(&out, b"").expect("write placeholder helper into OUT_DIR");
                "none"
            }
        },
    };
    println!("cargo:rustc-env=KSCALE_HELLO_LINKAGE={linkage}");

    // The same program linked dynamically, as lmbench's lat_proc execs
    // /tmp/hello: `helper=dynamic` adds the dynamic loader's work to the
    // figure the way the reference does.
    let dyn_out = out_dir.join("hello-dyn");
    if let Err(e) = compile(&cc, &[], &src, &dyn_out) {
        println!(
            "cargo:warning=cannot build the dynamically linked fork_exec helper with {cc} ({e}); helper=dynamic will fail at run time"
        );
        std::fs::write(&dyn_out, b"").expect("write placeholder helper into OUT_DIR");
    }
}
