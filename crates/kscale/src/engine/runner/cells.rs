//! Undecided cells first (docs/budget.md): a family whose cases have all
//! converged can still leave its scalability undecided. Each case met the
//! rule's width, but the ratio of two such cases carries both their errors,
//! and a ratio near the ±margin needs a narrower interval than either case
//! asked for. Such a family's cases are given the trials its verdict needs
//! ([`kscale_core::verdict::scaling_trials_factor`]) before the budget goes
//! to the sweeps' held cases: a decided cell answers a question, and another
//! point of a sweep does not.

use kscale_core::decision::{Interval, LogEstimate};
use kscale_core::model::Direction;
use kscale_core::stats::StopRule;
use kscale_core::verdict::scaling_trials_factor;
use std::collections::BTreeMap;

/// How far beyond its estimate a family is funded: the estimate of the
/// spread from a few trials is low as often as high, and a family funded
/// one trial short is a cell still undecided.
const MARGIN: f64 = 1.25;
/// Times one family is funded in a run: its interval is read again after
/// each funding, and one that still cannot tell twice sits on its margin.
pub(super) const MAX_FUNDINGS: u32 = 2;

/// One family's undecided scalability and what deciding it takes: each
/// case's trials up to `floor`, at `cost_s`.
pub(super) struct Funding {
    pub(super) family: String,
    pub(super) interval: Interval,
    /// The cases to grow (both configurations of each pair), with the
    /// counted trials each must reach.
    pub(super) floors: Vec<(usize, usize)>,
    /// The trials those floors add, and what they cost.
    pub(super) more_trials: usize,
    pub(super) cost_s: f64,
}

impl Funding {
    /// The line a run prints when it funds the family.
    pub(super) fn line(&self, rule: &StopRule) -> String {
        format!(
            "{}: its scalability {:.3}× [{:.3}, {:.3}] cannot tell at ±{} %: {} more trials on its {} cases (~{:.1} s) to decide it, before the sweeps' held cases",
            self.family,
            self.interval.value,
            self.interval.low,
            self.interval.high,
            rule.width_pct / 2.0,
            self.more_trials,
            self.floors.len(),
            self.cost_s
        )
    }
}

/// A case as [`undecided`] reads it.
pub(super) struct Case<'a> {
    pub(super) family: &'a str,
    /// Its primary metric's name: a family of unlike metrics (`fs`:
    /// creations and removals) is decided per metric, as the decisions
    /// table decides it.
    pub(super) metric: &'a str,
    pub(super) workload: &'a str,
    pub(super) params: &'a BTreeMap<String, String>,
    /// CPUs in its configuration.
    pub(super) cpus: usize,
    pub(super) counted: &'a [f64],
    /// What it is judged on: its counted trials with what followed the
    /// host taken out where the fit narrows them (`Unit::judged`), as the
    /// table's interval is.
    pub(super) judged: &'a [f64],
    pub(super) direction: Direction,
    /// Measured by the converging rule (not a capacity step nor a
    /// median-of-N case).
    pub(super) converging: bool,
    /// Past its pilot: finished, or with the trials that judge it.
    pub(super) piloted: bool,
    /// Still short of the floor an earlier funding gave it: its family
    /// is read again once the trials it was given are in.
    pub(super) growing: bool,
    /// Ended without converging: the budget stopped it as one it cannot
    /// converge, so its interval is not one trials narrow, and given a
    /// floor it would be stopped again before its first.
    pub(super) stopped: bool,
    /// Not left out of the run.
    pub(super) in_run: bool,
    pub(super) secs_per_trial: f64,
}

/// The families whose scalability (most CPUs ÷ fewest) is undecided from
/// their cases' estimates, as the decisions table reads it, with every case of them past its pilot and
/// measured by the converging rule, and the trials that would decide each:
/// a family is read while its cases still converge (or its sweep's held
/// cases, taken back, wait behind them) as well as after.
/// A family funded `funded(family)` times already, or whose need is beyond
/// the rule's maximum trials, is not named; what the run can pay for is
/// its caller's to weigh. No cap on the factor itself: a quick study's
/// `chat`, 1.04× within ±3.5 % a point from its +5 % margin, needs about
/// twelve times its trials, which the 300 s do not hold but a longer
/// budget does, and a cell comes before a sweep's point.
pub(super) fn undecided(
    cases: &[Case<'_>],
    rule: &StopRule,
    funded: impl Fn(&str) -> u32,
) -> Vec<Funding> {
    let mut groups: Vec<(&str, &str)> = Vec::new();
    for c in cases {
        if !groups.contains(&(c.family, c.metric)) {
            groups.push((c.family, c.metric));
        }
    }
    let mut out = Vec::new();
    for &(family, metric) in &groups {
        let label = if groups.iter().filter(|g| g.0 == family).count() > 1 {
            format!("{family}: {metric}")
        } else {
            family.to_string()
        };
        if funded(&label) >= MAX_FUNDINGS {
            continue;
        }
        let members: Vec<usize> = (0..cases.len())
            .filter(|&i| cases[i].family == family && cases[i].metric == metric && cases[i].in_run)
            .collect();
        // A family with a capacity search or a median-of-N case is
        // decided by those; one with a case in its pilot, or growing to
        // its floor, is read after it; one with a case stopped unconverged
        // waits on that case, not on trials.
        if members.iter().any(|&i| {
            let c = &cases[i];
            !c.converging || !c.piloted || c.growing || c.stopped
        }) {
            continue;
        }
        let (Some(fewest), Some(most)) = (
            members.iter().map(|&i| cases[i].cpus).min(),
            members.iter().map(|&i| cases[i].cpus).max(),
        ) else {
            continue;
        };
        if fewest == most {
            continue;
        }
        let pairs: Vec<(usize, usize)> = members
            .iter()
            .filter(|&&b| cases[b].cpus == fewest)
            .filter_map(|&b| {
                members
                    .iter()
                    .find(|&&o| {
                        cases[o].cpus == most
                            && cases[o].workload == cases[b].workload
                            && cases[o].params == cases[b].params
                    })
                    .map(|&o| (b, o))
            })
            .collect();
        let log = |c: &Case<'_>| {
            let value = rule.estimator.estimate(c.counted)?.center;
            LogEstimate::of_value(value, rule.estimator.estimate(c.judged)?)
        };
        let logs: Option<Vec<LogEstimate>> = pairs
            .iter()
            .map(|&(b, o)| {
                Some(LogEstimate::speedup(
                    log(&cases[b])?,
                    log(&cases[o])?,
                    cases[b].direction,
                ))
            })
            .collect();
        let Some(interval) = logs.and_then(|l| Interval::combine(&l, rule.confidence_pct)) else {
            continue;
        };
        let Some(factor) = scaling_trials_factor(&interval, rule.width_pct, rule.confidence_pct)
        else {
            continue;
        };
        if factor <= 1.0 {
            continue;
        }
        let mut floors = Vec::new();
        let (mut cost_s, mut more_trials) = (0.0, 0);
        for &(b, o) in &pairs {
            for i in [b, o] {
                let floor = (cases[i].counted.len() as f64 * factor * MARGIN).ceil() as usize;
                let more = floor.saturating_sub(cases[i].counted.len());
                cost_s += more as f64 * cases[i].secs_per_trial;
                more_trials += more;
                floors.push((i, floor));
            }
        }
        if floors.iter().any(|&(_, f)| f > rule.max_trials) {
            continue;
        }
        out.push(Funding {
            family: label,
            interval,
            floors,
            more_trials,
            cost_s,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: StopRule = StopRule {
        width_pct: 10.0,
        ..StopRule::QUICK
    };

    /// `n` trials around `level`, ±`spread` % in a fixed pattern.
    fn trials(level: f64, spread: f64, n: usize) -> Vec<f64> {
        let pattern = [1.0, -1.0, 0.5, -0.5, 0.0, 1.0, -1.0];
        (0..n)
            .map(|k| level * (1.0 + spread / 100.0 * pattern[k % pattern.len()]))
            .collect()
    }

    fn case<'a>(cpus: usize, counted: &'a [f64], params: &'a BTreeMap<String, String>) -> Case<'a> {
        Case {
            family: "mem",
            metric: "mbps",
            workload: "mem.frd",
            params,
            cpus,
            counted,
            judged: counted,
            direction: Direction::Higher,
            converging: true,
            piloted: true,
            growing: false,
            stopped: false,
            in_run: true,
            secs_per_trial: 0.25,
        }
    }

    /// Two converged cases whose ratio (0.98×) sits inside the ±5 % margin
    /// but whose interval reaches past it are grown, both alike, and the
    /// line names what deciding takes; a clear ratio, a case still
    /// in its pilot, growing to an earlier floor or stopped unconverged,
    /// a capacity step or a family funded twice are not; nor one whose
    /// ratio lies so near the margin that it would take more than the
    /// rule's most trials. One that needs many times its trials does.
    #[test]
    fn a_ratio_near_its_margin_grows_its_cases() {
        let p = BTreeMap::new();
        let one = trials(100.0, 4.0, 8);
        let two: Vec<f64> = trials(98.0, 4.0, 8).into_iter().rev().collect();
        let cases = [case(1, &one, &p), case(2, &two, &p)];
        let found = undecided(&cases, &RULE, |_| 0);
        assert_eq!(found.len(), 1);
        let f = &found[0];
        assert_eq!(f.family, "mem");
        assert!(
            f.interval.low < 0.952 && f.interval.high > 0.98,
            "{:?}",
            f.interval
        );
        assert_eq!(f.floors.len(), 2);
        let floor = f.floors[0].1;
        assert!(floor > 8 && f.floors[1].1 == floor, "{:?}", f.floors);
        assert_eq!(f.more_trials, 2 * (floor - 8));
        assert!((f.cost_s - 0.25 * f.more_trials as f64).abs() < 1e-9);
        assert!(
            f.line(&RULE).contains("cannot tell at ±5 %"),
            "{}",
            f.line(&RULE)
        );
        assert!(undecided(&cases, &RULE, |_| MAX_FUNDINGS).is_empty());
        let wide = trials(100.0, 12.0, 8);
        let wide_two: Vec<f64> = trials(98.0, 12.0, 8).into_iter().rev().collect();
        let near = [case(1, &wide, &p), case(2, &wide_two, &p)];
        assert!(undecided(&near, &RULE, |_| 0).is_empty());
        let dear = trials(100.0, 6.0, 8);
        let dear_two: Vec<f64> = trials(98.0, 6.0, 8).into_iter().rev().collect();
        let far = [case(1, &dear, &p), case(2, &dear_two, &p)];
        let found = undecided(&far, &RULE, |_| 0);
        let floor = found.first().map_or(0, |f| f.floors[0].1);
        // Past six times its trials with the estimate's ×1.25 on top.
        assert!(
            floor > 60 && floor <= RULE.max_trials,
            "grown past six times its trials: {floor}"
        );

        let faster: Vec<f64> = trials(130.0, 6.0, 8).into_iter().rev().collect();
        let clear = [case(1, &one, &p), case(2, &faster, &p)];
        assert!(undecided(&clear, &RULE, |_| 0).is_empty());

        // A case still in its pilot, a capacity step, one growing to an
        // earlier floor or one stopped unconverged keeps its family unread.
        let held: [fn(Case<'_>) -> Case<'_>; 4] = [
            |c| Case {
                piloted: false,
                ..c
            },
            |c| Case {
                converging: false,
                ..c
            },
            |c| Case { growing: true, ..c },
            |c| Case { stopped: true, ..c },
        ];
        for hold in held {
            let cases = [case(1, &one, &p), hold(case(2, &two, &p))];
            assert!(undecided(&cases, &RULE, |_| 0).is_empty());
        }

        // A family of unlike metrics is read per metric, as the table
        // reads it: creations with creations, removals with removals.
        fn of<'a>(workload: &'a str, metric: &'a str, c: Case<'a>) -> Case<'a> {
            Case {
                family: "fs",
                workload,
                metric,
                ..c
            }
        }
        let fs = [
            of("fs.create", "creates", case(1, &one, &p)),
            of("fs.create", "creates", case(2, &two, &p)),
            of("fs.delete", "deletes", case(1, &one, &p)),
            of("fs.delete", "deletes", case(2, &faster, &p)),
        ];
        let found = undecided(&fs, &RULE, |_| 0);
        let names: Vec<&str> = found.iter().map(|f| f.family.as_str()).collect();
        assert_eq!(names, ["fs: creates"]);
        assert_eq!(
            found[0].floors.iter().map(|f| f.0).collect::<Vec<_>>(),
            [0, 1]
        );
    }
}
