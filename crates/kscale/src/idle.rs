//! `--cpu-idle`: whether idle CPUs poll while a run lasts (docs/host.md,
//! "Idle CPUs"). The parent holds the request; workers never see it.

use crate::error::user;
use anyhow::Result;
use kscale_sys::idle::{self, PollHold};
use serde::{Deserialize, Serialize};

/// How idle CPUs wait during a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum CpuIdle {
    /// Poll in a virtual machine, where waking a halted vCPU is the host's
    /// decision; leave idle states as they are on bare metal, where waking
    /// from one is part of the system measured.
    Auto,
    /// Idle CPUs poll (root): a 0 µs CPU latency request is held for the run.
    Poll,
    /// Leave idle states as the system has them. Runs stored before
    /// `--cpu-idle` existed were measured so.
    #[default]
    AsIs,
}

/// What a run did about idle CPUs: the request, if held, and one line for
/// the run's snapshot and its first lines of output.
pub struct IdleHold {
    _hold: Option<PollHold>,
    /// `poll` or `as-is`: what the run's CPUs did.
    state: &'static str,
    pub why: String,
}

/// Takes the hold `mode` asks for. An explicit `poll` that cannot be held is
/// the user's error; `auto` then runs as-is and says why.
pub fn hold(mode: CpuIdle) -> Result<IdleHold> {
    let vm = idle::virtual_machine();
    let as_is = |why: String| IdleHold {
        _hold: None,
        state: "as-is",
        why,
    };
    let wanted = match mode {
        CpuIdle::AsIs => return Ok(as_is("idle CPUs as they are (--cpu-idle as-is)".into())),
        CpuIdle::Auto if !vm => {
            return Ok(as_is(
                "idle CPUs as they are (bare metal: waking from an idle state is part of \
                 what is measured)"
                    .into(),
            ))
        }
        CpuIdle::Auto => "in a virtual machine, where waking a halted vCPU is the host's decision",
        CpuIdle::Poll => "--cpu-idle poll",
    };
    match idle::hold_poll() {
        Ok(h) => Ok(IdleHold {
            _hold: Some(h),
            state: "poll",
            why: format!(
                "idle CPUs poll: kscale holds a 0 µs CPU latency request ({}) for the run ({wanted})",
                idle::PM_QOS
            ),
        }),
        Err(e) if mode == CpuIdle::Poll => Err(user(format!(
            "--cpu-idle poll: cannot hold a CPU latency request on {} ({e}); it needs root, \
             or use --cpu-idle as-is",
            idle::PM_QOS
        ))),
        Err(e) => Ok(as_is(format!(
            "idle CPUs as they are: cannot hold a CPU latency request on {} ({e}), so cases \
             across CPUs include the host's wake-up of halted vCPUs (docs/method.md)",
            idle::PM_QOS
        ))),
    }
}

/// Takes the hold for a new run and records it in the run's snapshot: every
/// path that creates a run (`run`, `study`, `check`, each `tune` step) goes
/// through here. The caller says `why` once the run exists, so that a
/// refusal after this (a peer, the store) is still one line.
pub fn hold_for_run(mode: CpuIdle, snapshot: &mut serde_json::Value) -> Result<IdleHold> {
    let h = hold(mode)?;
    snapshot["cpu_idle"] = h.snapshot();
    Ok(h)
}

impl IdleHold {
    /// The snapshot's `cpu_idle` entry: the machine's idle states and what
    /// kscale did about them.
    fn snapshot(&self) -> serde_json::Value {
        let mut v = idle::snapshot();
        v["kscale"] = self.state.into();
        v["why"] = self.why.clone().into();
        v
    }
}
