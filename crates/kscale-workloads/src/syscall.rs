//! `syscall`: latency of simple functions (SPEC §4.1, seed 003, lmbench
//! `lat_syscall`/`lat_sig`/`lat_pipe`/`lat_unix`/`lat_proc`).

use crate::{timed, Family, TrialCtx, TrialOutput, WorkloadDef};
use anyhow::Result;
use kscale_core::MetricDef;
use std::time::Duration;

const LAT: MetricDef = MetricDef::lower("latency", "µs");
const LAT_METRICS: &[MetricDef] = &[LAT];

pub static FAMILY: Family = Family {
    name: "syscall",
    title: "Latency of simple functions",
    help:
        "Time per operation of simple system calls, signals, pipes and process creation (lmbench).",
    workloads: &[WorkloadDef {
        family: "syscall",
        name: "null",
        title: "Simple syscall",
        help: "getppid(), a system call that does no work (lmbench lat_syscall null).",
        params: &[],
        metrics: LAT_METRICS,
        geomean_over: None,
        timeout: Duration::from_secs(60),
        run: null,
    }],
};

fn null(ctx: &TrialCtx) -> Result<TrialOutput> {
    let (per_op, n) = ctx.time_per_op(|n| {
        timed(|| {
            for _ in 0..n {
                // SAFETY: getppid has no arguments and cannot fail. Called via
                // libc::syscall so no library cache can answer it.
                std::hint::black_box(unsafe { libc::syscall(libc::SYS_getppid) });
            }
            Ok(())
        })
    })?;
    Ok(TrialOutput::new(n).with(&LAT, per_op * 1e6))
}
