//! Latency statistics: recording samples into an HdrHistogram (constant
//! memory whatever the iteration count) and summarising them. Formatting lives
//! in `output`/`export`; this module only computes.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Largest sample recorded exactly: 60 s in ns. Larger ones are clamped and counted.
const MAX_NS: u64 = 60_000_000_000;

/// `-H`/`-U`: the most raw samples a point keeps (8 MB of `u64`s); the
/// samples past it are counted, not kept.
pub const RAW_SAMPLES_CAP: u64 = 1_000_000;

/// Records latency samples in nanoseconds without allocating per sample.
pub struct LatencyRecorder {
    hist: Histogram<u64>,
    clamped: u64,
    /// `-H`/`-U`: the raw samples in the order recorded, in a buffer
    /// allocated (and written once, so no page fault lands in a measured
    /// loop) when the recorder is made; empty when none are kept.
    raw: Box<[u64]>,
    /// Slots of `raw` filled so far, and the samples recorded past its end.
    taken: usize,
    left_out: u64,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyRecorder {
    pub fn new() -> Self {
        Self {
            // 3 significant digits: 0.1% resolution at every magnitude, ~200 KiB.
            hist: Histogram::new_with_bounds(1, MAX_NS, 3).expect("static histogram bounds"),
            clamped: 0,
            raw: Box::default(),
            taken: 0,
            left_out: 0,
        }
    }

    /// A recorder that also keeps the first `keep` raw samples of each point
    /// (at most `RAW_SAMPLES_CAP`; 0: none, as `new`).
    pub fn keeping_raw(keep: u64) -> Self {
        let keep = keep.min(RAW_SAMPLES_CAP) as usize;
        Self {
            // A non-zero fill writes every page now (zeros would be mapped
            // untouched), so no page fault lands in a measured loop.
            raw: vec![u64::MAX; keep].into_boxed_slice(),
            ..Self::new()
        }
    }

    #[inline(always)]
    pub fn record(&mut self, ns: u64) {
        let v = ns.clamp(1, MAX_NS);
        if v != ns && ns > MAX_NS {
            self.clamped += 1;
        }
        // In range by construction, so this cannot fail or allocate.
        let _ = self.hist.record(v);
        // A store into the preallocated buffer, never a push.
        match self.raw.get_mut(self.taken) {
            Some(slot) => {
                *slot = ns;
                self.taken += 1;
            }
            None => self.left_out += 1,
        }
    }

    /// `-H`/`-U`: the raw samples kept (ns, in the order recorded) and how
    /// many were recorded past the buffer; `None` when none are kept.
    pub fn raw(&self) -> Option<(&[u64], u64)> {
        (!self.raw.is_empty()).then(|| (&self.raw[..self.taken], self.left_out))
    }

    pub fn len(&self) -> u64 {
        self.hist.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }

    /// Adds `other`'s samples (the same bounds, so nothing is resized);
    /// its raw samples are not kept (only `record` keeps them).
    pub fn add(&mut self, other: &LatencyRecorder) {
        let _ = self.hist.add(&other.hist);
        self.clamped += other.clamped;
    }

    pub fn clear(&mut self) {
        self.hist.reset();
        self.clamped = 0;
        self.taken = 0;
        self.left_out = 0;
    }

    /// Summary statistics, every value multiplied by `scale` (0.5 turns
    /// round-trip samples into half-RTT figures without losing resolution).
    pub fn summary(&self, scale: f64) -> LatencyStats {
        let h = &self.hist;
        let q = |p: f64| h.value_at_quantile(p) as f64 * scale;
        LatencyStats {
            samples: h.len(),
            min_ns: h.min() as f64 * scale,
            p50_ns: q(0.50),
            p90_ns: q(0.90),
            p99_ns: q(0.99),
            p999_ns: q(0.999),
            p9999_ns: q(0.9999),
            max_ns: h.max() as f64 * scale,
            mean_ns: h.mean() * scale,
            stdev_ns: h.stdev() * scale,
            clamped: self.clamped,
        }
    }

    /// The raw distribution as (value_ns, count) pairs of the non-empty
    /// buckets, so percentiles and CDFs can be recomputed from a results file.
    pub fn buckets(&self, scale: f64) -> Vec<(f64, u64)> {
        self.hist
            .iter_recorded()
            .map(|v| {
                (
                    self.hist.highest_equivalent(v.value_iterated_to()) as f64 * scale,
                    v.count_at_value(),
                )
            })
            .collect()
    }
}

/// Summary of one latency point. Percentiles are HdrHistogram quantiles
/// (nearest rank, 0.1% value resolution).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
pub struct LatencyStats {
    pub samples: u64,
    pub min_ns: f64,
    pub p50_ns: f64,
    pub p90_ns: f64,
    pub p99_ns: f64,
    pub p999_ns: f64,
    pub p9999_ns: f64,
    pub max_ns: f64,
    pub mean_ns: f64,
    pub stdev_ns: f64,
    /// Samples above 60 s, recorded as 60 s.
    pub clamped: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= b.abs() * 0.001 + 1.0
    }

    #[test]
    fn percentiles_match_hand_computed_nearest_rank() {
        // 1..=1000 µs: nearest-rank p50 is the 500th value, p90 the 900th, p99 the 990th.
        let mut r = LatencyRecorder::new();
        for us in 1..=1000u64 {
            r.record(us * 1000);
        }
        let s = r.summary(1.0);
        assert_eq!(s.samples, 1000);
        assert!(close(s.min_ns, 1_000.0), "{s:?}");
        assert!(close(s.p50_ns, 500_000.0), "{s:?}");
        assert!(close(s.p90_ns, 900_000.0), "{s:?}");
        assert!(close(s.p99_ns, 990_000.0), "{s:?}");
        assert!(close(s.p999_ns, 999_000.0), "{s:?}");
        assert!(close(s.max_ns, 1_000_000.0), "{s:?}");
        assert!(close(s.mean_ns, 500_500.0), "{s:?}");
        // Population stdev of 1..=1000 (× 1000): sqrt((1000²-1)/12) ≈ 288.675 µs.
        assert!(close(s.stdev_ns, 288_675.0), "{s:?}");
    }

    #[test]
    fn half_scale_halves_every_figure() {
        let mut r = LatencyRecorder::new();
        for v in [2_000u64, 4_000, 6_000, 8_000] {
            r.record(v);
        }
        let full = r.summary(1.0);
        let half = r.summary(0.5);
        assert_eq!(half.samples, 4);
        assert!(close(half.p50_ns, full.p50_ns / 2.0));
        assert!(close(half.max_ns, 4_000.0));
        assert!(close(half.mean_ns, 2_500.0));
    }

    #[test]
    fn outliers_are_clamped_and_counted_not_lost() {
        let mut r = LatencyRecorder::new();
        r.record(0);
        r.record(MAX_NS * 10);
        assert_eq!(r.len(), 2);
        let s = r.summary(1.0);
        assert_eq!(s.clamped, 1);
        assert!(s.max_ns >= MAX_NS as f64 * 0.999);
    }

    #[test]
    fn raw_samples_are_kept_in_order_up_to_the_buffer_and_the_rest_counted() {
        let mut r = LatencyRecorder::keeping_raw(3);
        for v in [30u64, 10, 20, 40, 50] {
            r.record(v);
        }
        assert_eq!(r.raw(), Some((&[30u64, 10, 20][..], 2)));
        assert_eq!(r.len(), 5, "the histogram still has every sample");
        r.clear();
        r.record(7);
        assert_eq!(r.raw(), Some((&[7u64][..], 0)));
        assert_eq!(LatencyRecorder::new().raw(), None);
    }

    #[test]
    fn raw_buffer_is_capped() {
        let r = LatencyRecorder::keeping_raw(u64::MAX);
        assert_eq!(r.raw.len() as u64, RAW_SAMPLES_CAP);
    }

    #[test]
    fn buckets_sum_to_sample_count() {
        let mut r = LatencyRecorder::new();
        for v in 0..10_000u64 {
            r.record(1_000 + v % 777);
        }
        let total: u64 = r.buckets(1.0).iter().map(|b| b.1).sum();
        assert_eq!(total, 10_000);
    }
}
