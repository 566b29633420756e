//! Passes: `profile` measures each point K times (`passes = K`), as series
//! `LABEL [pass i/K]` spread over the run, so that what drifts between
//! moments of a run shows in the point's interval. `report` and `compare`
//! fold a point's passes back into one record, which is what they draw,
//! match and sum up; `uncertainty::of_record` sees the passes the record
//! keeps (`passes`) and makes its interval from them.
//!
//! What a folded record holds, field by field:
//! - `series`: the label without its `[pass i/K]`;
//! - the figures: latency `p50_ns` … `p9999_ns`, `mean_ns`, `stdev_ns`,
//!   `rtt_p50_ns`, `rtt_mean_ns`; throughput `mops`, `gbps`, `mib_s`,
//!   `aggregate_mops`: the mean of the passes' values. Latency `min_ns` is
//!   the smallest pass minimum, `max_ns` the largest maximum;
//! - counts and times (`iters`, `samples`, `sent`, `elapsed_s`, `ops`,
//!   `completions`, `received`, `lost`, `responses`, ...): the passes' sums,
//!   and `device_counters` each counter's sum;
//! - the latency `histogram`: the passes' histograms merged (so a CDF
//!   drawn from it holds every sample);
//! - `cpu_util`'s per-op and per-CPU shares: the mean of the passes';
//! - everything else (the knobs, `per_thread`, `per_qp_ops`, `clients`,
//!   `directions`, the `--interval` list and its extremes, checks): pass 1's,
//!   or the first pass present in the file.

use super::figures::{kind_of, Knobs};
use crate::results::{CpuUtil, LatencyRecord, Record, TputRecord};

/// The series label of pass `i` of `k`; a single pass keeps the label.
pub fn label(base: &str, i: u32, k: u32) -> String {
    if k <= 1 {
        base.to_string()
    } else {
        format!("{base} [pass {i}/{k}]")
    }
}

/// A pass series' label as (base label, i, k).
pub fn parse(label: &str) -> Option<(&str, u32, u32)> {
    let rest = label.strip_suffix(']')?;
    let at = rest.rfind(" [pass ")?;
    let (i, k) = rest[at + " [pass ".len()..].split_once('/')?;
    let (i, k): (u32, u32) = (i.parse().ok()?, k.parse().ok()?);
    (k > 1 && (1..=k).contains(&i)).then_some((&label[..at], i, k))
}

/// The base label of a record's series, if it is a pass.
fn base_of(r: &Record) -> Option<String> {
    let series = match r {
        Record::Latency(l) => l.series.as_deref(),
        Record::Throughput(t) => t.series.as_deref(),
    }?;
    parse(series).map(|(b, _, _)| b.to_string())
}

/// What makes two passes the same point: the base label, the record kind
/// and direction, the knobs the figures sweep, and a latency point's load.
fn point_of(r: &Record, base: &str) -> String {
    let load = match r {
        Record::Latency(l) => format!("{} {:?}", l.metric, l.load),
        Record::Throughput(_) => String::new(),
    };
    format!("{base}|{:?}|{:?}|{load}", kind_of(r), Knobs::of(r))
}

/// The records with each point's passes folded into one record, in the
/// place of its first pass; records that are no pass are kept as they are.
pub fn fold(records: Vec<Record>) -> Vec<Record> {
    if !records.iter().any(|r| base_of(r).is_some()) {
        return records;
    }
    // Each place in the output: a record kept, or the point of group g.
    let mut places: Vec<Result<Record, usize>> = Vec::new();
    let mut groups: Vec<(String, Vec<Record>)> = Vec::new();
    for r in records {
        let Some(base) = base_of(&r) else {
            places.push(Ok(r));
            continue;
        };
        let key = point_of(&r, &base);
        match groups.iter_mut().position(|(k, _)| *k == key) {
            Some(g) => groups[g].1.push(r),
            None => {
                places.push(Err(groups.len()));
                groups.push((key, vec![r]));
            }
        }
    }
    let mut folded: Vec<Option<Record>> = groups
        .into_iter()
        .map(|(_, passes)| Some(fold_point(passes)))
        .collect();
    places
        .into_iter()
        .filter_map(|p| match p {
            Ok(r) => Some(r),
            Err(g) => folded[g].take(),
        })
        .collect()
}

/// A results document with its passes folded (`fold`).
pub fn fold_doc(doc: &crate::results::ResultsDoc) -> crate::results::ResultsDoc {
    let mut d = doc.clone();
    d.results = fold(std::mem::take(&mut d.results));
    d
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

/// The mean where every pass has the value, else pass 1's.
fn mean_opt(first: Option<f64>, values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let all: Option<Vec<f64>> = values.collect();
    all.map(|v| mean(v.into_iter())).or(first)
}

fn sum_opt(values: impl Iterator<Item = Option<u64>>) -> Option<u64> {
    values.sum()
}

fn counters<'a>(
    all: impl Iterator<Item = &'a Option<crate::report::CounterDeltas>>,
) -> Option<crate::report::CounterDeltas> {
    let mut out: Option<crate::report::CounterDeltas> = None;
    for c in all.flatten() {
        let sum = out.get_or_insert_with(Default::default);
        for (name, v) in c {
            *sum.entry(name.clone()).or_default() += v;
        }
    }
    out
}

fn cpu<'a>(
    first: &Option<CpuUtil>,
    all: impl Iterator<Item = &'a Option<CpuUtil>> + Clone,
) -> Option<CpuUtil> {
    let mut c = first.clone()?;
    let field = |f: fn(&CpuUtil) -> Option<f64>| {
        mean_opt(
            first.as_ref().and_then(f),
            all.clone().map(|u| u.as_ref().and_then(f)),
        )
    };
    c.local_pct = field(|u| u.local_pct);
    c.local_process_pct = field(|u| u.local_process_pct);
    c.peer_pct = field(|u| u.peer_pct);
    c.peer_process_pct = field(|u| u.peer_process_pct);
    c.local_cpu_s_per_mop = field(|u| u.local_cpu_s_per_mop);
    c.peer_cpu_s_per_mop = field(|u| u.peer_cpu_s_per_mop);
    c.window_s = all.clone().flatten().map(|u| u.window_s).sum();
    Some(c)
}

/// Histograms merged: each bucket value's counts summed, ascending.
fn merge_histograms<'a>(all: impl Iterator<Item = &'a Vec<(f64, u64)>>) -> Vec<(f64, u64)> {
    let mut v: Vec<(f64, u64)> = all.flatten().copied().collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(f64, u64)> = Vec::with_capacity(v.len());
    for (value, count) in v {
        match out.last_mut() {
            Some(last) if last.0 == value => last.1 += count,
            _ => out.push((value, count)),
        }
    }
    out
}

/// A pass's series label without its `[pass i/K]`.
fn strip_pass(series: &Option<String>) -> Option<String> {
    series
        .as_deref()
        .and_then(parse)
        .map(|(b, _, _)| b.to_string())
}

fn latency_of(r: &Record) -> Option<&LatencyRecord> {
    match r {
        Record::Latency(l) => Some(l),
        Record::Throughput(_) => None,
    }
}

fn tput_of(r: &Record) -> Option<&TputRecord> {
    match r {
        Record::Throughput(t) => Some(t),
        Record::Latency(_) => None,
    }
}

/// One point from its passes (at least one, all of one kind and point):
/// pass 1's record with the folded fields and the passes it came from.
fn fold_point(passes: Vec<Record>) -> Record {
    // A point's passes are all of its kind (`point_of` keys on it).
    let mut folded = match &passes[0] {
        Record::Latency(first) => {
            let ls: Vec<&LatencyRecord> = passes.iter().filter_map(latency_of).collect();
            Record::Latency(fold_latency(first.clone(), &ls))
        }
        Record::Throughput(first) => {
            let ts: Vec<&TputRecord> = passes.iter().filter_map(tput_of).collect();
            Record::Throughput(fold_throughput(first.clone(), &ts))
        }
    };
    match &mut folded {
        Record::Latency(l) => {
            l.series = strip_pass(&l.series);
            l.passes = passes;
        }
        Record::Throughput(t) => {
            t.series = strip_pass(&t.series);
            t.passes = passes;
        }
    }
    folded
}

fn fold_latency(mut f: LatencyRecord, ls: &[&LatencyRecord]) -> LatencyRecord {
    let s = &mut f.stats;
    s.min_ns = ls
        .iter()
        .map(|l| l.stats.min_ns)
        .fold(f64::INFINITY, f64::min);
    s.max_ns = ls.iter().map(|l| l.stats.max_ns).fold(0.0, f64::max);
    s.p50_ns = mean(ls.iter().map(|l| l.stats.p50_ns));
    s.p90_ns = mean(ls.iter().map(|l| l.stats.p90_ns));
    s.p99_ns = mean(ls.iter().map(|l| l.stats.p99_ns));
    s.p999_ns = mean(ls.iter().map(|l| l.stats.p999_ns));
    s.p9999_ns = mean(ls.iter().map(|l| l.stats.p9999_ns));
    s.mean_ns = mean(ls.iter().map(|l| l.stats.mean_ns));
    s.stdev_ns = mean(ls.iter().map(|l| l.stats.stdev_ns));
    s.samples = ls.iter().map(|l| l.stats.samples).sum();
    s.clamped = ls.iter().map(|l| l.stats.clamped).sum();
    f.rtt_p50_ns = mean_opt(f.rtt_p50_ns, ls.iter().map(|l| l.rtt_p50_ns));
    f.rtt_mean_ns = mean_opt(f.rtt_mean_ns, ls.iter().map(|l| l.rtt_mean_ns));
    f.iters = ls.iter().map(|l| l.iters).sum();
    f.warmup_dropped = ls.iter().map(|l| l.warmup_dropped).sum();
    f.elapsed_s = ls.iter().map(|l| l.elapsed_s).sum();
    f.sent = ls.iter().map(|l| l.sent).sum();
    f.server_received = sum_opt(ls.iter().map(|l| l.server_received));
    f.verify_failures = ls.iter().map(|l| l.verify_failures).sum();
    f.histogram = merge_histograms(ls.iter().map(|l| &l.histogram));
    f.device_counters = counters(ls.iter().map(|l| &l.device_counters));
    f.cpu_util = cpu(&f.cpu_util, ls.iter().map(|l| &l.cpu_util));
    f
}

fn fold_throughput(mut f: TputRecord, ts: &[&TputRecord]) -> TputRecord {
    f.mops = mean(ts.iter().map(|t| t.mops));
    f.gbps = mean(ts.iter().map(|t| t.gbps));
    f.mib_s = mean(ts.iter().map(|t| t.mib_s));
    f.aggregate_mops = mean_opt(f.aggregate_mops, ts.iter().map(|t| t.aggregate_mops));
    f.ops = ts.iter().map(|t| t.ops).sum();
    f.elapsed_s = ts.iter().map(|t| t.elapsed_s).sum();
    f.sent = ts.iter().map(|t| t.sent).sum();
    f.completions = ts.iter().map(|t| t.completions).sum();
    f.received = sum_opt(ts.iter().map(|t| t.received));
    f.lost = sum_opt(ts.iter().map(|t| t.lost));
    f.responses = sum_opt(ts.iter().map(|t| t.responses));
    f.verify_failures = sum_opt(ts.iter().map(|t| t.verify_failures));
    f.rate_missed = sum_opt(ts.iter().map(|t| t.rate_missed));
    f.device_counters = counters(ts.iter().map(|t| &t.device_counters));
    f.cpu_util = cpu(&f.cpu_util, ts.iter().map(|t| &t.cpu_util));
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tput(series: &str, size: u32, mops: f64) -> Record {
        Record::Throughput(TputRecord {
            series: Some(series.into()),
            size,
            mops,
            gbps: mops * 0.5,
            ops: 100,
            ..TputRecord::example()
        })
    }

    #[test]
    fn labels_round_trip_and_junk_is_no_pass() {
        assert_eq!(label("WRITE", 2, 3), "WRITE [pass 2/3]");
        assert_eq!(label("WRITE", 1, 1), "WRITE");
        assert_eq!(parse("WRITE [pass 2/3]"), Some(("WRITE", 2, 3)));
        assert_eq!(
            parse("a [pass 1/2] [pass 2/2]"),
            Some(("a [pass 1/2]", 2, 2))
        );
        for junk in [
            "WRITE",
            "WRITE [pass 4/3]",
            "WRITE [pass 1/1]",
            "W [pass x/3]",
            "W [pass 0/3]",
        ] {
            assert_eq!(parse(junk), None, "{junk}");
        }
    }

    #[test]
    fn passes_fold_into_one_record_per_point_in_first_pass_order() {
        let records = vec![
            tput("W [pass 1/3]", 64, 1.0),
            tput("W [pass 1/3]", 1024, 0.5),
            tput("other", 64, 9.0),
            tput("W [pass 2/3]", 64, 2.0),
            tput("W [pass 2/3]", 1024, 0.7),
            tput("W [pass 3/3]", 64, 3.0),
            tput("W [pass 3/3]", 1024, 0.6),
        ];
        let folded = fold(records);
        assert_eq!(folded.len(), 3);
        let Record::Throughput(a) = &folded[0] else {
            panic!()
        };
        assert_eq!(a.series.as_deref(), Some("W"));
        assert_eq!((a.size, a.mops, a.gbps, a.ops), (64, 2.0, 1.0, 300));
        assert_eq!(a.passes.len(), 3);
        let Record::Throughput(b) = &folded[1] else {
            panic!()
        };
        assert_eq!(b.size, 1024);
        assert!((b.mops - 0.6).abs() < 1e-12);
        // A record that is no pass stays as it was.
        assert_eq!(folded[2], tput("other", 64, 9.0));
    }

    #[test]
    fn latency_passes_merge_histograms_and_take_the_smallest_minimum() {
        let lat = |pass: u32, p50: f64, min: f64, hist: Vec<(f64, u64)>| {
            let mut l = LatencyRecord::example();
            l.series = Some(label("WRITE", pass, 2));
            l.stats.p50_ns = p50;
            l.stats.min_ns = min;
            l.iters = 10;
            l.histogram = hist;
            Record::Latency(l)
        };
        let folded = fold(vec![
            lat(1, 1000.0, 900.0, vec![(900.0, 4), (1000.0, 6)]),
            lat(2, 1200.0, 800.0, vec![(800.0, 1), (1000.0, 9)]),
        ]);
        let [Record::Latency(l)] = &folded[..] else {
            panic!("{folded:?}")
        };
        assert_eq!(l.stats.p50_ns, 1100.0);
        assert_eq!(l.stats.min_ns, 800.0);
        assert_eq!(l.iters, 20);
        assert_eq!(l.histogram, vec![(800.0, 1), (900.0, 4), (1000.0, 15)]);
    }
}
