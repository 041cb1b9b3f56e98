//! `kscale cpus` on machines we do not have: `KSCALE_SYSFS` pointing at the
//! fixture trees of kscale-sys.

mod common;

use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../kscale-sys/tests/fixtures/sysfs")
        .join(name)
}

fn json(sysfs: &str, args: &[&str]) -> serde_json::Value {
    let out = common::kscale()
        .env("KSCALE_SYSFS", fixture(sysfs))
        .arg("cpus")
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    common::assert_exit(&out, 0);
    serde_json::from_slice(&out.stdout).unwrap()
}

fn list(v: &serde_json::Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

/// The two-socket Xeon numbers its sockets alternately: 1, 2, 4 and 8 CPUs
/// are distinct cores of node 0 (every even CPU), not CPUs 0-7.
#[test]
fn two_socket_counts_are_cores_of_one_node() {
    let v = json("xeon-2s-smt2", &["--cpus", "1,2,4,8"]);
    let configs = v["configurations"].as_array().unwrap();
    assert_eq!(configs.len(), 4);
    for (c, n) in configs.iter().zip([1u64, 2, 4, 8]) {
        let cpus = list(&c["cpus"]);
        assert_eq!(cpus.len() as u64, n, "{c}");
        assert!(cpus.iter().all(|k| k % 2 == 0 && *k < 24), "{c}");
        assert_eq!(c["cores"], n, "{c}");
        assert_eq!(c["threads_per_core_used"], 1, "{c}");
        assert_eq!(c["llcs"], 1, "{c}");
        assert_eq!(c["nodes"], serde_json::json!([0]), "{c}");
        assert_eq!(
            c["name"],
            format!(
                "{n} ({n} core{}, 1 LLC, node 0)",
                if n == 1 { "" } else { "s" }
            )
        );
        // The load stays on node 0, off the server's cores and siblings.
        let load = list(&c["load_cpus"]);
        assert!(!load.is_empty());
        let sibling = |k: u64| if k >= 24 { k - 24 } else { k + 24 };
        assert!(
            load.iter()
                .all(|&k| k % 2 == 0 && !cpus.contains(&k) && !cpus.contains(&sibling(k))),
            "{c}"
        );
    }
}

/// `sweep` stops at one LLC (= one node here), all cores and all threads.
#[test]
fn sweep_stops_at_the_boundaries() {
    let v = json("xeon-2s-smt2", &[]);
    let names: Vec<String> = v["configurations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "1 (1 core, 1 LLC, node 0)",
            "2 (2 cores, 1 LLC, node 0)",
            "4 (4 cores, 1 LLC, node 0)",
            "8 (8 cores, 1 LLC, node 0)",
            "12 (12 cores, 1 LLC, node 0)",
            "16 (16 cores, 2 LLCs, nodes 0-1)",
            "24 (24 cores, 2 LLCs, nodes 0-1)",
            "32 (24 cores (8 × 2 SMT), 2 LLCs, nodes 0-1)",
            "all (24 cores × 2 SMT, 2 LLCs, nodes 0-1)",
        ]
    );
}

/// On the cloud VM, two CPUs are two cores under compact, one core's two
/// siblings under smt; the text form shows the same plan.
#[test]
fn cloud_vm_two_cpus_are_two_cores() {
    let v = json("vm-4vcpu-smt", &["--cpus", "2"]);
    assert_eq!(list(&v["configurations"][0]["cpus"]), [0, 2]);
    let v = json("vm-4vcpu-smt", &["--cpus", "2", "--cpu-order", "smt"]);
    assert_eq!(list(&v["configurations"][0]["cpus"]), [0, 1]);
    let out = common::kscale()
        .env("KSCALE_SYSFS", fixture("vm-4vcpu-smt"))
        .args(["cpus", "--cpus", "2"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("2 (2 cores, 1 LLC, node 0)  0,2"), "{text}");
    assert!(
        text.contains("1,3 (shares cores with the measured CPUs"),
        "{text}"
    );
}

#[test]
fn bad_input_is_one_line() {
    let out = common::kscale()
        .env("KSCALE_SYSFS", "/nonexistent-sysfs")
        .arg("cpus")
        .output()
        .unwrap();
    common::assert_refused(&out, "KSCALE_SYSFS=/nonexistent-sysfs", "a missing tree");
    let out = common::kscale()
        .env("KSCALE_SYSFS", fixture("vm-4vcpu-smt"))
        .args(["cpus", "--cpus", "8"])
        .output()
        .unwrap();
    common::assert_refused(&out, "exceeds the 4 CPUs", "too many CPUs");
}

/// `text`, what `cpus` called its terminal format before every command
/// took the one `--format`, still names it: old scripts keep working.
#[test]
fn text_still_names_the_terminal_format() {
    let cpus = |args: &[&str]| {
        common::kscale()
            .env("KSCALE_SYSFS", fixture("vm-4vcpu-smt"))
            .arg("cpus")
            .args(args)
            .output()
            .unwrap()
    };
    let (plain, text) = (cpus(&[]), cpus(&["--format", "text"]));
    assert!(
        text.status.success(),
        "{}",
        String::from_utf8_lossy(&text.stderr)
    );
    assert_eq!(plain.stdout, text.stdout);
}
