//! Latency distributions of macro workloads (docs/macro.md): each trial
//! records an HdrHistogram of nanoseconds, stored with the trial as base64 of
//! HdrHistogram's V2 encoding (the same bytes other HdrHistogram tools read).
//! A result's percentile is taken from the *merged* histogram of its counted
//! trials: a mean of per-trial p99s is not a p99.

use base64::Engine;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use thiserror::Error;

/// Highest value a histogram holds: one hour in nanoseconds. Larger values
/// saturate at it rather than being lost.
pub const MAX_NS: u64 = 3_600_000_000_000;
/// Three significant digits: 0.1 % resolution at every magnitude.
const SIGFIG: u8 = 3;

#[derive(Debug, Error)]
pub enum HistError {
    #[error("histogram is not valid base64: {0}")]
    Base64(#[from] base64::DecodeError),
    #[error("histogram does not decode: {0}")]
    Decode(String),
    #[error("histograms cannot be merged: {0}")]
    Merge(String),
}

/// An empty nanosecond histogram with kscale's bounds.
pub fn new() -> Histogram<u64> {
    // The bounds are constants that HdrHistogram accepts; a failure here is a
    // programming error caught by the unit tests.
    Histogram::new_with_bounds(1, MAX_NS, SIGFIG).expect("valid histogram bounds")
}

/// Records one duration in nanoseconds, saturating at [`MAX_NS`].
#[inline]
pub fn record(h: &mut Histogram<u64>, ns: u64) {
    h.saturating_record(ns.clamp(1, MAX_NS));
}

pub fn encode(h: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    // Writing into a Vec cannot fail for a histogram of valid bounds.
    let _ = V2Serializer::new().serialize(h, &mut bytes);
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

pub fn decode(s: &str) -> Result<Histogram<u64>, HistError> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(s.trim())?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| HistError::Decode(format!("{e:?}")))
}

/// Merges encoded histograms; `None` when there are none.
pub fn merge_encoded<'a>(
    items: impl IntoIterator<Item = &'a str>,
) -> Result<Option<Histogram<u64>>, HistError> {
    let mut out: Option<Histogram<u64>> = None;
    for s in items {
        let h = decode(s)?;
        match &mut out {
            None => out = Some(h),
            Some(o) => o.add(&h).map_err(|e| HistError::Merge(format!("{e:?}")))?,
        }
    }
    Ok(out)
}

/// Merges histograms in place into `into`.
pub fn merge(into: &mut Histogram<u64>, from: &Histogram<u64>) -> Result<(), HistError> {
    into.add(from)
        .map_err(|e| HistError::Merge(format!("{e:?}")))
}

/// The value at quantile `q` (0–1) in nanoseconds; `None` for an empty
/// histogram.
pub fn quantile_ns(h: &Histogram<u64>, q: f64) -> Option<f64> {
    (!h.is_empty()).then(|| h.value_at_quantile(q.clamp(0.0, 1.0)) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip_and_quantiles() {
        let mut h = new();
        for v in 1..=1000u64 {
            record(&mut h, v * 1000);
        }
        let s = encode(&h);
        let back = decode(&s).unwrap();
        assert_eq!(back.len(), 1000);
        let p50 = quantile_ns(&back, 0.5).unwrap();
        assert!((p50 - 500_000.0).abs() / 500_000.0 < 0.002, "{p50}");
        let p99 = quantile_ns(&back, 0.99).unwrap();
        assert!((p99 - 990_000.0).abs() / 990_000.0 < 0.002, "{p99}");
        assert!(quantile_ns(&new(), 0.5).is_none());
        assert!(decode("not base64!").is_err());
        assert!(decode("aGVsbG8=").is_err());
    }

    #[test]
    fn saturates_instead_of_losing() {
        let mut h = new();
        record(&mut h, 0);
        record(&mut h, u64::MAX);
        assert_eq!(h.len(), 2);
        assert!(h.max() >= MAX_NS / 2);
    }

    /// The p99 of the merged trials is the p99 of all their samples — and
    /// differs from the mean of the trials' p99s when the trials differ.
    #[test]
    fn merged_p99_is_not_mean_of_p99s() {
        let mut fast = new();
        let mut slow = new();
        // fast: 995 × 10 µs + 5 × 20 µs; slow: 980 × 10 µs + 20 × 5 ms.
        for _ in 0..995 {
            record(&mut fast, 10_000);
        }
        for _ in 0..5 {
            record(&mut fast, 20_000);
        }
        for _ in 0..980 {
            record(&mut slow, 10_000);
        }
        for _ in 0..20 {
            record(&mut slow, 5_000_000);
        }
        let (ef, es) = (encode(&fast), encode(&slow));
        let merged = merge_encoded([ef.as_str(), es.as_str()]).unwrap().unwrap();
        let p99 = quantile_ns(&merged, 0.99).unwrap();
        let mean_of_p99s =
            (quantile_ns(&fast, 0.99).unwrap() + quantile_ns(&slow, 0.99).unwrap()) / 2.0;
        assert!(p99 < 30_000.0, "merged p99 {p99}");
        assert!(mean_of_p99s > 1_000_000.0);
        assert!(merge_encoded(std::iter::empty()).unwrap().is_none());
    }

    proptest! {
        /// Merging is the same as recording everything into one histogram.
        #[test]
        fn merge_equals_union(a in proptest::collection::vec(1u64..10_000_000_000, 1..200),
                              b in proptest::collection::vec(1u64..10_000_000_000, 1..200)) {
            let (mut ha, mut hb, mut all) = (new(), new(), new());
            for v in &a { record(&mut ha, *v); record(&mut all, *v); }
            for v in &b { record(&mut hb, *v); record(&mut all, *v); }
            let (ea, eb) = (encode(&ha), encode(&hb));
            let m = merge_encoded([ea.as_str(), eb.as_str()]).unwrap().unwrap();
            prop_assert_eq!(m.len(), all.len());
            for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
                prop_assert_eq!(m.value_at_quantile(q), all.value_at_quantile(q));
            }
        }
    }
}
