//! What the data shows that a reader should look at, each with the rule
//! that found it: cliffs (a step of a swept knob where throughput falls, or
//! latency rises, by more than a threshold), points whose 95% interval is
//! too wide to trust, and device counters of errors and retries that grew
//! during a point.

use serde::Serialize;

use super::figures::{Figure, Knobs, SeriesPoints};
use super::uncertainty;
use crate::results::Record;

/// The thresholds of the rules, as fractions.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    /// A step losing more than this share of throughput (or latency rising
    /// by more than it) is a cliff.
    pub cliff: f64,
    /// A point whose interval is wider than ± this share of its value is
    /// too wide to trust.
    pub spread: f64,
}

impl Default for Rules {
    fn default() -> Self {
        Rules {
            cliff: 0.25,
            spread: 0.10,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Cliff,
    Spread,
    Counter,
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub kind: Kind,
    pub series: String,
    pub what: String,
    pub rule: String,
}

/// Starts of the `_`-separated words of a device counter's name that mark
/// an error, a retry or a loss (`rnr_nak_retry_err`, `out_of_sequence`,
/// `duplicate_request`; not `ack_deferred`).
const TROUBLE: &[&str] = &[
    "retr", "rnr", "seq", "dup", "timeout", "nak", "err", "drop", "discard",
];

fn is_trouble(counter: &str) -> bool {
    counter
        .split('_')
        .any(|word| TROUBLE.iter().any(|t| word.starts_with(t)))
}

pub fn find(series: &[SeriesPoints], rules: &Rules) -> Vec<Finding> {
    let mut out = Vec::new();
    for s in series {
        let Some(figure) = s.figure else { continue };
        if let Some(line) = line(figure, s) {
            cliffs(Along::Figure(figure), &line, rules, &mut out);
        }
        spread(figure, s, rules, &mut out);
        counters(s, &mut out);
    }
    for line in region_lines(series) {
        cliffs(Along::Region, &line, rules, &mut out);
    }
    out
}

/// A line's points: its x, the record and the series it is in.
type Line<'a> = Vec<(f64, &'a Record, &'a str)>;

/// The knob a line runs along: its figure's x, or (NIC cache) region size.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Along {
    Figure(Figure),
    Region,
}

/// A series' points along its x knob. A NIC-cache series is a line along
/// QPs where it sweeps them at one region size; region size is a line of
/// its own across series (`region_lines`). Under-load series make none:
/// their rise is the figure's point.
fn line<'a>(figure: Figure, s: &'a SeriesPoints<'a>) -> Option<Line<'a>> {
    let x = |r: &Record| {
        let k = Knobs::of(r);
        match figure {
            Figure::NicCache => k.qps.into(),
            _ => figure.x(&k),
        }
    };
    if figure == Figure::UnderLoad {
        return None;
    }
    let region = |r: &&Record| Knobs::of(r).region;
    let first = s.records.first().map(region);
    if figure == Figure::NicCache && s.records.iter().any(|r| Some(region(r)) != first) {
        return None;
    }
    let mut pts: Line = s
        .records
        .iter()
        .map(|r| (x(r), *r, s.series.as_str()))
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    (pts.len() >= 2).then_some(pts)
}

/// Everything a NIC-cache throughput point was measured with but its region
/// size (and its label): the knobs `Knobs::of` reads, and the rest of the
/// record's knob fields (verb, posting, path, memory layout, window, ...),
/// so only points that differ in region alone share it.
fn apart_from_region(r: &Record) -> Option<String> {
    let Record::Throughput(t) = r else {
        return None;
    };
    let mut k = Knobs::of(r);
    k.region = None;
    let mut memory = t.memory.clone();
    memory.region = None;
    Some(format!(
        "{k:?}|{}|{}|{:?}|{:?}|{:?}|{:?}|{}|{}|{memory:?}|{}|{}|{}|{:?}|{}|{:?}|{}",
        t.verb,
        t.transport,
        t.posting,
        t.req,
        t.resp,
        t.path,
        t.bidirectional,
        t.srq,
        t.connection,
        t.window,
        t.threads,
        t.offered_mops,
        t.rate_per_qp,
        t.burst,
        t.live.forever
    ))
}

/// The NIC-cache figure's lines along region size: its points (in any of
/// its series of one file's experiment, kind and direction) that differ
/// only in region size, ordered by it. In the built-in profile each region
/// size is a series of one point, so only these lines see a cliff there. A
/// point measured twice at one region size (in two series) keeps its first.
fn region_lines<'a>(series: &'a [SeriesPoints<'a>]) -> Vec<Line<'a>> {
    let mut groups: Vec<(String, Line<'a>)> = Vec::new();
    for s in series.iter().filter(|s| s.figure == Some(Figure::NicCache)) {
        for r in &s.records {
            let (Some(rest), Some(region)) = (apart_from_region(r), Knobs::of(r).region) else {
                continue;
            };
            let key = format!("{}|{:?}|{rest}", s.experiment, s.direction);
            let x = region as f64;
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, line)) if line.iter().any(|p| p.0 == x) => {}
                Some((_, line)) => line.push((x, *r, s.series.as_str())),
                None => groups.push((key, vec![(x, *r, s.series.as_str())])),
            }
        }
    }
    groups
        .into_iter()
        .filter(|(_, line)| line.len() >= 2)
        .map(|(_, mut line)| {
            line.sort_by(|a, b| a.0.total_cmp(&b.0));
            line
        })
        .collect()
}

/// Bytes as the profile writes region sizes: 4 KiB, 1 MiB, 64 MiB.
fn bytes_text(b: f64) -> String {
    let b = b as u64;
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if b >= 1 << shift && b % (1 << shift) == 0 {
            return format!("{} {unit}", b >> shift);
        }
    }
    format!("{b} B")
}

/// The y a cliff is judged on and its name: p50 latency, Gb/s against
/// payload size (Mops fall there by design), else Mops.
fn judged(figure: Figure, r: &Record) -> Option<(f64, &'static str)> {
    match (figure, r) {
        (Figure::Latency, Record::Latency(l)) => Some((l.stats.p50_ns, "p50 latency")),
        (Figure::TputSize(_), Record::Throughput(t)) => Some((t.gbps, "Gb/s")),
        (_, Record::Throughput(t)) => Some((t.mops, "Mops")),
        _ => None,
    }
}

fn knob_text(along: Along, x: f64) -> String {
    let Along::Figure(figure) = along else {
        return bytes_text(x);
    };
    match figure {
        Figure::Latency | Figure::TputSize(_) => format!("{x} B"),
        Figure::TputQps(_) | Figure::NicCache => format!("{x} QPs"),
        Figure::Signal => format!("S={x}"),
        Figure::Postlist => format!("postlist {x}"),
        Figure::UnderLoad => x.to_string(),
    }
}

/// Where a point sits on its figure; a NIC-cache point by its region and QPs.
fn point_text(figure: Figure, r: &Record) -> String {
    let k = Knobs::of(r);
    match (figure, k.region) {
        (Figure::NicCache, Some(region)) => format!("a {region} B region, {} QPs", k.qps),
        _ => knob_text(Along::Figure(figure), figure.x(&k)),
    }
}

fn cliffs(along: Along, line: &[(f64, &Record, &str)], rules: &Rules, out: &mut Vec<Finding>) {
    let pct = rules.cliff * 100.0;
    let figure = match along {
        Along::Figure(f) => f,
        Along::Region => Figure::NicCache,
    };
    for w in line.windows(2) {
        let ((xa, ra, sa), (xb, rb, sb)) = (w[0], w[1]);
        let (Some((ya, name)), Some((yb, _))) = (judged(figure, ra), judged(figure, rb)) else {
            continue;
        };
        if ya <= 0.0 || xa <= 0.0 {
            continue;
        }
        // A region line's step joins two series: both are named.
        let series = if sa == sb {
            sa.to_string()
        } else {
            format!("{sa} → {sb}")
        };
        let step = match along {
            Along::Region => format!(
                "as region size grows from {} to {}",
                knob_text(along, xa),
                knob_text(along, xb)
            ),
            Along::Figure(_) => {
                format!("from {} to {}", knob_text(along, xa), knob_text(along, xb))
            }
        };
        if figure == Figure::Latency {
            let rise = yb / ya;
            if rise > 1.0 + rules.cliff && rise > xb / xa {
                out.push(Finding {
                    kind: Kind::Cliff,
                    series,
                    what: format!(
                        "{name} rises {:.0}% {step} ({:.2} to {:.2} µs), more than the payload grew",
                        (rise - 1.0) * 100.0,
                        ya / 1000.0,
                        yb / 1000.0
                    ),
                    rule: format!(
                        "a step of payload size where latency rises by more than {pct:.0}% and by more than the payload grows"
                    ),
                });
            }
        } else {
            let fall = 1.0 - yb / ya;
            if fall > rules.cliff {
                let rule = match along {
                    Along::Region => format!(
                        "a step of region size, between NIC-cache points alike in all else, where {name} falls by more than {pct:.0}%"
                    ),
                    Along::Figure(_) => format!(
                        "a step of the swept knob where {name} falls by more than {pct:.0}%"
                    ),
                };
                out.push(Finding {
                    kind: Kind::Cliff,
                    series,
                    what: format!(
                        "{name} falls {:.0}% {step} ({ya:.4} to {yb:.4})",
                        fall * 100.0
                    ),
                    rule,
                });
            }
        }
    }
}

fn spread(figure: Figure, s: &SeriesPoints, rules: &Rules, out: &mut Vec<Finding>) {
    for r in &s.records {
        let (field, value) = match r {
            Record::Latency(l) => ("p50_ns", l.stats.p50_ns),
            Record::Throughput(t) => ("mops", t.mops),
        };
        let Some(i) = uncertainty::of_record(r, field) else {
            continue;
        };
        let half = i.relative_half_width(value);
        if half > rules.spread {
            let (scale, unit) = if field == "p50_ns" {
                (1e-3, " µs")
            } else {
                (1.0, " Mops")
            };
            out.push(Finding {
                kind: Kind::Spread,
                series: s.series.clone(),
                what: format!(
                    "at {}: the 95% interval of {field} is ±{:.0}% of it ({:.4} to {:.4}{unit})",
                    point_text(figure, r),
                    half * 100.0,
                    i.lo * scale,
                    i.hi * scale
                ),
                rule: format!(
                    "a point whose 95% interval ({}) is wider than ±{:.0}% of its value",
                    uncertainty::how(field).unwrap_or("-"),
                    rules.spread * 100.0
                ),
            });
        }
    }
}

fn counters(s: &SeriesPoints, out: &mut Vec<Finding>) {
    let mut grew: Vec<(String, u64, usize)> = Vec::new();
    for r in &s.records {
        let deltas = match r {
            Record::Latency(l) => l.device_counters.as_ref(),
            Record::Throughput(t) => t.device_counters.as_ref(),
        };
        for (name, &d) in deltas.into_iter().flatten() {
            if d == 0 || !is_trouble(name) {
                continue;
            }
            match grew.iter_mut().find(|(n, _, _)| n == name) {
                Some(g) => {
                    g.1 += d;
                    g.2 += 1;
                }
                None => grew.push((name.clone(), d, 1)),
            }
        }
    }
    for (name, total, points) in grew {
        out.push(Finding {
            kind: Kind::Counter,
            series: s.series.clone(),
            what: format!("device counter {name} grew by {total} over {points} of {} points", s.records.len()),
            rule: format!(
                "a device counter whose name says error, retry, RNR, sequence, duplicate, NAK, timeout or drop ({}) grew during a point",
                TROUBLE.join(", ")
            ),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::figures::by_series;
    use crate::results::{Record, TputRecord};

    fn point(qps: u32, mops: f64) -> Record {
        let mut t = TputRecord::example();
        t.series = Some("WRITE outbound".into());
        t.qps = qps;
        t.threads = 1;
        t.mops = mops;
        Record::Throughput(t)
    }

    #[test]
    fn a_known_drop_is_a_cliff_and_a_flat_curve_is_none() {
        let steep = [point(1, 1.0), point(2, 1.0), point(4, 0.98), point(8, 0.5)];
        let found = find(&by_series(&steep), &Rules::default());
        let cliffs: Vec<_> = found.iter().filter(|f| f.kind == Kind::Cliff).collect();
        assert_eq!(cliffs.len(), 1, "{found:?}");
        assert!(
            cliffs[0].what.contains("from 4 QPs to 8 QPs"),
            "{}",
            cliffs[0].what
        );
        assert!(cliffs[0].rule.contains("25%"));
        let flat = [point(1, 1.0), point(2, 0.9), point(4, 0.8), point(8, 0.78)];
        assert!(find(&by_series(&flat), &Rules::default())
            .iter()
            .all(|f| f.kind != Kind::Cliff));
    }

    /// A NIC-cache point: its own one-point series, as in the built-in profile.
    fn cached(region: u64, offsets: &str, mops: f64) -> Record {
        let Record::Throughput(mut t) = point(4, mops) else {
            unreachable!()
        };
        t.series = Some(format!("{offsets} offsets, {region} B region"));
        t.memory.region = Some(region);
        t.memory.offsets = offsets.into();
        Record::Throughput(t)
    }

    #[test]
    fn a_drop_across_region_sizes_is_a_cliff_between_series_alike_in_all_else() {
        let steep = [
            cached(4 << 10, "random", 1.0),
            cached(1 << 20, "random", 0.95),
            cached(64 << 20, "random", 0.4),
            // Other offsets: a line of their own, which is flat.
            cached(4 << 10, "fixed", 1.0),
            cached(64 << 20, "fixed", 0.9),
        ];
        let found = find(&by_series(&steep), &Rules::default());
        let cliffs: Vec<_> = found.iter().filter(|f| f.kind == Kind::Cliff).collect();
        assert_eq!(cliffs.len(), 1, "{found:?}");
        assert!(
            cliffs[0]
                .what
                .contains("falls 58% as region size grows from 1 MiB to 64 MiB"),
            "{}",
            cliffs[0].what
        );
        assert_eq!(
            cliffs[0].series,
            "random offsets, 1048576 B region → random offsets, 67108864 B region"
        );
        assert!(cliffs[0].rule.contains("a step of region size"));
        let flat = [
            cached(4 << 10, "random", 1.0),
            cached(1 << 20, "random", 0.9),
            cached(64 << 20, "random", 0.8),
        ];
        assert!(find(&by_series(&flat), &Rules::default())
            .iter()
            .all(|f| f.kind != Kind::Cliff));
    }

    #[test]
    fn error_counters_that_grew_are_named_and_others_are_not() {
        let mut a = point(1, 1.0);
        if let Record::Throughput(t) = &mut a {
            t.device_counters = Some(
                [
                    ("rnr_nak_retry_err".to_string(), 3),
                    ("sent_pkts".to_string(), 99),
                    ("ack_deferred".to_string(), 5),
                ]
                .into_iter()
                .collect(),
            );
        }
        let found = find(&by_series(&[a]), &Rules::default());
        let c: Vec<_> = found.iter().filter(|f| f.kind == Kind::Counter).collect();
        assert_eq!(c.len(), 1);
        assert!(c[0].what.contains("rnr_nak_retry_err grew by 3"));
    }
}
