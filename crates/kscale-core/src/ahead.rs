//! How long a run without a budget still has to go, revised as it goes.
//!
//! Before its first trial a study can only guess from the gauge's noise
//! and each case's trial length (docs/planning.md, "Planning to the noise").
//! That guess misses what the cases themselves show: the trials a family
//! really needs (a `net` sweep on this VM took eight a case where the gauge
//! said four), the wall time a trial costs beyond its window (a `fs`
//! trial creates the files it deletes), and what the runner spends around
//! the trials (worker processes, profiles, the store). Each case already
//! finished teaches the estimate for the ones still ahead of the same
//! workload, or failing that of the same family. And a case measured on
//! this machine before is expected at what it cost then.

use std::collections::HashMap;

/// One case as the estimate sees it.
#[derive(Clone, Debug)]
pub struct Case<'a> {
    /// Its workload (`net.tcp_rr`): cases of one workload cost alike.
    pub workload: &'a str,
    /// Finished (converged, stopped, failed or left out).
    pub finished: bool,
    /// Trials taken so far, the warm-up included.
    pub turns: usize,
    /// Wall seconds those trials took.
    pub secs: f64,
    /// Counted trials its own spread says it needs in all, once it has
    /// enough to say (`None` before).
    pub needed: Option<usize>,
    /// Wall seconds one trial was guessed to take before any ran.
    pub guess_s: f64,
    /// Trials (warm-up included) guessed in all before any ran.
    pub guess_turns: usize,
    /// The trials (warm-up included) and their wall seconds of the same
    /// case in an earlier run on this machine, where one finished it.
    pub before: Option<(usize, f64)>,
}

/// What the finished cases of one workload or family cost, summed.
#[derive(Clone, Copy, Default, Debug)]
struct Seen {
    cases: usize,
    turns: usize,
    secs: f64,
    guess_secs: f64,
    guess_turns: usize,
}

impl Seen {
    fn add(&mut self, c: &Case<'_>) {
        self.cases += 1;
        self.turns += c.turns;
        self.secs += c.secs;
        self.guess_secs += c.guess_s * c.turns as f64;
        self.guess_turns += c.guess_turns;
    }
}

fn family(workload: &str) -> &str {
    workload.split('.').next().unwrap_or(workload)
}

/// Wall seconds the unfinished `cases` still take, each trial's wall time
/// times `overhead` (the run's elapsed time over its trials' wall time so
/// far: what the runner spends around them, profiles included; 1 before
/// there is any). `max_trials` caps a case's counted trials.
pub fn seconds_left(cases: &[Case<'_>], overhead: f64, max_trials: usize) -> f64 {
    let mut by_workload: HashMap<&str, Seen> = HashMap::new();
    let mut by_family: HashMap<&str, Seen> = HashMap::new();
    let mut all = Seen::default();
    for c in cases.iter().filter(|c| c.finished && c.turns > 0) {
        by_workload.entry(c.workload).or_default().add(c);
        by_family.entry(family(c.workload)).or_default().add(c);
        all.add(c);
    }
    // A workload with no finished case like it yet needs more trials than
    // guessed by as much as the run's finished cases did (a spread the
    // gauge does not see is the machine's, or the kind of case's, not
    // one family's): never fewer than guessed.
    // What a case's own first trials say it needs is noisy (three trials'
    // spread can ask for the rule's maximum where the case converges at
    // eight): each unfinished case is expected at the median need of the
    // unfinished cases of its workload that can say.
    let mut needs: HashMap<&str, Vec<usize>> = HashMap::new();
    for c in cases.iter().filter(|c| !c.finished) {
        if let Some(n) = c.needed {
            needs.entry(c.workload).or_default().push(n.min(max_trials));
        }
    }
    let median_need: HashMap<&str, usize> = needs
        .into_iter()
        .map(|(w, mut v)| {
            v.sort_unstable();
            (w, v[v.len() / 2])
        })
        .collect();
    let more = if all.guess_turns > 0 {
        (all.turns as f64 / all.guess_turns as f64).max(1.0)
    } else {
        1.0
    };
    let overhead = if overhead.is_finite() && overhead >= 1.0 {
        overhead
    } else {
        1.0
    };
    let left: f64 = cases
        .iter()
        .filter(|c| !c.finished)
        .map(|c| {
            let seen = by_workload
                .get(c.workload)
                .or_else(|| by_family.get(family(c.workload)));
            // Trials in all: its own spread's once known, else what the
            // finished cases of its workload took in this run (this hour's
            // noise), else what it took here before, else what its family's
            // took, else the first guess.
            let needed = c.needed.and(median_need.get(c.workload).copied());
            let mine = by_workload.get(c.workload);
            let average = |s: &Seen| (s.turns as f64 / s.cases as f64).round() as usize;
            let turns = match (needed, mine, c.before, seen) {
                (Some(n), ..) => n + 1,
                (None, Some(s), ..) => average(s),
                (None, None, Some((t, _)), _) if t > 0 => t,
                (None, None, _, Some(s)) => average(s),
                (None, None, _, None) => (c.guess_turns as f64 * more).round() as usize,
            }
            .max(c.turns + 1);
            // A trial's wall time: its own so far, else what it took here
            // before, else its guess scaled by how far off the guesses of
            // the cases like it were.
            let per = match (c.turns, c.before, seen) {
                (t, ..) if t > 0 => c.secs / t as f64,
                (_, Some((t, s)), _) if t > 0 => s / t as f64,
                (_, _, Some(s)) if s.guess_secs > 0.0 => c.guess_s * s.secs / s.guess_secs,
                _ => c.guess_s,
            };
            (turns - c.turns) as f64 * per
        })
        .sum();
    left * overhead
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(workload: &str, finished: bool, turns: usize, secs: f64) -> Case<'_> {
        Case {
            workload,
            finished,
            turns,
            secs,
            needed: None,
            guess_s: 1.0,
            guess_turns: 5,
            before: None,
        }
    }

    #[test]
    fn a_case_measured_here_before_is_expected_at_its_cost_then() {
        // It took 12 trials of 3 s in an earlier run; guessed at 5 of 1 s.
        let mut c = case("fs.create", false, 0, 0.0);
        c.before = Some((12, 36.0));
        assert_eq!(seconds_left(&[c.clone()], 1.0, 30), 36.0);
        // Started, it goes on at its own trials' cost.
        let mut started = c.clone();
        (started.turns, started.secs) = (2, 4.0);
        assert_eq!(seconds_left(&[started], 1.0, 30), 10.0 * 2.0);
        // This run's finished cases of its workload say how many trials
        // this hour needs; its earlier run still says what one costs.
        let done = case("fs.create", true, 20, 20.0);
        assert_eq!(seconds_left(&[done, c], 1.0, 30), 20.0 * 3.0);
    }

    #[test]
    fn before_any_trial_it_is_the_guess() {
        let cases = [
            case("net.tcp_rr", false, 0, 0.0),
            case("mem.frd", false, 0, 0.0),
        ];
        assert_eq!(seconds_left(&cases, 1.0, 30), 10.0);
    }

    #[test]
    fn finished_cases_teach_the_ones_of_their_workload_ahead() {
        // Two finished tcp_rr cases took 9 trials of 12 s each, guessed
        // at 5 of 1 s: the next one is expected at theirs.
        let cases = [
            case("net.tcp_rr", true, 9, 108.0),
            case("net.tcp_rr", true, 9, 108.0),
            case("net.tcp_rr", false, 0, 0.0),
        ];
        assert_eq!(seconds_left(&cases, 1.0, 30), 108.0);
    }

    #[test]
    fn a_workload_not_yet_seen_learns_from_its_family() {
        let cases = [
            case("net.tcp_rr", true, 9, 108.0),
            case("net.udp_rr", false, 0, 0.0),
            case("mem.frd", false, 0, 0.0),
        ];
        // udp_rr: 9 trials at 1 s guessed × 12 (its family's misjudgement);
        // mem: its own second a trial, at the 9 trials of 5 guessed the
        // run's finished cases took.
        assert_eq!(seconds_left(&cases, 1.0, 30), 108.0 + 9.0);
    }

    #[test]
    fn a_started_case_goes_on_at_its_own_cost_to_what_it_needs() {
        let mut c = case("fs.delete", false, 4, 10.0);
        c.needed = Some(20);
        // 21 trials in all (warm-up), 4 taken at 2.5 s.
        assert_eq!(seconds_left(&[c.clone()], 1.0, 30), 17.0 * 2.5);
        // Capped at the rule's maximum.
        assert_eq!(seconds_left(&[c.clone()], 1.0, 10), 7.0 * 2.5);
        // And the run's own overhead on top.
        assert_eq!(seconds_left(&[c], 1.5, 10), 7.0 * 2.5 * 1.5);
    }

    #[test]
    fn a_new_workload_needs_more_trials_as_the_finished_ones_did() {
        // mem's cases took 8 trials where 5 were guessed: ctx, not yet
        // seen, is expected at 8 of its own guessed second.
        let cases = [
            case("mem.frd", true, 8, 8.0),
            case("ctx.lat", false, 0, 0.0),
            case("ctx.lat", false, 1, 1.0),
        ];
        assert_eq!(seconds_left(&cases, 1.0, 30), 8.0 + 7.0);
        // Never fewer than guessed.
        let cases = [
            case("mem.frd", true, 3, 3.0),
            case("ctx.lat", false, 0, 0.0),
        ];
        assert_eq!(seconds_left(&cases, 1.0, 30), 5.0);
    }

    #[test]
    fn a_case_is_expected_at_its_workloads_median_need() {
        let mut cases: Vec<Case<'_>> = [8, 10, 30]
            .iter()
            .map(|&n| {
                let mut c = case("ctx.lat", false, 4, 4.0);
                c.needed = Some(n);
                c
            })
            .collect();
        // Each at 10 counted trials (11 with its warm-up), 4 taken.
        assert_eq!(seconds_left(&cases, 1.0, 30), 3.0 * 7.0);
        // One that cannot say yet keeps its guess.
        cases.push(case("ctx.lat", false, 1, 1.0));
        assert_eq!(seconds_left(&cases, 1.0, 30), 3.0 * 7.0 + 4.0);
    }

    #[test]
    fn nothing_left_is_nothing() {
        let cases = [case("net.tcp_rr", true, 9, 108.0)];
        assert_eq!(seconds_left(&cases, 1.0, 30), 0.0);
        assert_eq!(seconds_left(&[], f64::NAN, 30), 0.0);
    }
}
