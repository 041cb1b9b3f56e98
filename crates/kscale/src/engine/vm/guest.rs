//! The wire between the host and the guest's init: what the guest is to
//! run (a file in the initramfs), and what it sends back on its second
//! serial port, one line each: every run's export, then the guest
//! command's exit status. A guest that stops midway sends no `END`, and
//! the host says so rather than storing half a boot.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::Write;
use std::path::Path;

/// Where the initramfs holds the [`Config`].
pub const CONFIG_PATH: &str = "/kscale-vm.json";
/// The guest's port for results; QEMU writes it to a host file.
pub const RESULTS_PORT: &str = "/dev/ttyS1";
/// The first line init prints on the console: the kernel reached it.
pub const INIT_MARK: &str = "kscale-vm: init";

/// On the guest kernel's command line: the run takes no gauge. Under
/// emulation the gauge reads QEMU's translator, not a machine, and its
/// readings took 40 s of a quick run's minute here; the host does not
/// store a guest's gauge anyway.
pub const NO_GAUGE: &str = "kscale.gauge=off";

/// What the guest's kscale is to do.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Config {
    /// `run …` or `study …`, without `--db`.
    pub argv: Vec<String>,
    /// The host's name: runs measured in its VMs are this host's.
    pub hostname: String,
    /// Power off as soon as init runs: `doctor`'s boot, which asks only
    /// whether the kernel reaches init.
    #[serde(default)]
    pub probe: bool,
}

impl Config {
    pub fn new(argv: &[String]) -> Config {
        let hostname = nix::unistd::gethostname()
            .ok()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_else(|| "kscale-vm".into());
        Config {
            argv: argv.to_vec(),
            hostname,
            probe: false,
        }
    }
}

const BEGIN: &str = "KSCALE-VM BEGIN";

/// The guest's side: each run's export on a line, then `END status`.
pub fn write_results(out: &mut dyn Write, runs: &[Value], status: i32) -> std::io::Result<()> {
    writeln!(out, "\n{BEGIN}")?;
    for r in runs {
        let line = serde_json::to_string(r).map_err(std::io::Error::other)?;
        writeln!(out, "RUN {line}")?;
    }
    writeln!(out, "END {status}")?;
    out.flush()
}

/// The guest's side when it cannot run or export: the reason, in one line.
pub fn write_error(out: &mut dyn Write, why: &str) -> std::io::Result<()> {
    writeln!(out, "\n{BEGIN}")?;
    writeln!(out, "ERROR {}", why.replace('\n', " "))?;
    out.flush()
}

/// The host's side: the runs and the guest command's exit status.
pub fn read_results(path: &Path) -> Result<(Vec<Value>, i32)> {
    let text = match std::fs::read(path) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) => bail!(
            "the guest's results ({}) cannot be read: {e}",
            path.display()
        ),
    };
    parse_results(&text)
}

pub fn parse_results(text: &str) -> Result<(Vec<Value>, i32)> {
    let Some(at) = text.rfind(BEGIN) else {
        bail!("the guest sent no results (its serial port stayed empty)");
    };
    let mut runs = Vec::new();
    for line in text[at + BEGIN.len()..].lines() {
        let line = line.trim_end_matches('\r');
        if let Some(json) = line.strip_prefix("RUN ") {
            match serde_json::from_str(json) {
                Ok(v) => runs.push(v),
                Err(e) => bail!("the guest sent a run that is not JSON ({e}): the line was cut"),
            }
        } else if let Some(s) = line.strip_prefix("END ") {
            let status = s.trim().parse().unwrap_or(1);
            return Ok((runs, status));
        } else if let Some(why) = line.strip_prefix("ERROR ") {
            bail!("in the guest: {why}");
        }
    }
    bail!(
        "the guest stopped before it had sent its results ({} run(s) arrived)",
        runs.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_round_trip_after_boot_noise() {
        let mut b = b"stray console bytes".to_vec();
        let runs = [
            serde_json::json!({"run": {"label": "µs ☃"}}),
            serde_json::json!({"x": [1, 2]}),
        ];
        write_results(&mut b, &runs, 1).unwrap();
        let (got, status) = parse_results(&String::from_utf8(b).unwrap()).unwrap();
        assert_eq!(got, runs);
        assert_eq!(status, 1);
    }

    #[test]
    fn a_cut_or_failed_guest_is_said() {
        let mut b = Vec::new();
        write_results(&mut b, &[serde_json::json!({})], 0).unwrap();
        let cut = String::from_utf8(b).unwrap().replace("END 0\n", "");
        assert!(parse_results(&cut)
            .unwrap_err()
            .to_string()
            .contains("stopped before"));
        let mut e = Vec::new();
        write_error(&mut e, "no\nstore").unwrap();
        let err = parse_results(&String::from_utf8(e).unwrap())
            .unwrap_err()
            .to_string();
        assert_eq!(err, "in the guest: no store");
        assert!(parse_results("")
            .unwrap_err()
            .to_string()
            .contains("no results"));
    }
}
