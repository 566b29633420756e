//! What the measured entries say: a summary per endpoint, the slow pairs
//! of each judged figure (`fabric::outliers`), the `--expect` limits, and
//! the one status the exit code carries.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::fabric::doc::{
    CulpritHost, EndpointSummary, FabricDoc, FabricVerdicts, MetricRule, PairExpectation, SlowPair,
};
use crate::fabric::outliers::{judge, Better, Observation};
use crate::verdict::Expectation;

/// Exit statuses, documented in `fabric --help`: 1 wins over 3, 3 over 4.
pub const EXIT_ERROR: i32 = 1;
pub const EXIT_THRESHOLD: i32 = 3;
pub const EXIT_OUTLIER: i32 = 4;

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Fills in `doc.summary` and `doc.verdicts`.
pub fn draw(doc: &mut FabricDoc, expectations: &[Expectation]) {
    let mut v = FabricVerdicts::default();
    let metrics: Vec<_> = doc
        .tests
        .iter()
        .flat_map(|t| t.metrics.iter().cloned())
        .collect();
    for m in metrics.iter().filter(|m| m.judged) {
        let obs: Vec<Observation> = doc
            .entries
            .iter()
            .filter(|e| e.state == "ok")
            .filter_map(|e| {
                Some(Observation {
                    from: e.from.endpoint,
                    to: e.to.endpoint,
                    value: *e.metrics.get(&m.name)?,
                })
            })
            .collect();
        let better = if m.better == "lower" {
            Better::Lower
        } else {
            Better::Higher
        };
        let j = judge(better, doc.tolerance, doc.endpoints.len() as u32, &obs);
        let name = |i: u32| doc.endpoints[i as usize].label.clone();
        let mut blamed: BTreeMap<(u32, u32), String> = BTreeMap::new();
        for c in &j.culprits {
            let e = &doc.endpoints[c.endpoint as usize];
            for s in &j.slow {
                if (s.from == c.endpoint || s.to == c.endpoint)
                    && !blamed.contains_key(&(s.from, s.to))
                {
                    blamed.insert((s.from, s.to), name(c.endpoint));
                }
            }
            v.culprits.push(CulpritHost {
                metric: m.name.clone(),
                host: e.host.clone(),
                device: e.device.clone(),
                slow: c.slow,
                of: c.of,
                partners: c.partners.iter().map(|&p| name(p)).collect(),
                why: format!(
                    "in {} of its {} {} entries that were slow, with {} different partners: the slow pairs share it",
                    c.slow,
                    c.of,
                    m.name,
                    c.partners.len()
                ),
            });
        }
        for s in &j.slow {
            v.slow.push(SlowPair {
                metric: m.name.clone(),
                from: name(s.from),
                to: name(s.to),
                value: s.value,
                reference: s.reference,
                ratio: s.ratio.is_finite().then_some(s.ratio),
                rule: j.rule.clone(),
                blamed: blamed.get(&(s.from, s.to)).cloned(),
            });
        }
        v.rules.push(MetricRule {
            metric: m.name.clone(),
            reference: j.reference,
            rule: j.rule,
        });
    }
    for e in doc.entries.iter().filter(|e| e.state == "ok") {
        for x in expectations {
            let r = x.judge(e.metrics.get(x.field.path).copied());
            v.expectations.push(PairExpectation {
                expr: x.expr.clone(),
                from: doc.endpoints[e.from.endpoint as usize].label.clone(),
                to: doc.endpoints[e.to.endpoint as usize].label.clone(),
                measured: r.measured,
                pass: r.pass,
            });
        }
    }
    doc.summary = doc
        .endpoints
        .iter()
        .map(|ep| {
            let me = ep.label.clone();
            let mine: Vec<_> = doc
                .entries
                .iter()
                .filter(|e| e.from.endpoint == ep.index || e.to.endpoint == ep.index)
                .collect();
            let median = metrics
                .iter()
                .filter_map(|m| {
                    let vals = mine
                        .iter()
                        .filter_map(|e| e.metrics.get(&m.name).copied())
                        .collect();
                    Some((m.name.clone(), median(vals)?))
                })
                .collect();
            EndpointSummary {
                host: ep.host.clone(),
                device: ep.device.clone(),
                entries: mine.len() as u32,
                failed: mine.iter().filter(|e| e.state != "ok").count() as u32,
                slow: v.slow.iter().filter(|s| s.from == me || s.to == me).count() as u32,
                median,
            }
        })
        .collect();
    let error =
        doc.hosts.iter().any(|h| h.state != "ok") || doc.entries.iter().any(|e| e.state != "ok");
    let threshold = v.expectations.iter().any(|x| !x.pass);
    let outlier = !v.slow.is_empty();
    let (status, code) = if error {
        ("error", EXIT_ERROR)
    } else if threshold {
        ("threshold", EXIT_THRESHOLD)
    } else if outlier {
        ("outlier", EXIT_OUTLIER)
    } else {
        ("pass", 0)
    };
    (v.status, v.exit_code) = (status.to_string(), code);
    doc.verdicts = v;
}

/// The lines rank 0 prints at the end, and the exit the status asks for.
pub fn report(doc: &FabricDoc, files: &str) -> Result<()> {
    use super::progress::shown;
    let v = &doc.verdicts;
    for h in doc.hosts.iter().filter(|h| h.state != "ok") {
        eprintln!(
            "fabric: FAILED host {} (rank {}): {}",
            h.host,
            h.rank,
            h.error.as_deref().unwrap_or("?")
        );
    }
    for e in doc.entries.iter().filter(|e| e.state != "ok") {
        eprintln!(
            "fabric: FAILED {}/{} -> {}/{}: {}",
            e.from.host,
            e.from.device,
            e.to.host,
            e.to.device,
            e.error.as_deref().unwrap_or("?")
        );
    }
    for s in &v.slow {
        eprintln!(
            "fabric: SLOW {} {} -> {}: {} against the reference {} ({}){}",
            s.metric,
            s.from,
            s.to,
            shown(&s.metric, s.value),
            shown(&s.metric, s.reference),
            s.ratio
                .map_or("nothing measured".into(), |r| format!("{r:.2}x worse")),
            s.blamed
                .as_ref()
                .map(|b| format!("; likely {b}"))
                .unwrap_or_default()
        );
    }
    for r in v
        .rules
        .iter()
        .filter(|r| v.slow.iter().any(|s| s.metric == r.metric))
    {
        eprintln!("fabric: rule for {}: {}", r.metric, r.rule);
    }
    for c in &v.culprits {
        eprintln!(
            "fabric: CULPRIT {}/{} ({}): {}",
            c.host, c.device, c.metric, c.why
        );
    }
    let missed: Vec<_> = v.expectations.iter().filter(|x| !x.pass).collect();
    for x in &missed {
        eprintln!(
            "fabric: EXPECT {} failed for {} -> {} ({})",
            x.expr,
            x.from,
            x.to,
            x.measured.map_or("not measured".into(), |m| m.to_string())
        );
    }
    let line = format!(
        "fabric: {}: {} entries ({} failed), {} slow, {} of {} expectations failed; results in {files}",
        match v.status.as_str() {
            "error" => "hosts or pairs failed",
            "threshold" => "limits missed",
            "outlier" => "slow pairs found",
            other => other,
        },
        doc.entries.len(),
        doc.entries.iter().filter(|e| e.state != "ok").count(),
        v.slow.len(),
        missed.len(),
        v.expectations.len()
    );
    match v.exit_code {
        0 => {
            eprintln!("{line}");
            Ok(())
        }
        EXIT_THRESHOLD => Err(Error::Expectation(line)),
        EXIT_OUTLIER => Err(Error::Outlier(line)),
        _ => Err(Error::Verification(line)),
    }
}
