//! What a regression gate stands on (docs/verdicts.md): each case's value
//! in every stored run of it on this host and kernel, whatever the label,
//! in the order they were measured; from them the spread of one run about
//! its level, and the change between the baseline's runs and the runs just
//! measured. The verdict itself is `kscale_core::verdict`'s.
//!
//! A run's trials cannot tell the machine's spread between runs: on a VM
//! whose host moves it in phases of seconds, one run's trials all sit in
//! one phase and agree with each other, while the next run sits in
//! another. Only runs measure that, so the gate reads the case's runs.

use kscale_core::cpus::base_name;
use kscale_core::pace;
use kscale_core::verdict::{self, Change, GateVerdict, GateWord, Spread};
use kscale_core::Direction;
use kscale_store::{CaseData, CaseStatus, RunData, Store};
use std::collections::BTreeMap;

/// A run's place in the series: the host and kernel it ran on, the build
/// that measured it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Machine {
    host: Option<String>,
    kernel: Option<String>,
    kernel_version: Option<String>,
    /// How `kscale vm` booted it, `None` natively: an emulated kernel is
    /// another machine than the same kernel on the host.
    vm: Option<String>,
}

/// Where a stored run ran.
fn machine_of_run(r: &kscale_store::series::SeriesRun) -> Machine {
    Machine {
        host: r.hostname.clone(),
        kernel: r.kernel.clone(),
        kernel_version: r.kernel_version.clone(),
        vm: r.vm.clone(),
    }
}

fn machine_of(snapshot: &serde_json::Value) -> Machine {
    let s = |v: &serde_json::Value| v.as_str().map(str::to_string);
    Machine {
        host: s(&snapshot["hostname"]),
        kernel: s(&snapshot["kernel"]["release"]),
        kernel_version: s(&snapshot["kernel"]["version"]),
        vm: kscale_store::vm_tag(snapshot),
    }
}

/// One case the gate compares: what names it and its primary metric.
/// `history` follows a case by the same fields (its series' JSON has them
/// at the top level).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Target {
    pub workload: String,
    pub params: BTreeMap<String, String>,
    /// The baseline's CPU configuration (its name, for the line).
    pub cpus: String,
    pub metric: String,
    pub unit: String,
    pub direction: Direction,
}

impl Target {
    fn is(&self, c: &CaseData) -> bool {
        c.key.workload == self.workload
            && c.key.params == self.params
            && base_name(&c.key.cpus) == base_name(&self.cpus)
    }

    /// `syscall.null` or `ctx.lat procs=2 size=0`.
    pub fn name(&self) -> String {
        let mut s = self.workload.clone();
        for (k, v) in &self.params {
            s.push_str(&format!(" {k}={v}"));
        }
        s
    }
}

/// A done case's level of `metric` in one run ([`CaseData::level`]: its
/// trials' plain mean, not the estimator its table prints).
fn value(c: &CaseData, metric: &str) -> Option<f64> {
    if c.status != CaseStatus::Done {
        return None;
    }
    let v = c.level(metric)?;
    (v.is_finite() && v > 0.0).then_some(v)
}

/// The baseline's done cases, each with its primary metric.
pub fn targets(base: &RunData) -> Vec<Target> {
    base.cases
        .iter()
        .filter(|c| c.status == CaseStatus::Done)
        .filter_map(|c| {
            let m = c.metrics.iter().find(|m| m.primary).or(c.metrics.first())?;
            Some(Target {
                workload: c.key.workload.clone(),
                params: c.key.params.clone(),
                cpus: c.key.cpus.clone(),
                metric: m.name.clone(),
                unit: m.unit.clone(),
                direction: m.direction,
            })
        })
        .collect()
}

/// What one case's verdict stood on.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Footing {
    /// The baseline side's runs (the baseline and its label's runs of the
    /// same build on this host and kernel) and their levels (each run's
    /// trials' mean, [`CaseData::level`]).
    pub base_runs: Vec<i64>,
    pub base_values: Vec<f64>,
    /// The runs measured now and their levels.
    pub now_runs: Vec<i64>,
    pub now_values: Vec<f64>,
    /// One run's spread about its level, in % (ln × 100), and the stored
    /// runs it was read from (this host and kernel, any label).
    pub spread_pct: Option<f64>,
    pub spread_df: Option<f64>,
    pub spread_runs: usize,
    /// The machine's own move between the sides: the gauge's user-space
    /// CPU loop now against the baseline's side, its interval from the
    /// loop's spread between the same runs (slower above 0).
    pub machine: Option<verdict::Interval>,
    /// The gain the runs' values were moved along their pace by, where
    /// both sides' runs recorded one (docs/verdicts.md, "The pace beside
    /// each trial"); `None` for runs from before the pace was recorded.
    pub pace: Option<pace::Gain>,
    /// How much slower (above 0) the pace ran now than at the baseline's
    /// side, in %.
    pub pace_move_pct: Option<f64>,
}

/// One stored run of a case: its value and its trials' mean pace.
#[derive(Clone, Copy, Debug)]
struct Run {
    id: i64,
    value: f64,
    pace: Option<f64>,
}

/// A case's verdict and its footing; `verdict` is `None` where a side has
/// no value or the runs give no spread yet.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Judged {
    #[serde(skip)]
    pub target: Target,
    /// How many cases were judged together (each at α over them).
    #[serde(skip)]
    pub cases: usize,
    pub verdict: Option<GateVerdict>,
    pub footing: Footing,
}

/// The spread between runs of the cases `targets` together on the machine
/// of `snapshot`: of one case's level, or of a family's geometric mean
/// over its cases ([`levels_here`]), which the machine moves partly
/// together and partly not (`compare`'s family rows).
pub fn spread_here(
    stored: &kscale_store::series::Stored,
    snapshot: &serde_json::Value,
    targets: &[Target],
) -> Option<Spread> {
    let series: Vec<(f64, String)> = levels_here(stored, snapshot, targets)
        .into_iter()
        .map(|(_, level, rev)| (level, rev))
        .collect();
    Spread::successive(&series)
}

/// Each run on the machine of `snapshot` that measured every one of
/// `targets`, oldest first, with their level together (the mean over the
/// targets of [`kscale_core::verdict::worse_ln`] of each one's value: the
/// ln of their geometric mean, worse above) and the build that measured
/// it.
pub fn levels_here(
    stored: &kscale_store::series::Stored,
    snapshot: &serde_json::Value,
    targets: &[Target],
) -> Vec<(i64, f64, String)> {
    if targets.is_empty() {
        return Vec::new();
    }
    let here = machine_of(snapshot);
    let mut by_run: BTreeMap<i64, Vec<&CaseData>> = BTreeMap::new();
    for s in &stored.cases {
        by_run.entry(s.run_id).or_default().push(&s.case);
    }
    by_run
        .into_iter()
        .filter_map(|(id, cases)| {
            let r = stored.runs.get(&id)?;
            let m = machine_of_run(r);
            (m == here).then_some(())?;
            let mut sum = 0.0;
            for t in targets {
                let c = cases.iter().find(|c| t.is(c))?;
                sum += kscale_core::verdict::worse_ln(value(c, &t.metric)?, t.direction);
            }
            Some((id, sum / targets.len() as f64, r.git_rev.clone()))
        })
        .collect()
}

/// The runs of `label` on the machine of `snapshot`, oldest first: a
/// side `compare` was given by its label.
pub fn label_runs(
    stored: &kscale_store::series::Stored,
    snapshot: &serde_json::Value,
    label: &str,
) -> Vec<i64> {
    let here = machine_of(snapshot);
    stored
        .runs
        .values()
        .filter(|r| r.label == label)
        .filter(|r| machine_of_run(r) == here)
        .map(|r| r.id)
        .collect()
}

/// The same host and kernel, by two runs' snapshots.
pub fn same_machine(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    machine_of(a) == machine_of(b)
}

/// Where the gate reads a case's runs: the baseline's host and kernel. A
/// baseline booted by `kscale vm` is a kernel bisect's: the kernel is what
/// changes, so the machine is the host and the boot's kind, and each
/// kernel a build of its own whose boots give the spread (docs/vm.md,
/// "Kernel bisects").
struct Place {
    here: Machine,
    kernel_bisect: bool,
}

impl Place {
    fn of(snapshot: &serde_json::Value) -> Place {
        let here = machine_of(snapshot);
        let kernel_bisect = here.vm.is_some();
        Place {
            here,
            kernel_bisect,
        }
    }

    /// Whether run `r` ran here.
    fn holds(&self, r: &kscale_store::series::SeriesRun) -> bool {
        let m = machine_of_run(r);
        if self.kernel_bisect {
            m.host == self.here.host && m.vm == self.here.vm
        } else {
            m == self.here
        }
    }

    /// The build that measured `r`: kscale's, and in a kernel bisect the
    /// kernel's too.
    fn build(&self, r: &kscale_store::series::SeriesRun) -> String {
        if self.kernel_bisect {
            format!(
                "{} {} {}",
                r.git_rev,
                r.kernel.as_deref().unwrap_or("?"),
                r.kernel_version.as_deref().unwrap_or("?")
            )
        } else {
            r.git_rev.clone()
        }
    }
}

/// Judges every target: the baseline run `base` against the runs `now`,
/// with the spread of the case's runs in `store` on the baseline's host and
/// kernel. Each case at `alpha` over the targets.
pub fn judge(
    store: &Store,
    base: &RunData,
    now: &[i64],
    targets: &[Target],
    threshold: f64,
) -> anyhow::Result<Vec<Judged>> {
    let mut workloads: Vec<String> = targets.iter().map(|t| t.workload.clone()).collect();
    workloads.sort();
    workloads.dedup();
    let stored = store.series(&workloads)?;
    let place = Place::of(&base.run.snapshot);
    let on_here = |id: &i64| stored.runs.get(id).is_some_and(|r| place.holds(r));
    let build = |r: &kscale_store::series::SeriesRun| place.build(r);
    let base_rev = stored
        .runs
        .get(&base.run.id)
        .map_or_else(|| base.run.git_rev.clone(), build);
    let alpha = verdict::per_case(verdict::ALPHA, targets.len());
    // Each run's user-space loop level (ln), read once for every case.
    let mut loops: std::collections::BTreeMap<i64, f64> = Default::default();
    for id in stored.runs.keys().filter(|id| on_here(id)) {
        if let Some(l) = kscale_core::noise::loop_level(&store.gauge(*id)?) {
            loops.insert(*id, l.ln());
        }
    }
    let mut out = Vec::new();
    for t in targets {
        // Every stored run of the case here, oldest first (run ids grow
        // with time in one store), with its value and its pace.
        let runs: Vec<Run> = stored
            .cases
            .iter()
            .filter(|s| t.is(&s.case) && on_here(&s.run_id))
            .filter_map(|s| {
                Some(Run {
                    id: s.run_id,
                    value: value(&s.case, &t.metric)?,
                    pace: s.case.pace_ns(),
                })
            })
            .collect();
        let rev = |id: i64| stored.runs.get(&id).map(build);
        let label = |id: i64| stored.runs.get(&id).map(|r| r.label.clone());
        let on_base_side = |id: i64| {
            id == base.run.id
                || (!now.contains(&id)
                    && label(id).as_deref() == Some(base.run.label.as_str())
                    && rev(id).as_deref() == Some(base_rev.as_str()))
        };
        // The spread's order: the stored runs before now, then the runs
        // now; each pair of one build and one side. The step from the last
        // stored run to the first run now is the change being judged, so
        // it is not counted as spread.
        let ordered: Vec<Run> = runs
            .iter()
            .filter(|r| !now.contains(&r.id))
            .chain(runs.iter().filter(|r| now.contains(&r.id)))
            .copied()
            .collect();
        let sided = ordered
            .iter()
            .filter(|r| on_base_side(r.id) || now.contains(&r.id));
        let paced = sided.clone().next().is_some() && sided.clone().all(|r| r.pace.is_some());
        let used: Vec<Run> = ordered
            .iter()
            .filter(|r| !paced || r.pace.is_some())
            .copied()
            .collect();
        let base_side: Vec<Run> = used
            .iter()
            .filter(|r| on_base_side(r.id))
            .copied()
            .collect();
        let now_side: Vec<Run> = used
            .iter()
            .filter(|r| now.contains(&r.id))
            .copied()
            .collect();
        let sides = Sides {
            used: &used,
            base: &base_side,
            now: &now_side,
            now_ids: now,
            rev: &rev,
            paced,
        };
        let r = sides.read(t.direction, &loops, threshold, alpha);
        out.push(Judged {
            target: t.clone(),
            cases: targets.len(),
            verdict: r.verdict,
            footing: Footing {
                base_runs: base_side.iter().map(|r| r.id).collect(),
                base_values: base_side.iter().map(|r| r.value).collect(),
                now_runs: now_side.iter().map(|r| r.id).collect(),
                now_values: now_side.iter().map(|r| r.value).collect(),
                spread_pct: r.spread.map(|s| s.sd * 100.0),
                spread_df: r.spread.map(|s| s.df),
                spread_runs: r.spread.map_or(0, |s| s.runs),
                machine: r.gauge.map(|m| verdict::interval(m, alpha)),
                pace: r.gain,
                pace_move_pct: sides.pace_move(),
            },
        });
    }
    Ok(out)
}

/// A case's runs as the gate reads them: the runs the spread reads, in
/// its order, and the two sides among them.
struct Sides<'a> {
    used: &'a [Run],
    base: &'a [Run],
    now: &'a [Run],
    now_ids: &'a [i64],
    /// The build of a run: pairs of one build and one side are the
    /// spread's and the gain's.
    rev: &'a dyn Fn(i64) -> Option<String>,
    /// Every run of both sides recorded its pace.
    paced: bool,
}

/// What the gate read of a case: its verdict and what it stood on.
struct Read {
    verdict: Option<GateVerdict>,
    spread: Option<Spread>,
    gauge: Option<Change>,
    gain: Option<pace::Gain>,
}

impl Sides<'_> {
    fn group(&self, id: i64) -> (Option<String>, bool) {
        ((self.rev)(id), self.now_ids.contains(&id))
    }

    /// The verdict at `threshold`, each run's value read along its pace
    /// where the sides are paced ([`pace`]), the machine beside it the
    /// pace's move (else the gauge's loop, `loops`).
    fn read(
        &self,
        direction: kscale_core::Direction,
        loops: &BTreeMap<i64, f64>,
        threshold: f64,
        alpha: f64,
    ) -> Read {
        let raw = |r: &Run| verdict::worse_ln(r.value, direction);
        let gain = self.paced.then(|| {
            let fit: Vec<(f64, f64, _)> = self
                .used
                .iter()
                .filter_map(|r| Some((raw(r), r.pace?.ln(), self.group(r.id))))
                .collect();
            pace::gain(&fit)
        });
        let y = |r: &Run| match (gain, r.pace) {
            (Some(g), Some(p)) => pace::adjusted(raw(r), p.ln(), g),
            _ => raw(r),
        };
        let series: Vec<(f64, _)> = self.used.iter().map(|r| (y(r), self.group(r.id))).collect();
        let spread = Spread::successive(&series).map(|s| match gain {
            // The fitted gain took one degree of freedom.
            Some(g) if g.fitted => Spread {
                df: (s.df - 1.0).max(1.0),
                ..s
            },
            _ => s,
        });
        let gauge = self.moved(loops);
        // The machine beside the verdict: the pace where the runs have
        // one (it sat beside each trial), else the gauge's loop.
        let (machine, follow) = match gain {
            Some(g) => {
                let paces: BTreeMap<i64, f64> = self
                    .used
                    .iter()
                    .filter_map(|r| Some((r.id, r.pace?.ln())))
                    .collect();
                (self.moved(&paces), g.follow)
            }
            None => (gauge, verdict::Follow::at_most(verdict::SPELL_GAIN)),
        };
        let ys = |side: &[Run]| side.iter().map(y).collect::<Vec<f64>>();
        let verdict = spread
            .and_then(|s| Change::between_runs(&ys(self.base), &ys(self.now), s))
            .map(|c: Change| {
                verdict::beside_machine(
                    verdict::gate(c, threshold, alpha),
                    c,
                    machine,
                    follow,
                    threshold,
                    alpha,
                )
            });
        Read {
            verdict,
            spread,
            gauge,
            gain,
        }
    }

    /// A probe's move between the sides ([`machine_move`]), `levels` each
    /// run's ln level.
    fn moved(&self, levels: &BTreeMap<i64, f64>) -> Option<Change> {
        let order: Vec<i64> = self.used.iter().map(|r| r.id).collect();
        machine_move(levels, &order, self.base, self.now, self.rev, self.now_ids)
    }

    /// How much slower (above 0) the pace ran now than at the baseline's
    /// side, in %; `None` unpaced.
    fn pace_move(&self) -> Option<f64> {
        if !self.paced {
            return None;
        }
        let lnp =
            |side: &[Run]| -> Vec<f64> { side.iter().filter_map(|r| Some(r.pace?.ln())).collect() };
        let (b, n) = (lnp(self.base), lnp(self.now));
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        (!b.is_empty() && !n.is_empty()).then(|| ((mean(&n) - mean(&b)).exp() - 1.0) * 100.0)
    }
}

/// The machine's own move between the sides, read by the gauge's
/// user-space CPU loop as the case is read: each side's mean level
/// against the loop's spread between the same runs, in the same order,
/// pairs of one build, the step into the runs now left out
/// ([`verdict::beside_machine`]). `None` where a run has no readings or
/// the loop gives no spread.
fn machine_move(
    loops: &std::collections::BTreeMap<i64, f64>,
    order: &[i64],
    base_side: &[Run],
    now_side: &[Run],
    rev: &dyn Fn(i64) -> Option<String>,
    now: &[i64],
) -> Option<Change> {
    let level = |side: &[Run]| -> Option<Vec<f64>> {
        side.iter().map(|r| loops.get(&r.id).copied()).collect()
    };
    let series: Vec<(f64, (Option<String>, bool))> = order
        .iter()
        .filter_map(|&id| Some((*loops.get(&id)?, (rev(id), now.contains(&id)))))
        .collect();
    let spread = Spread::successive(&series)?;
    Change::between_runs(&level(base_side)?, &level(now_side)?, spread)
}

/// Whether measuring this case in `more` more runs could still decide it:
/// at its spread and degrees of freedom as they stand, with the estimate
/// where it is and the baseline's side as it is, the interval with that
/// many more runs now would lie below the threshold (not worse), or,
/// with the estimate beyond it, above no change (worse). A slowdown read
/// just past the threshold with its lower end a hair below zero is as
/// undecided as a change read just inside it (a loop made ~9 % slower,
/// against a baseline in a slower stretch of the machine, read +5.1 %
/// [−0.3, +10.8] at a 5 % threshold in 36 s of its minute).
pub fn more_runs_could_decide(j: &Judged, more: usize, threshold: f64) -> bool {
    let Some(v) = j.verdict else {
        // No spread yet: another run gives one.
        return more > 0;
    };
    // A verdict the machine's own move withheld: more runs in the same
    // minute of the machine would read the same move.
    if v.verdict != GateWord::CannotTell || v.machine_pct.is_some() {
        return false;
    }
    let (Some(sd), Some(df)) = (j.footing.spread_pct, j.footing.spread_df) else {
        return false;
    };
    let est = (1.0 + v.interval.est_pct / 100.0).ln();
    let nb = j.footing.base_runs.len().max(1) as f64;
    let na = (j.footing.now_runs.len() + more) as f64;
    // The change as the runs now would make it, read by the gate's own
    // rule ([`verdict::gate`]), not a copy of it.
    let then = Change {
        est,
        se: sd / 100.0 * (1.0 / nb + 1.0 / na).sqrt(),
        df,
        sigma: Some(sd / 100.0),
    };
    let alpha = verdict::per_case(verdict::ALPHA, j.cases.max(1));
    verdict::gate(then, threshold, alpha).verdict != GateWord::CannotTell
}

#[cfg(test)]
mod tests {
    use super::*;
    use kscale_core::verdict::{gate, Change};

    fn judged(est_pct: f64, sd_pct: f64, df: f64, base: usize, now: usize) -> Judged {
        judged_at(est_pct, sd_pct, df, base, now, 0.10)
    }

    fn judged_at(
        est_pct: f64,
        sd_pct: f64,
        df: f64,
        base: usize,
        now: usize,
        threshold: f64,
    ) -> Judged {
        let spread = Spread {
            sd: sd_pct / 100.0,
            df,
            runs: base + now,
        };
        let base_values = vec![1.0; base];
        let now_values = vec![1.0 + est_pct / 100.0; now];
        let ln = |v: &[f64]| v.iter().map(|x| x.ln()).collect::<Vec<_>>();
        let change: Change =
            Change::between_runs(&ln(&base_values), &ln(&now_values), spread).expect("change");
        Judged {
            target: Target {
                workload: "syscall.null".into(),
                params: BTreeMap::new(),
                cpus: "all".into(),
                metric: "latency".into(),
                unit: "µs".into(),
                direction: Direction::Lower,
            },
            cases: 1,
            verdict: Some(gate(change, threshold, verdict::ALPHA)),
            footing: Footing {
                base_runs: (0..base as i64).collect(),
                base_values,
                now_runs: (100..100 + now as i64).collect(),
                now_values,
                spread_pct: Some(sd_pct),
                spread_df: Some(df),
                spread_runs: base + now,
                machine: None,
                pace: None,
                pace_move_pct: None,
            },
        }
    }

    /// More runs now are measured only where they could still decide: not
    /// for a case already decided, nor where one baseline run alone holds
    /// the interval above the threshold however many runs now.
    #[test]
    fn more_runs_only_where_they_could_decide() {
        // 3 % spread, no change, three runs now at few degrees of
        // freedom: cannot tell yet, and three more runs would tell.
        let j = judged(0.0, 3.0, 2.0, 1, 3);
        assert_eq!(j.verdict.map(|v| v.verdict), Some(GateWord::CannotTell));
        assert!(more_runs_could_decide(&j, 3, 0.10));
        // 9 % a run against one baseline run: no number of runs now helps.
        let j = judged(0.0, 9.0, 40.0, 1, 3);
        assert_eq!(j.verdict.map(|v| v.verdict), Some(GateWord::CannotTell));
        assert!(!more_runs_could_decide(&j, 17, 0.10));
        // Just past a 5 % threshold, its lower end a hair below no
        // change: three more runs would lift it above.
        let j = judged_at(5.5, 2.9, 100.0, 1, 3, 0.05);
        assert_eq!(j.verdict.map(|v| v.verdict), Some(GateWord::CannotTell));
        assert!(more_runs_could_decide(&j, 3, 0.05));
        assert!(!more_runs_could_decide(&j, 0, 0.05));
        // Decided cases are left alone.
        let j = judged(40.0, 3.0, 40.0, 1, 3);
        assert_eq!(j.verdict.map(|v| v.verdict), Some(GateWord::Worse));
        assert!(!more_runs_could_decide(&j, 3, 0.10));
    }
}
