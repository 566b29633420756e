//! Rank 0's line per round: which round of how many, what it measured,
//! and the slowest entry so far of each judged figure.

use crate::fabric::doc::{EndpointRef, FabricDoc};

fn name(doc: &FabricDoc, e: &EndpointRef) -> String {
    doc.endpoints
        .get(e.endpoint as usize)
        .map_or_else(|| format!("{}/{}", e.host, e.device), |x| x.label.clone())
}

/// A figure as a person reads it: times in µs, rates as they are.
pub fn shown(metric: &str, v: f64) -> String {
    if metric.ends_with("_ns") {
        format!("{:.1} us", v / 1000.0)
    } else if v != 0.0 && v.abs() < 0.01 {
        format!("{v:.3e} {}", if metric == "gbps" { "Gb/s" } else { "Mops" })
    } else if metric == "gbps" {
        format!("{v:.3} Gb/s")
    } else if metric == "mops" {
        format!("{v:.4} Mops")
    } else {
        format!("{v}")
    }
}

pub fn round_line(doc: &FabricDoc, round: u32, rounds: u32, first: usize) -> String {
    let this = &doc.entries[first..];
    let failed = this.iter().filter(|e| e.state != "ok").count();
    let pairs: Vec<String> = this
        .iter()
        .step_by(2)
        .map(|e| format!("{}<->{}", name(doc, &e.from), name(doc, &e.to)))
        .collect();
    let mut slowest = Vec::new();
    for t in &doc.tests {
        for m in t.metrics.iter().filter(|m| m.judged) {
            let lower = m.lower_is_better();
            let worst = doc
                .entries
                .iter()
                .filter_map(|e| Some((e, *e.metrics.get(&m.name)?)))
                .max_by(|(_, a), (_, b)| {
                    let o = a.total_cmp(b);
                    if lower {
                        o
                    } else {
                        o.reverse()
                    }
                });
            if let Some((e, v)) = worst {
                slowest.push(format!(
                    "{} {} {}->{}",
                    m.name,
                    shown(&m.name, v),
                    name(doc, &e.from),
                    name(doc, &e.to)
                ));
            }
        }
    }
    format!(
        "fabric: round {}/{rounds}: {} ({} entries, {failed} failed); slowest so far: {}",
        round + 1,
        if pairs.is_empty() {
            "no pair".into()
        } else {
            pairs.join(", ")
        },
        this.len(),
        if slowest.is_empty() {
            "none yet".into()
        } else {
            slowest.join(", ")
        }
    )
}

/// Rank 0's line after measuring entry `i` again: each judged figure of the
/// latest attempt, the first, and the best it now counts.
pub fn recheck_line(doc: &FabricDoc, i: usize) -> String {
    let e = &doc.entries[i];
    let figures: Vec<String> = doc
        .tests
        .iter()
        .flat_map(|t| &t.metrics)
        .filter(|m| m.judged)
        .filter_map(|m| {
            let first = e.earlier.first()?.metrics.get(&m.name)?;
            let best = e.metrics.get(&m.name)?;
            Some(format!(
                "{} first {}, best {}",
                m.name,
                shown(&m.name, *first),
                shown(&m.name, *best)
            ))
        })
        .collect();
    format!(
        "fabric: measured again (attempt {}): {}->{}: {}{}",
        e.earlier.len() + 1,
        name(doc, &e.from),
        name(doc, &e.to),
        if figures.is_empty() {
            "no judged figure".into()
        } else {
            figures.join(", ")
        },
        e.error
            .as_ref()
            .map(|x| format!("; failed: {x}"))
            .unwrap_or_default()
    )
}
