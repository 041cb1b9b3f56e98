//! Randomized order of interleaved arms (docs/tune.md, "Interleaved
//! steps"): when several configurations of one machine are measured
//! together, each round gives every arm one turn, in an order drawn afresh
//! for the round, so that neither a drift of the host nor a fixed position
//! in the round (first after a switch, last before one) favours an arm.
//!
//! SplitMix64 (Steele, Lea and Flood, 2014) is enough: the order has to be
//! unpredictable to the host's rhythms and reproducible from its seed, not
//! cryptographic, and a few lines spare the workspace a dependency.

/// A seeded generator: the same seed gives the same orders.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform integer below `n` (> 0), by Lemire's multiply-and-reject,
    /// so that no index is favoured.
    pub fn below(&mut self, n: usize) -> usize {
        let n = n as u64;
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = u128::from(self.next_u64()) * u128::from(n);
            if (m as u64) >= threshold {
                return (m >> 64) as usize;
            }
        }
    }

    /// Fisher–Yates.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

/// The order of one round: the arms still measuring (`alive`), shuffled
/// afresh. Not a fixed alternation (A B A B …): under a drift that keeps
/// growing, the arm that always goes first would always read the earlier,
/// and so differ by the drift of half a trial.
pub fn round(rng: &mut SplitMix64, alive: &[usize]) -> Vec<usize> {
    let mut order = alive.to_vec();
    rng.shuffle(&mut order);
    order
}

/// A seed for a study from what differs between two starts: the clock and
/// the process.
pub fn fresh_seed(nanos: u128, pid: u32) -> u64 {
    let mut r = SplitMix64::new((nanos as u64) ^ ((nanos >> 64) as u64) ^ (u64::from(pid) << 32));
    r.next_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rounds of `n` arms until each has had `turns` turns, as the
    /// runner draws them.
    fn rounds(seed: u64, n: usize, turns: usize) -> Vec<Vec<usize>> {
        let mut rng = SplitMix64::new(seed);
        let alive: Vec<usize> = (0..n).collect();
        (0..turns).map(|_| round(&mut rng, &alive)).collect()
    }

    #[test]
    fn every_arm_gets_a_turn_in_every_round() {
        for seed in [0, 1, 42, u64::MAX] {
            for r in rounds(seed, 4, 20) {
                let mut s = r.clone();
                s.sort_unstable();
                assert_eq!(s, vec![0, 1, 2, 3], "{r:?}");
            }
        }
        // Only the arms still measuring.
        let mut rng = SplitMix64::new(7);
        let r = round(&mut rng, &[1, 3]);
        assert!(r == vec![1, 3] || r == vec![3, 1]);
        assert!(round(&mut rng, &[]).is_empty());
        assert_eq!(round(&mut rng, &[2]), vec![2]);
    }

    #[test]
    fn orders_differ_between_rounds_and_follow_the_seed() {
        let a = rounds(0x5EED, 3, 12);
        assert_eq!(a, rounds(0x5EED, 3, 12), "not deterministic");
        assert_ne!(a, rounds(0x5EEE, 3, 12), "the seed changes nothing");
        let distinct: std::collections::HashSet<&Vec<usize>> = a.iter().collect();
        assert!(distinct.len() >= 3, "{a:?}");
        // Two arms: both orders occur, not a fixed A B A B.
        let two = rounds(0x5EED, 2, 12);
        assert!(
            two.contains(&vec![0, 1]) && two.contains(&vec![1, 0]),
            "{two:?}"
        );
    }

    #[test]
    fn each_arm_leads_a_round_about_equally_often() {
        // Position bias would turn drift into a difference between arms.
        let n = 3;
        let mut first = [0usize; 3];
        for r in rounds(99, n, 3000) {
            first[r[0]] += 1;
        }
        for f in first {
            assert!((850..=1150).contains(&f), "{first:?}");
        }
    }

    #[test]
    fn below_is_uniform_and_in_range() {
        let mut rng = SplitMix64::new(3);
        let mut seen = [0usize; 5];
        for _ in 0..5000 {
            seen[rng.below(5)] += 1;
        }
        assert!(seen.iter().all(|&s| (850..=1150).contains(&s)), "{seen:?}");
        assert_ne!(fresh_seed(1, 2), fresh_seed(1, 3));
    }
}
