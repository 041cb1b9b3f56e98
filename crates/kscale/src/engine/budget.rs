//! The run's budget, the one spender: how long a budgeted run has left,
//! what share each kind of spending may take of it, and where its seconds
//! went (docs/budget.md, "One spender"). [`kscale_core::budget`] decides
//! which case gets the next trial; this module holds the clock every
//! consumer reads the time left from — cases, capacity steps, control
//! readings, profiles and tune's arms — and the ledger each of them draws
//! on, so that a run can say where its budget went.

use std::sync::Mutex;
use std::time::Instant;

/// The most of a run's budget its capacity searches take when the run
/// measures other cases too, split evenly over the searches: 75 s of
/// `study --quick`'s five minutes, 37.5 s per CPU configuration. An answer
/// is its family's cell only within a bracket of 10 %; at 30 s a quick
/// study's searches spent their ~10 windows on the doubling from 800
/// past the capacity and the answer's confirmation and ended at brackets
/// of 11–100 %. A run of searches alone (`run --capacity --budget`) gives
/// them all of it.
pub const CAPACITY_SHARE: f64 = 0.25;

/// The most of a run's budget its profiled trials may take: the runner
/// shortens them to fit, and the gauge's plan keeps it aside.
pub const PROFILE_SHARE: f64 = 0.20;

/// The share of what the open cases' needs leave of the budget that
/// taking cases back may spend: a held case is priced by the trials of
/// the cases like it, not by its own, and the kept cases' needs are
/// themselves read from a few trials; the rest absorbs what that misses.
pub const TAKE_BACK_SHARE: f64 = 0.75;

/// Who spends a budget's seconds: every consumer draws on the one ledger
/// under its own name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spender {
    /// The cases' warm-ups and counted trials.
    Cases,
    /// A capacity search's windows.
    CapacitySteps,
    /// The gauge's readings of the machine, before and between trials.
    ControlReadings,
    /// The profiled trials.
    Profiles,
    /// Tune's arms, interleaved round by round.
    TuneArms,
}

impl Spender {
    /// Every spender, in the order the ledger names them.
    pub const ALL: [Spender; 5] = [
        Spender::Cases,
        Spender::CapacitySteps,
        Spender::ControlReadings,
        Spender::Profiles,
        Spender::TuneArms,
    ];

    /// Its name in the ledger's line.
    pub fn name(self) -> &'static str {
        match self {
            Spender::Cases => "cases",
            Spender::CapacitySteps => "capacity steps",
            Spender::ControlReadings => "control readings",
            Spender::Profiles => "profiles",
            Spender::TuneArms => "tune's arms",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// A budget as the command that asked for it started it: its seconds, its
/// clock, and what it keeps for the command's own work after the run.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    total_s: f64,
    started: Instant,
    /// Seconds kept for what the command does after the run.
    tail_s: f64,
    /// The ledger when it started: what it says is what was drawn since.
    drawn_before: [f64; 5],
}

impl Budget {
    /// `total_s` seconds from now, `tail_s` of them kept for after the run.
    pub fn start(total_s: f64, tail_s: f64) -> Budget {
        Budget::since(Instant::now(), total_s, tail_s)
    }

    /// `total_s` seconds from `started`.
    pub fn since(started: Instant, total_s: f64, tail_s: f64) -> Budget {
        Budget {
            total_s,
            started,
            tail_s,
            drawn_before: drawn(),
        }
    }

    /// When its clock started.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// The time left now, less what is kept for after the run: the one
    /// place it is computed.
    pub fn left_s(&self) -> f64 {
        self.ends_in_s() - self.tail_s
    }

    /// Seconds until the budget ends, what it keeps for after the run
    /// included: when the command that asked for it will have finished.
    pub fn ends_in_s(&self) -> f64 {
        self.total_s - self.started.elapsed().as_secs_f64()
    }

    /// True once nothing is left.
    pub fn spent(&self) -> bool {
        self.left_s() <= 0.0
    }

    /// Seconds each spender drew since it started, by [`Spender::ALL`]'s
    /// order.
    pub fn drawn(&self) -> [f64; 5] {
        let now = drawn();
        std::array::from_fn(|k| (now[k] - self.drawn_before[k]).max(0.0))
    }
}

/// The share of a run's budget its cases are planned with: what the
/// profiles (their share, `RunOptions::profile_share`) and the capacity searches
/// (`searched`) leave.
pub fn cases_share(profiles: f64, searched: bool) -> f64 {
    1.0 - profiles - if searched { CAPACITY_SHARE } else { 0.0 }
}

/// Seconds drawn by each spender in this process: one run (or one tune)
/// a process.
static LEDGER: Mutex<[f64; 5]> = Mutex::new([0.0; 5]);

/// Records that `spender` spent `secs` of the run's time.
pub fn draw(spender: Spender, secs: f64) {
    if !(secs.is_finite() && secs > 0.0) {
        return;
    }
    if let Ok(mut l) = LEDGER.lock() {
        l[spender.index()] += secs;
    }
}

/// Seconds each spender has drawn so far, by [`Spender::ALL`]'s order.
pub fn drawn() -> [f64; 5] {
    LEDGER.lock().map(|l| *l).unwrap_or([0.0; 5])
}

/// Where `budget`'s seconds went (`drawn`: [`Budget::drawn`]), one line: each spender that drew, then
/// what the rest of the time went to (worker processes, the store, the
/// command's setup), e.g. "the 60 s budget went to: cases 41.2 s,
/// capacity steps 9.0 s, control readings 1.1 s, profiles 4.2 s; the rest
/// 3.5 s (workers, the store, setup); 1.0 s unspent".
pub fn ledger_line(budget: &Budget, drawn: &[f64; 5]) -> String {
    let elapsed = budget.started.elapsed().as_secs_f64();
    let parts: Vec<String> = Spender::ALL
        .iter()
        .zip(drawn)
        .filter(|(_, s)| **s > 0.0)
        .map(|(p, s)| format!("{} {:.1} s", p.name(), s))
        .collect();
    let spent: f64 = drawn.iter().sum();
    let rest = (elapsed - spent).max(0.0);
    let after = budget.total_s - elapsed;
    let end = if after >= 0.0 {
        format!("{after:.1} s unspent")
    } else {
        format!("{:.1} s over", -after)
    };
    format!(
        "the {} budget went to: {}; the rest {rest:.1} s (workers, the store, setup); {end}",
        crate::engine::progress::duration(budget.total_s),
        if parts.is_empty() {
            "nothing measured".to_string()
        } else {
            parts.join(", ")
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_time_left_counts_the_clock_and_the_tail() {
        let started = Instant::now() - Duration::from_secs(10);
        let b = Budget::since(started, 60.0, 5.0);
        let left = b.left_s();
        assert!((44.0..=45.0).contains(&left), "{left}");
        assert!(!b.spent());
        assert!(Budget::since(started, 8.0, 0.0).spent());
    }

    #[test]
    fn the_cases_share_is_what_searches_and_profiles_leave() {
        assert_eq!(cases_share(0.0, false), 1.0);
        assert!(
            (cases_share(PROFILE_SHARE, true) - (1.0 - PROFILE_SHARE - CAPACITY_SHARE)).abs()
                < 1e-12
        );
    }

    #[test]
    fn every_spender_draws_on_the_one_ledger() {
        let before = drawn();
        for (k, s) in Spender::ALL.iter().enumerate() {
            draw(*s, 1.0 + k as f64);
        }
        draw(Spender::Cases, f64::NAN);
        draw(Spender::Cases, -1.0);
        let after = drawn();
        for k in 0..5 {
            // Other tests of this process may draw too.
            assert!(after[k] - before[k] >= 1.0 + k as f64 - 1e-9, "{k}");
        }
        let b = Budget::since(Instant::now() - Duration::from_secs(30), 60.0, 0.0);
        let line = ledger_line(&b, &[10.0, 5.0, 1.0, 2.0, 0.0]);
        assert!(line.starts_with("the 60 s budget went to: cases 10.0 s, capacity steps 5.0 s, control readings 1.0 s, profiles 2.0 s; the rest 12."), "{line}");
        assert!(!line.contains("tune's arms"), "{line}");
        assert!(line.ends_with("s unspent"), "{line}");
    }
}
