//! One sentence per figure on what it shows and how it was measured, made
//! from the figure's own records (so an edited set is described as it ran).

use std::collections::BTreeSet;

use crate::analysis::figures::{capital, Figure};
use crate::results::Record;

/// The distinct values of a record field, as "a, b or c".
fn values<T: ToString>(records: &[&Record], f: impl Fn(&Record) -> Option<T>) -> String {
    let set: BTreeSet<String> = records
        .iter()
        .filter_map(|r| f(r))
        .map(|v| v.to_string())
        .collect();
    let v: Vec<String> = set.into_iter().collect();
    match v.len() {
        0 => "-".into(),
        1 => v[0].clone(),
        n => format!("{} or {}", v[..n - 1].join(", "), v[n - 1]),
    }
}

fn window(records: &[&Record]) -> String {
    values(records, |r| match r {
        Record::Latency(l) => l.requested_s.map(|s| format!("{s:.3} s")),
        Record::Throughput(t) => t.requested_s.map(|s| format!("{s:.3} s")),
    })
}

pub fn caption(figure: Figure, records: &[&Record], clock: &str) -> String {
    let tput = |what: &str| {
        format!(
            "{what} Each point counts the WRs posted inside a {} window after a {} warm-up (the issuing side's count; each file's first thread clocks the window), with {} QP(s) in all, S = {}, postlist {} and window {}; {}. Clock: {clock}.",
            window(records),
            values(records, |r| match r {
                Record::Throughput(t) => Some(format!("{:.3} s", t.warmup_s)),
                _ => None,
            }),
            values(records, |r| match r {
                Record::Throughput(t) => Some(t.qps * t.threads),
                _ => None,
            }),
            values(records, |r| match r {
                Record::Throughput(t) => Some(t.signal_period),
                _ => None,
            }),
            values(records, |r| match r {
                Record::Throughput(t) => Some(t.postlist),
                _ => None,
            }),
            values(records, |r| match r {
                Record::Throughput(t) => Some(t.window),
                _ => None,
            }),
            if records.iter().all(|r| matches!(r, Record::Throughput(t) if t.live.intervals.len() >= 3)) {
                "each point's interval comes from its --interval figures"
            } else {
                "points without --interval figures have no interval"
            },
        )
    };
    match figure {
        Figure::Latency | Figure::UnderLoad => {
            let metrics = values(records, |r| match r {
                Record::Latency(l) => Some(match l.metric.as_str() {
                    "half_rtt" => "half-RTT",
                    _ => "completion time",
                }),
                _ => None,
            });
            let what = if figure == Figure::Latency {
                "Latency per verb against payload size: p50 as the line, p50 to p99 as the band."
            } else {
                "Probe latency (p50, p99, p99.9) against the Mops a background load achieved beside it."
            };
            format!(
                "{what} Metric: {metrics}; half-RTT is half of each ping-pong round trip timed by the client from its post to the reply's arrival, completion time runs from the post of a signaled WR to its completion polled from the CQ. Each point ran for a {} window after its warm-up iterations, which are dropped. Clock: {clock}.",
                window(records)
            )
        }
        Figure::TputSize(d) => tput(&format!(
            "{} throughput in Mops against payload size, one line per verb.",
            capital(d.name())
        )),
        Figure::TputQps(d) => tput(&format!(
            "{} throughput against the number of QPs: where it falls, the NIC's QP-context cache no longer holds every QP.",
            capital(d.name())
        )),
        Figure::Signal => tput("Throughput against the signaling period S (one signaled WR every S): fewer completions to poll per WR."),
        Figure::Postlist => tput("Throughput against postlist, the WRs posted with one doorbell (doorbell batching)."),
        Figure::NicCache => tput("Throughput against the size of the remote region random WRs land in (the NIC's address-translation cache), and against QPs that each have an MR of their own."),
    }
}
