//! The host's pace taken out of a case's runs before a gate compares them
//! (docs/verdicts.md, "The pace beside each trial").
//!
//! On a VM the host moves the guest between speeds in spells of seconds to
//! minutes, and a run of a few seconds sits in a few of them: the runs of
//! an unchanged `syscall.null` spread 3–5 % about their level, more than a
//! 10 % gate from one baseline run can stand. Every trial records the
//! pace its thread's core ran at, user-space chains timed just before and
//! just after it, whose time is the branch predictor's state as much as
//! the core's speed (`kscale_workloads::machine_probe`). Over a run's
//! trials that pace follows the spells the run met (r = 0.98 against
//! `getppid` over 2-second bins on the AMD EPYC VM), and it runs no
//! kernel code, so a slower kernel path or more work in a measured loop
//! leaves it where it was. Each run's value is moved along the pace by a
//! gain — the case per chain, 1, until enough runs fit their own —
//! fitted within groups of runs that cannot hold the change being judged,
//! so the change never teaches the fit.

/// Below this many runs with a pace the gain is not fitted: a unit gain
/// (the case per loop) is taken, which removes the part of a spell both
/// share.
pub const MIN_FIT_RUNS: usize = 8;

/// The fitted gain's range: twice the unit gain `getppid` follows the
/// chains at (0.98–1.17, [`crate::verdict::PACE_SPELL_GAIN`]). A negative
/// gain would let a faster machine hide a regression.
pub const MAX_GAIN: f64 = 2.0;

/// The steepest a case may follow its pace in a host spell, where the
/// runs cannot bound it tighter.
const SPELL_GAIN: f64 = crate::verdict::PACE_SPELL_GAIN;

use crate::verdict::Follow;

/// The gain a gate moves its runs' values by: `worse_ln − gain × ln pace`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Gain {
    pub gain: f64,
    /// Fitted from the runs (else the unit gain).
    pub fitted: bool,
    /// The runs it was read from.
    pub runs: usize,
    /// What a gate may still lay at the machine's door beside this gain
    /// ([`crate::verdict::beside_machine`]): the successive pairs' slope
    /// beyond it (0 where the bounds did not cut it), give or take the
    /// slope's standard error; unfitted, up to [`SPELL_GAIN`] less the
    /// unit gain.
    pub follow: Follow,
}

/// The slope of runs' `(worse_ln, ln pace, group)`, in the order they
/// were measured, over successive pairs of one group: each pair's change
/// of value against its change of pace, least squares through the origin.
/// Like the spread between successive runs, a level step — a build, the
/// side now, a setting turned on for some runs of one build — enters as
/// one pair of many, not as a slope of its own (among enough pairs it is
/// told as a step and left out, [`crate::verdict::without_steps`]); and a
/// slow drift that moves the value but not the pace cancels between
/// neighbours. Bounded
/// to `[0, MAX_GAIN]`; the unit gain below [`MIN_FIT_RUNS`] runs or where
/// the pace did not move.
pub fn gain<G: PartialEq>(runs: &[(f64, f64, G)]) -> Gain {
    let unit = Gain {
        gain: 1.0,
        fitted: false,
        runs: runs.len(),
        follow: Follow::at_most(SPELL_GAIN - 1.0),
    };
    let ok: Vec<&(f64, f64, G)> = runs
        .iter()
        .filter(|r| r.0.is_finite() && r.1.is_finite())
        .collect();
    if ok.len() < MIN_FIT_RUNS {
        return unit;
    }
    let mut pairs: Vec<(f64, f64)> = ok
        .windows(2)
        .filter(|w| w[0].2 == w[1].2)
        .map(|w| (w[1].1 - w[0].1, w[1].0 - w[0].0))
        .collect();
    // A step of the value (a setting turned on) is not the pace's doing.
    crate::verdict::without_steps(&mut pairs, |(_, dy)| *dy);
    let sxx: f64 = pairs.iter().map(|(dx, _)| dx * dx).sum();
    // A pace that did not move has no slope to read.
    if sxx < 1e-8 || pairs.len() < 2 {
        return unit;
    }
    let slope = pairs.iter().map(|(dx, dy)| dx * dy).sum::<f64>() / sxx;
    let rss: f64 = pairs.iter().map(|(dx, dy)| (dy - slope * dx).powi(2)).sum();
    let gain = slope.clamp(0.0, MAX_GAIN);
    Gain {
        gain,
        fitted: true,
        runs: ok.len(),
        follow: Follow {
            gain: (slope - gain).max(0.0),
            se: (rss / (pairs.len() - 1) as f64 / sxx).sqrt(),
        },
    }
}

/// A run's value with the pace taken out.
pub fn adjusted(worse_ln: f64, pace_ln: f64, g: Gain) -> f64 {
    worse_ln - g.gain * pace_ln
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs whose value followed the pace at 1.5× are fitted at 1.5, and
    /// a level step between the groups (the change being judged, or a
    /// new build) does not enter the slope; within one group it is one
    /// pair of many.
    #[test]
    fn the_gain_is_the_slope_within_groups() {
        let mut runs = Vec::new();
        for i in 0..24 {
            let x = ((i * 7) % 5) as f64 * 0.01;
            let step = if i >= 12 { 0.3 } else { 0.0 };
            runs.push((1.5 * x + step, x, i >= 12));
        }
        let g = gain(&runs);
        assert!(g.fitted);
        assert!((g.gain - 1.5).abs() < 1e-9, "{g:?}");
        // In one group, a step that came with a move of the pace is one
        // pair of 23: the gain stays near 1.5.
        let pooled: Vec<_> = runs
            .iter()
            .map(|r| {
                (
                    r.0 - if r.2 { 0.2 } else { 0.0 },
                    r.1 + if r.2 { 0.01 } else { 0.0 },
                    (),
                )
            })
            .collect();
        let g = gain(&pooled).gain;
        assert!(g > 1.5 && g < 1.9, "{g}");
    }

    #[test]
    fn few_runs_or_a_still_pace_take_the_unit_gain() {
        let few: Vec<_> = (0..5).map(|i| (i as f64, i as f64, ())).collect();
        assert_eq!(gain(&few).gain, 1.0);
        assert!(!gain(&few).fitted);
        let still: Vec<_> = (0..10).map(|i| (i as f64 * 0.01, 0.5, ())).collect();
        assert!(!gain(&still).fitted);
    }

    /// What the gain leaves is the slope beyond it, with the slope's
    /// error: nothing where the runs followed the pace exactly at a gain
    /// within the bounds, an error where they scatter about it, the part
    /// the bound cut where the slope is steeper, and unfitted the spell's
    /// bound less the unit gain.
    #[test]
    fn the_gain_leaves_the_slope_beyond_it_and_its_error() {
        let pace = |i: i32| ((i * 7) % 5) as f64 * 0.01;
        let exact: Vec<_> = (0..12).map(|i| (1.5 * pace(i), pace(i), ())).collect();
        let g = gain(&exact);
        assert!(g.follow.gain.abs() < 1e-9 && g.follow.se < 1e-9, "{g:?}");
        let scattered: Vec<_> = (0..12)
            .map(|i| (1.5 * pace(i) + 0.01 * f64::from(i % 2), pace(i), ()))
            .collect();
        let s = gain(&scattered);
        assert!(s.follow.se > 0.05, "{s:?}");
        let steep: Vec<_> = (0..10).map(|i| (4.0 * pace(i), pace(i), ())).collect();
        let st = gain(&steep);
        assert_eq!(st.gain, MAX_GAIN);
        assert!((st.follow.gain - 2.0).abs() < 1e-9, "{st:?}");
        let few: Vec<_> = (0..5).map(|i| (i as f64, i as f64, ())).collect();
        assert_eq!(gain(&few).follow.gain, SPELL_GAIN - 1.0);
    }

    #[test]
    fn the_gain_is_bounded() {
        let steep: Vec<_> = (0..10)
            .map(|i| (i as f64 * 0.1, i as f64 * 0.01, ()))
            .collect();
        assert_eq!(gain(&steep).gain, MAX_GAIN);
        let against: Vec<_> = (0..10)
            .map(|i| (-(i as f64) * 0.01, i as f64 * 0.01, ()))
            .collect();
        assert_eq!(gain(&against).gain, 0.0);
    }
}
