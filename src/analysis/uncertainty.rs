//! How sure a figure is, and whether a ratio of two figures is a real
//! difference. Each value gets a 95% interval from the data it was computed
//! from: a latency percentile from the order statistics of the point's kept
//! histogram (distribution-free: the ranks around n·q that a binomial puts
//! the true quantile between; with `--interval`, widened to cover the t
//! interval of the intervals' own p50 or p99, which also sees drift within
//! the point), a throughput figure from its `--interval` figures (Student's
//! t over the intervals' Mops). A ratio B/A gets the
//! interval [B.lo/A.hi, B.hi/A.lo], which holds the true ratio whenever both
//! values' intervals hold theirs (at least 90% of the time). A ratio is
//! called better or worse only where that interval excludes 1 and the ratio
//! is beyond the noise threshold (as criterion.rs does); a value without an
//! interval is not judged. Where A's interval reaches down to 0, B/A is
//! unbounded above (its interval's upper end is +inf) and is judged on its
//! lower end alone.
//!
//! A point measured in passes (`analysis::passes`) gets the hull of the t
//! interval over its passes' values (what drifts between moments of a run)
//! and of its passes' own intervals pooled (each bound the mean of theirs),
//! so it is never narrower than the noise within one pass. A latency
//! minimum and a CPU cost per op have no interval within a pass (one
//! value each); measured in passes they get the t interval over the
//! passes' values, around the folded value (the smallest minimum, the mean
//! cost), and in one pass none, which `why_none` says.

use serde::Serialize;

use crate::results::Record;

/// z of a two-sided 95% normal interval.
const Z95: f64 = 1.96;

/// Fewest samples (latency) or intervals (throughput) an interval is made from.
pub const MIN_SAMPLES: u64 = 20;
pub const MIN_INTERVALS: usize = 3;

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    pub lo: f64,
    pub hi: f64,
}

impl Interval {
    /// Half its width relative to `value` (0.1: ±10%).
    pub fn relative_half_width(&self, value: f64) -> f64 {
        if value > 0.0 {
            (self.hi - self.lo) / 2.0 / value
        } else {
            f64::INFINITY
        }
    }
}

/// The 95% interval of the q-quantile of the samples a histogram holds
/// (`[value, count]` per bucket, ascending): the values at ranks
/// n·q ∓ 1.96·√(n·q·(1−q)). `None` with fewer than `MIN_SAMPLES` samples.
pub fn quantile_interval(histogram: &[(f64, u64)], q: f64) -> Option<Interval> {
    let n: u64 = histogram.iter().map(|(_, c)| c).sum();
    if n < MIN_SAMPLES || !(0.0..=1.0).contains(&q) {
        return None;
    }
    let nf = n as f64;
    let spread = Z95 * (nf * q * (1.0 - q)).sqrt();
    let lo_rank = ((nf * q - spread).floor() as u64).clamp(1, n);
    let hi_rank = ((nf * q + spread).ceil() as u64 + 1).clamp(1, n);
    Some(Interval {
        lo: value_at_rank(histogram, lo_rank)?,
        hi: value_at_rank(histogram, hi_rank)?,
    })
}

/// The value of the `rank`-th smallest sample (1-based).
fn value_at_rank(histogram: &[(f64, u64)], rank: u64) -> Option<f64> {
    let mut seen = 0;
    for &(value, count) in histogram {
        seen += count;
        if seen >= rank {
            return Some(value);
        }
    }
    None
}

/// Student's t for a two-sided 95% interval with `df` degrees of freedom.
fn t95(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => T[df - 1],
        _ => 2.0,
    }
}

/// A 95% interval around `center` from repeated measurements of it (the
/// mean's t interval, shifted to `center`). `None` with fewer than
/// `MIN_INTERVALS` values.
pub fn repeated_interval(values: &[f64], center: f64) -> Option<Interval> {
    if values.len() < MIN_INTERVALS {
        return None;
    }
    t_interval(values, center)
}

/// The mean's t interval of two or more values, shifted to `center`.
fn t_interval(values: &[f64], center: f64) -> Option<Interval> {
    let k = values.len();
    if k < 2 {
        return None;
    }
    let mean = values.iter().sum::<f64>() / k as f64;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (k - 1) as f64;
    let half = t95(k - 1) * var.sqrt() / (k as f64).sqrt();
    Some(Interval {
        lo: (center - half).max(0.0),
        hi: center + half,
    })
}

/// The figures a record has an interval for, and how it was made.
pub fn how(figure: &str) -> Option<&'static str> {
    match figure {
        "p50_ns" | "p99_ns" => Some("order statistics of the histogram, widened to the t interval of the --interval figures where the point has them"),
        "p90_ns" | "p999_ns" => Some("order statistics of the histogram"),
        "mops" | "gbps" => Some("t interval over the --interval figures"),
        f if passes_only(f) => Some("t interval over the point's passes (one pass: none)"),
        _ => None,
    }
}

/// Figures only a point's passes give an interval: a minimum (one sample,
/// no order statistics around it) and CPU cost (one reading per window).
/// The CPU names are the page's headline field and `compare`'s rows.
fn passes_only(figure: &str) -> bool {
    matches!(
        figure,
        "min_ns"
            | "cpu_util.local_cpu_s_per_mop"
            | "cpu_s_per_mop"
            | "cpu_util.local_process_pct"
            | "process_cpu_pct"
    )
}

/// Why a figure of a record has no interval, where `of_record` gives none,
/// so that "not judged" says what is missing.
pub fn why_none(r: &Record, figure: &str) -> Option<&'static str> {
    if of_record(r, figure).is_some() {
        return None;
    }
    let passes = match r {
        Record::Latency(l) => l.passes.len(),
        Record::Throughput(t) => t.passes.len(),
    };
    Some(match (r, passes) {
        (_, 0 | 1) if passes_only(figure) => "one pass: no interval",
        (_, 2..) => "its passes lack the figure",
        (Record::Throughput(_), _) if matches!(figure, "mops" | "gbps") => {
            "fewer than 3 --interval figures"
        }
        (Record::Latency(_), _) if figure.ends_with("_ns") => "fewer than 20 samples",
        _ => "no interval",
    })
}

/// The 95% interval of one of a record's figures, where its data allows.
/// A throughput point's last interval is left out when the window's end cut
/// it to under half the others' length.
pub fn of_record(r: &Record, figure: &str) -> Option<Interval> {
    let passes = match r {
        Record::Latency(l) => &l.passes,
        Record::Throughput(t) => &t.passes,
    };
    if !passes.is_empty() {
        return of_passes(r, passes, figure);
    }
    match r {
        Record::Latency(l) => {
            let q = match figure {
                "p50_ns" => 0.5,
                "p90_ns" => 0.9,
                "p99_ns" => 0.99,
                "p999_ns" => 0.999,
                _ => return None,
            };
            let sampled = quantile_interval(&l.histogram, q);
            // With --interval, the spread of the intervals' own p50/p99 also
            // shows drift within the point; the wider of the two is kept.
            let per_interval: Vec<f64> = l
                .live
                .intervals
                .iter()
                .filter_map(|i| match figure {
                    "p50_ns" => i.p50_ns,
                    "p99_ns" => i.p99_ns,
                    _ => None,
                })
                .collect();
            let center = match figure {
                "p50_ns" => l.stats.p50_ns,
                "p99_ns" => l.stats.p99_ns,
                _ => 0.0,
            };
            match (sampled, repeated_interval(&per_interval, center)) {
                (Some(a), Some(b)) => Some(Interval {
                    lo: a.lo.min(b.lo),
                    hi: a.hi.max(b.hi),
                }),
                (a, b) => a.or(b),
            }
        }
        Record::Throughput(t) => {
            let scale = match figure {
                "mops" => 1.0,
                "gbps" if t.mops > 0.0 => t.gbps / t.mops,
                _ => return None,
            };
            let iv = &t.live.intervals;
            let first = iv.first()?.elapsed_s;
            let whole: Vec<f64> = iv
                .iter()
                .filter(|i| i.elapsed_s >= first / 2.0)
                .map(|i| i.mops)
                .collect();
            repeated_interval(&whole, t.mops).map(|i| Interval {
                lo: i.lo * scale,
                hi: i.hi * scale,
            })
        }
    }
}

/// The value of a figure `of_record` makes intervals for.
fn value_of(r: &Record, figure: &str) -> Option<f64> {
    match (r, figure) {
        (Record::Latency(l), "p50_ns") => Some(l.stats.p50_ns),
        (Record::Latency(l), "p90_ns") => Some(l.stats.p90_ns),
        (Record::Latency(l), "p99_ns") => Some(l.stats.p99_ns),
        (Record::Latency(l), "p999_ns") => Some(l.stats.p999_ns),
        (Record::Throughput(t), "mops") => Some(t.mops),
        (Record::Throughput(t), "gbps") => Some(t.gbps),
        (Record::Latency(l), "min_ns") => Some(l.stats.min_ns),
        (Record::Latency(l), "cpu_util.local_process_pct" | "process_cpu_pct") => {
            l.cpu_util.as_ref()?.local_process_pct
        }
        (Record::Throughput(t), "cpu_util.local_cpu_s_per_mop" | "cpu_s_per_mop") => {
            t.cpu_util.as_ref()?.local_cpu_s_per_mop
        }
        _ => None,
    }
}

/// A folded point's interval: the hull of the t interval over its passes'
/// values (around the folded value, their mean) and of the passes' own
/// intervals pooled, each bound the mean of the passes' bounds.
fn of_passes(folded: &Record, passes: &[Record], figure: &str) -> Option<Interval> {
    let center = value_of(folded, figure)?;
    let values: Vec<f64> = passes.iter().filter_map(|p| value_of(p, figure)).collect();
    let between = t_interval(&values, center);
    let own: Vec<Interval> = passes.iter().filter_map(|p| of_record(p, figure)).collect();
    let within = (!own.is_empty()).then(|| Interval {
        lo: own.iter().map(|i| i.lo).sum::<f64>() / own.len() as f64,
        hi: own.iter().map(|i| i.hi).sum::<f64>() / own.len() as f64,
    });
    match (between, within) {
        (Some(a), Some(b)) => Some(Interval {
            lo: a.lo.min(b.lo),
            hi: a.hi.max(b.hi),
        }),
        (a, b) => a.or(b),
    }
}

/// Whether a smaller value of the figure is the better one.
pub fn lower_is_better(figure: &str) -> bool {
    figure.ends_with("_ns") || figure.contains("cpu")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    Better,
    Worse,
    /// The interval excludes 1 but the ratio is within the noise threshold.
    WithinNoise,
    /// The interval holds 1.
    NoDifference,
    /// One of the two values has no interval.
    NotJudged,
}

impl Change {
    pub fn words(self) -> &'static str {
        match self {
            Change::Better => "better",
            Change::Worse => "worse",
            Change::WithinNoise => "within noise",
            Change::NoDifference => "no significant difference",
            Change::NotJudged => "not judged (no interval)",
        }
    }
}

/// B/A with its interval and what it means.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RatioJudgement {
    pub ratio: f64,
    pub interval: Option<Interval>,
    pub change: Change,
    /// Where not judged: why a value has no interval (`why_none`), where
    /// the caller knows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<&'static str>,
}

impl RatioJudgement {
    /// The verdict in words; "not judged" with why, where known.
    pub fn words(&self) -> String {
        match (self.change, self.why) {
            (Change::NotJudged, Some(why)) => format!("not judged ({why})"),
            (c, _) => c.words().to_string(),
        }
    }
}

/// Judges B/A of one figure; `noise` is the threshold (0.05: ratios within
/// 5% of 1 are never called a change).
pub fn judge_ratio(
    figure: &str,
    a: (f64, Option<Interval>),
    b: (f64, Option<Interval>),
    noise: f64,
) -> Option<RatioJudgement> {
    if a.0 <= 0.0 || !a.0.is_finite() || !b.0.is_finite() {
        return None;
    }
    let ratio = b.0 / a.0;
    let interval = match (a.1, b.1) {
        // A's interval reaching 0 (a t interval clamped there) leaves B/A
        // unbounded above, which is what it says, rather than unjudged.
        (Some(ia), Some(ib)) if ia.hi > 0.0 => Some(Interval {
            lo: ib.lo / ia.hi,
            hi: if ia.lo > 0.0 {
                ib.hi / ia.lo
            } else {
                f64::INFINITY
            },
        }),
        _ => None,
    };
    let change = match interval {
        None => Change::NotJudged,
        Some(i) if i.lo <= 1.0 && 1.0 <= i.hi => Change::NoDifference,
        Some(_) if (ratio - 1.0).abs() <= noise => Change::WithinNoise,
        Some(_) => {
            if (ratio > 1.0) != lower_is_better(figure) {
                Change::Better
            } else {
                Change::Worse
            }
        }
    };
    Some(RatioJudgement {
        ratio,
        interval,
        change,
        why: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1..=n as a histogram of one sample per value.
    fn uniform(n: u64) -> Vec<(f64, u64)> {
        (1..=n).map(|v| (v as f64, 1)).collect()
    }

    #[test]
    fn quantile_interval_brackets_the_rank_by_the_binomial_spread() {
        // n = 10000, q = 0.5: spread 1.96 * 50 = 98 ranks each side.
        let i = quantile_interval(&uniform(10_000), 0.5).unwrap();
        assert_eq!(i.lo, 4902.0);
        assert_eq!(i.hi, 5099.0);
        // The tail is narrower in ranks: q = 0.99, spread 1.96 * 9.95 = 19.5.
        let i = quantile_interval(&uniform(10_000), 0.99).unwrap();
        assert_eq!((i.lo, i.hi), (9880.0, 9921.0));
        assert!(quantile_interval(&uniform(19), 0.5).is_none());
        // Ranks past the ends clamp to the extremes.
        let i = quantile_interval(&uniform(20), 0.999).unwrap();
        assert_eq!(i.hi, 20.0);
    }

    #[test]
    fn quantile_interval_covers_the_true_median_about_95_percent_of_the_time() {
        // Exponential samples (median ln 2) from a fixed LCG, 400 trials.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut uniform01 = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        let truth = std::f64::consts::LN_2;
        let mut covered = 0;
        for _ in 0..400 {
            let mut v: Vec<f64> = (0..301).map(|_| -uniform01().ln()).collect();
            v.sort_by(f64::total_cmp);
            let h: Vec<(f64, u64)> = v.iter().map(|&x| (x, 1)).collect();
            let i = quantile_interval(&h, 0.5).unwrap();
            if i.lo <= truth && truth <= i.hi {
                covered += 1;
            }
        }
        // 95% nominal; 400 trials put 380 ± 9 (1 sd): refuse below 90% or at 100%.
        assert!((360..400).contains(&covered), "covered {covered} of 400");
    }

    #[test]
    fn repeated_interval_is_a_t_interval_around_the_center() {
        let i = repeated_interval(&[9.0, 10.0, 11.0], 10.0).unwrap();
        // sd 1, t(2) = 4.303, /sqrt(3).
        assert!((i.hi - 10.0 - 4.303 / 3f64.sqrt()).abs() < 1e-9);
        assert!(repeated_interval(&[1.0, 2.0], 1.5).is_none());
        assert_eq!(
            repeated_interval(&[5.0, 5.0, 5.0], 5.0).unwrap(),
            Interval { lo: 5.0, hi: 5.0 }
        );
    }

    #[test]
    fn ratios_are_called_only_where_the_interval_excludes_one_beyond_noise() {
        let iv = |lo, hi| Some(Interval { lo, hi });
        let j = |fig, a, b| judge_ratio(fig, a, b, 0.05).unwrap().change;
        // Overlapping: no difference.
        assert_eq!(
            j("mops", (10.0, iv(9.0, 11.0)), (10.5, iv(9.5, 11.5))),
            Change::NoDifference
        );
        // Clearly apart, higher Mops: better; higher latency: worse.
        assert_eq!(
            j("mops", (10.0, iv(9.9, 10.1)), (12.0, iv(11.9, 12.1))),
            Change::Better
        );
        assert_eq!(
            j("p50_ns", (10.0, iv(9.9, 10.1)), (12.0, iv(11.9, 12.1))),
            Change::Worse
        );
        // Apart but 2% off: within noise.
        assert_eq!(
            j("mops", (10.0, iv(9.99, 10.01)), (10.2, iv(10.19, 10.21))),
            Change::WithinNoise
        );
        assert_eq!(
            j("mops", (10.0, None), (12.0, iv(1.0, 2.0))),
            Change::NotJudged
        );
        let r = judge_ratio("mops", (10.0, iv(8.0, 12.0)), (20.0, iv(18.0, 22.0)), 0.05).unwrap();
        assert_eq!(r.ratio, 2.0);
        assert_eq!(r.interval, iv(1.5, 22.0 / 8.0));
        assert!(judge_ratio("mops", (0.0, None), (1.0, None), 0.05).is_none());
        // A's interval down to 0: B/A has no upper end, and is judged.
        let r = judge_ratio("mops", (1.0, iv(0.0, 2.0)), (1.5, iv(1.0, 2.0)), 0.05).unwrap();
        assert_eq!(r.interval, iv(0.5, f64::INFINITY));
        assert_eq!(r.change, Change::NoDifference);
        let r = judge_ratio("mops", (1.0, iv(0.0, 2.0)), (5.0, iv(4.0, 6.0)), 0.05).unwrap();
        assert_eq!(r.change, Change::Better);
    }

    fn pass(i: u32, mops: f64, intervals: &[f64]) -> Record {
        let mut t = crate::results::TputRecord::example();
        t.series = Some(super::super::passes::label("W", i, 3));
        t.mops = mops;
        t.live.intervals = intervals
            .iter()
            .map(|&m| crate::report::IntervalFigure {
                mops: m,
                elapsed_s: 0.1,
                ..Default::default()
            })
            .collect();
        Record::Throughput(t)
    }

    #[test]
    fn a_folded_points_interval_is_the_t_interval_over_its_passes() {
        // Passes without intervals of their own: the t interval of 9, 10, 11.
        let folded = super::super::passes::fold(vec![
            pass(1, 9.0, &[]),
            pass(2, 10.0, &[]),
            pass(3, 11.0, &[]),
        ]);
        let i = of_record(&folded[0], "mops").unwrap();
        let half = 4.303 / 3f64.sqrt();
        assert!(
            (i.lo - (10.0 - half)).abs() < 1e-9 && (i.hi - (10.0 + half)).abs() < 1e-9,
            "{i:?}"
        );
    }

    #[test]
    fn a_pass_with_a_wide_interval_widens_the_hull() {
        // Three alike passes: the t interval is nothing, so the passes' own
        // intervals, pooled, are the point's.
        let tight = super::super::passes::fold(vec![
            pass(1, 10.0, &[9.9, 10.0, 10.1]),
            pass(2, 10.0, &[9.9, 10.0, 10.1]),
            pass(3, 10.0, &[9.9, 10.0, 10.1]),
        ]);
        let wide = super::super::passes::fold(vec![
            pass(1, 10.0, &[9.9, 10.0, 10.1]),
            pass(2, 10.0, &[9.9, 10.0, 10.1]),
            pass(3, 10.0, &[5.0, 10.0, 15.0]),
        ]);
        let t = of_record(&tight[0], "mops").unwrap();
        let w = of_record(&wide[0], "mops").unwrap();
        let own = of_record(&pass(1, 10.0, &[9.9, 10.0, 10.1]), "mops").unwrap();
        assert!((t.lo - own.lo).abs() < 1e-9 && (t.hi - own.hi).abs() < 1e-9);
        assert!(w.lo < t.lo - 1.0 && w.hi > t.hi + 1.0, "{w:?} vs {t:?}");
    }

    #[test]
    fn a_minimum_and_a_cpu_cost_get_an_interval_from_passes_and_one_pass_says_why() {
        let lat = |i: u32, min: f64| {
            let mut l = crate::results::LatencyRecord::example();
            l.series = Some(super::super::passes::label("W", i, 3));
            l.stats.min_ns = min;
            Record::Latency(l)
        };
        let folded =
            super::super::passes::fold(vec![lat(1, 900.0), lat(2, 1000.0), lat(3, 1100.0)]);
        // Around the smallest minimum, the t interval of 900, 1000, 1100.
        let i = of_record(&folded[0], "min_ns").unwrap();
        let half = 100.0 * 4.303 / 3f64.sqrt();
        assert!((i.lo - (900.0 - half)).abs() < 1e-9, "{i:?}");
        assert!((i.hi - (900.0 + half)).abs() < 1e-9, "{i:?}");
        assert_eq!(why_none(&folded[0], "min_ns"), None);

        let cpu = |i: u32, c: f64| {
            let Record::Throughput(mut t) = pass(i, 10.0, &[]) else {
                unreachable!()
            };
            t.cpu_util = Some(crate::results::CpuUtil {
                local_cpu_s_per_mop: Some(c),
                ..Default::default()
            });
            Record::Throughput(t)
        };
        let folded = super::super::passes::fold(vec![cpu(1, 0.9), cpu(2, 1.0), cpu(3, 1.1)]);
        for figure in ["cpu_util.local_cpu_s_per_mop", "cpu_s_per_mop"] {
            let i = of_record(&folded[0], figure).unwrap();
            assert!((i.lo - (1.0 - half / 1000.0)).abs() < 1e-9, "{i:?}");
        }

        // One pass: no interval, and why.
        let Record::Throughput(mut one) = cpu(1, 1.0) else {
            unreachable!()
        };
        one.series = Some("W".into());
        let one = Record::Throughput(one);
        assert_eq!(of_record(&one, "cpu_s_per_mop"), None);
        assert_eq!(
            why_none(&one, "cpu_s_per_mop"),
            Some("one pass: no interval")
        );
        assert_eq!(
            why_none(&lat(1, 900.0), "min_ns"),
            Some("one pass: no interval")
        );
        assert_eq!(
            why_none(&one, "mops"),
            Some("fewer than 3 --interval figures")
        );
        let j = judge_ratio("min_ns", (1.0, None), (1.0, None), 0.05).unwrap();
        let j = RatioJudgement {
            why: why_none(&one, "cpu_s_per_mop"),
            ..j
        };
        assert_eq!(j.words(), "not judged (one pass: no interval)");
    }
}
