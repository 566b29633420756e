//! The headline numbers of a profile: per latency series the p50, p99 and
//! minimum at its smallest payload; per throughput series its peak Mops
//! (and, against payload size, its peak Gb/s and the CPU cost at the peak).
//! Each names the series, the point, the record field and how it was
//! reduced, so anyone holding the raw records can recompute it (the page's
//! browser test does).

use serde::Serialize;

use super::figures::{Figure, Knobs, SeriesPoints};
use super::uncertainty::{self, Interval};
use crate::results::Record;

#[derive(Debug, Clone, Serialize)]
pub struct Headline {
    /// Unique within a profile; the same figure of the same series in two
    /// profiles has the same key.
    pub key: String,
    pub label: String,
    pub series: String,
    /// `latency` or `throughput`, and a throughput series' direction: with
    /// `series`, which records the headline is read from.
    pub kind: &'static str,
    pub direction: Option<String>,
    /// The experiment of the files the records are in ("" where none).
    pub experiment: String,
    /// The point's payload size for `at`; `None` for `max` over the series.
    pub size: Option<u32>,
    /// The record field, a dotted path for nested ones.
    pub field: &'static str,
    /// `at` (the one record of that series and size) or `max` (over the series).
    pub reduce: &'static str,
    /// What the field is multiplied by for the unit shown.
    pub scale: f64,
    pub unit: &'static str,
    /// Decimals shown.
    pub digits: usize,
    /// The value in `unit`.
    pub value: f64,
    /// Its 95% interval in `unit`, where the record allows one.
    pub interval: Option<Interval>,
    /// Where it has none, why (`uncertainty::why_none`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why_none: Option<&'static str>,
}

impl Headline {
    /// The value as the page shows it.
    pub fn shown(&self) -> String {
        format!("{:.*} {}", self.digits, self.value, self.unit)
    }
}

/// Decimals that show at least three significant digits.
fn digits_for(v: f64) -> usize {
    if v <= 0.0 || !v.is_finite() {
        return 2;
    }
    (2 - v.log10().floor() as i64).clamp(0, 6) as usize
}

/// A profile's headlines; where its files hold several experiments, each
/// label starts with its experiment's name.
pub fn of_profile(series: &[SeriesPoints]) -> Vec<Headline> {
    let mut out = Vec::new();
    for s in series {
        match s.figure {
            Some(Figure::Latency) => latency(s, &mut out),
            Some(Figure::TputSize(_)) => {
                if let Some(peak) = peak(s, "mops", &mut out) {
                    peak_gbps_and_cpu(s, peak, &mut out);
                }
            }
            Some(Figure::TputQps(_) | Figure::Signal | Figure::Postlist) => {
                peak(s, "mops", &mut out);
            }
            _ => {}
        }
    }
    let first = series.first().map(|s| s.experiment.as_str());
    if series.iter().any(|s| Some(s.experiment.as_str()) != first) {
        for h in &mut out {
            if !h.experiment.is_empty() {
                h.label = format!("{}: {}", h.experiment, h.label);
            }
        }
    }
    out
}

fn push(out: &mut Vec<Headline>, mut h: Headline, r: &Record) {
    h.interval = uncertainty::of_record(r, h.field).map(|i| Interval {
        lo: i.lo * h.scale,
        hi: i.hi * h.scale,
    });
    h.why_none = uncertainty::why_none(r, h.field);
    h.digits = digits_for(h.value);
    out.push(h);
}

fn latency(s: &SeriesPoints, out: &mut Vec<Headline>) {
    let Some(r) = s.records.iter().min_by_key(|r| size_of(r)) else {
        return;
    };
    let Record::Latency(l) = r else { return };
    for (field, name, v) in [
        ("p50_ns", "p50", l.stats.p50_ns),
        ("p99_ns", "p99", l.stats.p99_ns),
        ("min_ns", "min", l.stats.min_ns),
    ] {
        let h = Headline {
            key: format!("{}|{field}|at", s.key()),
            label: format!(
                "{} {} B, {name} {}",
                s.series,
                l.size,
                metric_name(&l.metric)
            ),
            series: s.series.clone(),
            kind: s.kind,
            direction: s.direction.clone(),
            experiment: s.experiment.clone(),
            size: Some(l.size),
            field,
            reduce: "at",
            scale: 0.001,
            unit: "µs",
            digits: 0,
            value: v / 1000.0,
            interval: None,
            why_none: None,
        };
        push(out, h, r);
    }
}

fn metric_name(metric: &str) -> &str {
    match metric {
        "half_rtt" => "half-RTT",
        other => other,
    }
}

fn size_of(r: &Record) -> u32 {
    Knobs::of(r).size
}

/// The series' peak of a throughput field; returns the record it came from.
fn peak<'a>(
    s: &SeriesPoints<'a>,
    field: &'static str,
    out: &mut Vec<Headline>,
) -> Option<&'a Record> {
    let value = |r: &Record| match r {
        Record::Throughput(t) if field == "gbps" => Some(t.gbps),
        Record::Throughput(t) => Some(t.mops),
        _ => None,
    };
    let (r, v) = s
        .records
        .iter()
        .filter_map(|r| value(r).map(|v| (*r, v)))
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    let (unit, what) = if field == "gbps" {
        ("Gb/s", "peak Gb/s")
    } else {
        ("Mops", "peak Mops")
    };
    push(
        out,
        Headline {
            key: format!("{}|{field}|max", s.key()),
            label: format!("{}, {what}", s.series),
            series: s.series.clone(),
            kind: s.kind,
            direction: s.direction.clone(),
            experiment: s.experiment.clone(),
            size: None,
            field,
            reduce: "max",
            scale: 1.0,
            unit,
            digits: 0,
            value: v,
            interval: None,
            why_none: None,
        },
        r,
    );
    Some(r)
}

fn peak_gbps_and_cpu(s: &SeriesPoints, at_peak: &Record, out: &mut Vec<Headline>) {
    peak(s, "gbps", out);
    let Record::Throughput(t) = at_peak else {
        return;
    };
    let same_size = s.records.iter().filter(|r| size_of(r) == t.size).count();
    let cpu = t.cpu_util.as_ref().and_then(|c| c.local_cpu_s_per_mop);
    if let (1, Some(c)) = (same_size, cpu) {
        push(
            out,
            Headline {
                key: format!("{}|cpu_util.local_cpu_s_per_mop|at", s.key()),
                label: format!("{} {} B, CPU cost at the peak", s.series, t.size),
                series: s.series.clone(),
                kind: s.kind,
                direction: s.direction.clone(),
                experiment: s.experiment.clone(),
                size: Some(t.size),
                field: "cpu_util.local_cpu_s_per_mop",
                reduce: "at",
                scale: 1.0,
                unit: "cpu-s/Mop",
                digits: 0,
                value: c,
                interval: None,
                why_none: None,
            },
            at_peak,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::figures::by_series;
    use crate::results::{LatencyRecord, TputRecord};

    #[test]
    fn headlines_name_the_point_they_come_from() {
        let mut recs = Vec::new();
        for (size, p50) in [(64, 3000.0), (8, 2000.0)] {
            let mut l = LatencyRecord::example();
            l.series = Some("WRITE".into());
            l.size = size;
            l.stats.p50_ns = p50;
            recs.push(Record::Latency(l));
        }
        for (size, mops) in [(64, 0.5), (1024, 0.4)] {
            let mut t = TputRecord::example();
            t.series = Some("SEND".into());
            t.size = size;
            t.mops = mops;
            t.gbps = mops * size as f64 * 8.0 / 1000.0;
            recs.push(Record::Throughput(t));
        }
        let h = of_profile(&by_series(&recs));
        let p50 = h
            .iter()
            .find(|h| h.key == "|latency|WRITE|p50_ns|at")
            .unwrap();
        assert_eq!((p50.size, p50.value), (Some(8), 2.0));
        assert_eq!(p50.shown(), "2.00 µs");
        let mops = h
            .iter()
            .find(|h| h.key == "|throughput inbound|SEND|mops|max")
            .unwrap();
        assert_eq!(mops.value, 0.5);
        let gbps = h
            .iter()
            .find(|h| h.key == "|throughput inbound|SEND|gbps|max")
            .unwrap();
        assert!((gbps.value - 3.2768).abs() < 1e-9);
        assert_eq!(gbps.shown(), "3.28 Gb/s");
    }
}
