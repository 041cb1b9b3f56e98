//! How a run judges a case from its trials: the values it is judged on,
//! what they followed of the host, and whether it stops.

use super::unit::Unit;
use crate::engine::args::{RunOptions, Step};
use kscale_core::hostfit::Measures;
use kscale_core::{Decision, RunRule};
use kscale_workloads::WorkloadDef;

/// The values a case is judged and planned on (`Unit::judged`): the fit's
/// where its trials followed the host and the fit narrows the rule's
/// interval, else the counted values.
pub(super) fn judged(
    rule: &kscale_core::StopRule,
    converge: bool,
    counted: &[f64],
    host: &[Measures],
) -> Vec<f64> {
    let fit = converge
        .then(|| {
            kscale_core::hostfit::HostFit::narrowing(counted, host, rule.confidence_pct, |x| {
                rule.summary(x).width_pct()
            })
        })
        .flatten();
    match fit {
        Some(f) => f.judged,
        None => counted.to_vec(),
    }
}

/// What a case's counted trials (`values`, with each one's steal time and
/// line round trip in `host`) followed of the host's, as the tables say it
/// of a NOT CONVERGED case: empty where they followed neither. A case left
/// out for its spread is then named the host's, not the workload's.
pub(super) fn host_link(values: &[f64], host: &[Measures]) -> String {
    use kscale_core::Follows;
    // Index k of a trial's measures (hostfit::HostMeasure::ALL: others,
    // line, steal).
    let with = |k: usize| values.iter().zip(host).map(move |(v, h)| (*v, h[k]));
    if let Some(f) = Follows::over(with(1), Follows::line) {
        return format!(
            "; its trials followed the host's placement of the vCPUs (a cache line took {:.0}–{:.0} ns between two of its CPUs, r = {:.2}: docs/method.md, \"vCPU placement\")",
            f.low, f.high, f.r
        );
    }
    if let Some(f) = Follows::over(with(2), Follows::steal) {
        return format!(
            "; its trials followed the hypervisor's steal time ({:.0}–{:.0} %, r = {:.2})",
            f.low, f.high, f.r
        );
    }
    if let Some(f) = Follows::over(with(0), Follows::others) {
        return format!(
            "; its trials followed other tasks' use of its CPUs ({:.0}–{:.0} %, r = {:.2}: docs/method.md, \"Others on the trial's CPUs\")",
            f.low, f.high, f.r
        );
    }
    String::new()
}

/// The stopping decision under the workload's run rule; a capacity
/// search's step stops a median-of-N case after one window.
pub(super) fn decide(w: &WorkloadDef, opts: &RunOptions, u: &Unit) -> Decision {
    let counted = &u.counted;
    match w.rule {
        RunRule::Converge => match opts.rule.decide(&u.judged, u.spent_s) {
            // A capacity step's windows are the search's, not a run's.
            Decision::Converged
                if counted.len() < opts.rule.max_trials
                    && opts.step == Step::Whole
                    && u.first_counted.is_some_and(|t| {
                        t.elapsed().as_secs_f64() < opts.rule.min_span_s.unwrap_or(0.0)
                    }) =>
            {
                Decision::Continue
            }
            // Its family's scalability asked for more.
            Decision::Converged if counted.len() < u.floor.min(opts.rule.max_trials) => {
                Decision::Continue
            }
            d => d,
        },
        RunRule::MedianOf(n) if counted.len() >= n || opts.step != Step::Whole => {
            Decision::NotConverged
        }
        RunRule::MedianOf(_) => Decision::Continue,
    }
}

#[cfg(test)]
mod tests {
    use kscale_core::hostfit::Measures;

    #[test]
    fn a_case_left_out_names_the_host_it_followed() {
        // Five pilot trials of a ring across two vCPUs: two with the vCPUs
        // near (a 60 ns line), three far (390 ns), the ring 1.6x slower.
        let values = [2.05, 2.02, 3.27, 3.20, 3.21];
        let near_far = [60.0, 61.0, 390.0, 385.0, 388.0];
        let host: Vec<Measures> = near_far
            .iter()
            .map(|&l| [Some(1.0), Some(l), Some(0.0)])
            .collect();
        let said = super::host_link(&values, &host);
        assert!(said.contains("placement of the vCPUs"), "{said}");
        assert!(said.contains("60–390 ns"), "{said}");
        // The same spread with the vCPUs where they were: nothing to name.
        let still: Vec<Measures> = values
            .iter()
            .map(|_| [Some(1.0), Some(60.0), Some(0.0)])
            .collect();
        assert_eq!(super::host_link(&values, &still), "");
        // Trials without a probe (one CPU) and steal that followed them.
        let steal: Vec<Measures> = [0.0, 1.0, 20.0, 18.0, 22.0]
            .iter()
            .map(|&s| [None, None, Some(s)])
            .collect();
        let said = super::host_link(&values, &steal);
        assert!(said.contains("steal time (0–22 %"), "{said}");
        // A noisy neighbour: others ran more of its CPUs in the slow ones.
        let others: Vec<Measures> = [5.0, 6.0, 30.0, 28.0, 29.0]
            .iter()
            .map(|&o| [Some(o), Some(60.0), Some(0.0)])
            .collect();
        let said = super::host_link(&values, &others);
        assert!(
            said.contains("other tasks' use of its CPUs (5–30 %"),
            "{said}"
        );
        // Too few trials to say.
        assert_eq!(super::host_link(&values[..3], &host[..3]), "");
    }

    #[test]
    fn a_case_that_followed_a_neighbour_is_judged_on_the_fit() {
        use kscale_core::{Decision, StopRule};
        let rule = StopRule {
            width_pct: 10.0,
            ..StopRule::DEFAULT
        };
        // Twelve trials whose throughput went as the CPU others left it.
        let others = [
            12.0, 35.0, 20.0, 40.0, 15.0, 28.0, 33.0, 10.0, 22.0, 38.0, 18.0, 30.0,
        ];
        let values: Vec<f64> = others
            .iter()
            .enumerate()
            .map(|(i, o)| 1e5 * (1.0 - o / 100.0) * (1.0 + 0.01 * ((i % 3) as f64 - 1.0)))
            .collect();
        let host: Vec<Measures> = others.iter().map(|&o| [Some(o), None, Some(0.0)]).collect();
        assert_ne!(rule.decide(&values, 1.0), Decision::Converged);
        let judged = super::judged(&rule, true, &values, &host);
        assert_eq!(rule.decide(&judged, 1.0), Decision::Converged);
        // Not for a median-of-N case, nor without the measure.
        assert_eq!(super::judged(&rule, false, &values, &host), values);
        let none: Vec<Measures> = host.iter().map(|_| [None, None, Some(0.0)]).collect();
        assert_eq!(super::judged(&rule, true, &values, &none), values);
    }
}
