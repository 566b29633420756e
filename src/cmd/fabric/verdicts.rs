//! What the measured entries say: a summary per endpoint, the slow pairs
//! of each judged figure (`fabric::outliers`), the `--expect` limits, and
//! the one status the exit code carries.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::fabric::doc::{
    CulpritHost, EndpointSummary, FabricDoc, FabricMetric, FabricVerdicts, MetricRule,
    PairExpectation, SlowPair,
};
use crate::fabric::outliers::{judge, times_worse, Better, Judgement, Observation};
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

fn better_of(m: &FabricMetric) -> Better {
    if m.lower_is_better() {
        Better::Lower
    } else {
        Better::Higher
    }
}

/// Each judged figure with the judgement of the entries measured so far.
fn judged(doc: &FabricDoc) -> Vec<(FabricMetric, Judgement)> {
    let judged = doc
        .tests
        .iter()
        .flat_map(|t| &t.metrics)
        .filter(|m| m.judged);
    judged
        .map(|m| {
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
            let j = judge(
                better_of(m),
                doc.tolerance,
                doc.endpoints.len() as u32,
                &obs,
            );
            (m.clone(), j)
        })
        .collect()
}

/// The entries (by index) that are slow in some judged figure now: what
/// `--recheck` measures again.
pub fn slow_entries(doc: &FabricDoc) -> Vec<usize> {
    let mut due: Vec<usize> = judged(doc)
        .iter()
        .flat_map(|(_, j)| &j.slow)
        .flat_map(|s| {
            doc.entries.iter().enumerate().filter(move |(_, e)| {
                e.state == "ok" && e.from.endpoint == s.from && e.to.endpoint == s.to
            })
        })
        .map(|(i, _)| i)
        .collect();
    due.sort_unstable();
    due.dedup();
    due
}

/// Fills in `doc.summary` and `doc.verdicts`.
pub fn draw(doc: &mut FabricDoc, expectations: &[Expectation]) {
    let mut v = FabricVerdicts::default();
    let metrics: Vec<_> = doc
        .tests
        .iter()
        .flat_map(|t| t.metrics.iter().cloned())
        .collect();
    for (m, j) in judged(doc) {
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
        // Slow at first, fine in the best of its attempts.
        if let Some(reference) = j.reference {
            let better = better_of(&m);
            for e in doc.entries.iter().filter(|e| e.state == "ok") {
                let first = e.earlier.first().and_then(|a| a.metrics.get(&m.name));
                let (Some(&first), Some(&best)) = (first, e.metrics.get(&m.name)) else {
                    continue;
                };
                let worse = |x: f64| times_worse(better, reference, x);
                let limit = 1.0 + doc.tolerance;
                if worse(first) > limit && worse(best) <= limit {
                    v.transient.push(SlowPair {
                        metric: m.name.clone(),
                        from: name(e.from.endpoint),
                        to: name(e.to.endpoint),
                        value: first,
                        reference,
                        ratio: worse(first).is_finite().then(|| worse(first)),
                        rule: format!(
                            "slow in its first attempt, within the tolerance in the best of {} (--recheck): {}",
                            e.earlier.len() + 1,
                            super::progress::shown(&m.name, best)
                        ),
                        blamed: None,
                    });
                }
            }
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
    // "METRIC FROM -> TO: VALUE against the reference REF (Nx worse)"
    let against = |s: &SlowPair| {
        format!(
            "{} {} -> {}: {} against the reference {} ({})",
            s.metric,
            s.from,
            s.to,
            shown(&s.metric, s.value),
            shown(&s.metric, s.reference),
            s.ratio
                .map_or("nothing measured".into(), |r| format!("{r:.2}x worse")),
        )
    };
    for s in &v.slow {
        let likely = s.blamed.as_ref().map(|b| format!("; likely {b}"));
        eprintln!("fabric: SLOW {}{}", against(s), likely.unwrap_or_default());
    }
    for s in &v.transient {
        eprintln!(
            "fabric: TRANSIENT {} at first; {}; not counted as slow",
            against(s),
            s.rule
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::doc::{
        EndpointRef, FabricAttempt, FabricEndpoint, FabricEntry, FabricMetric, FabricTest,
    };

    /// Three endpoints, every ordered pair at 100 µs p50 but `slow` (from,
    /// to) at `value`.
    fn doc(slow: (u32, u32), value: f64) -> FabricDoc {
        let r = |i: u32| EndpointRef {
            endpoint: i,
            host: format!("h{i}"),
            ..Default::default()
        };
        let mut d = FabricDoc {
            tolerance: 0.2,
            tests: vec![FabricTest {
                name: "lat".into(),
                command: String::new(),
                metrics: vec![FabricMetric {
                    name: "lat_p50_ns".into(),
                    what: String::new(),
                    better: "lower".into(),
                    judged: true,
                }],
            }],
            ..Default::default()
        };
        for i in 0..3 {
            d.endpoints.push(FabricEndpoint {
                index: i,
                label: format!("h{i}/rxe0"),
                ..Default::default()
            });
        }
        for (a, b) in [(0, 1), (1, 0), (0, 2), (2, 0), (1, 2), (2, 1)] {
            let v = if (a, b) == slow { value } else { 100e3 };
            d.entries.push(FabricEntry {
                from: r(a),
                to: r(b),
                state: "ok".into(),
                metrics: [("lat_p50_ns".to_string(), v)].into(),
                counters: [("completer_retry_err".to_string(), 1)].into(),
                elapsed_s: 1.0,
                ..Default::default()
            });
        }
        d
    }

    /// Entry `i` measured again at `now` (2 retries, 1 s), after the
    /// attempt `last` returned; returns this one.
    fn measured_again(
        d: &mut FabricDoc,
        i: usize,
        last: Option<FabricAttempt>,
        now: f64,
    ) -> FabricAttempt {
        d.measure_again(i, last, |d| {
            let e = &mut d.entries[i];
            e.metrics.insert("lat_p50_ns".into(), now);
            e.counters.insert("completer_retry_err".into(), 2);
            e.elapsed_s = 1.0;
        })
    }

    #[test]
    fn a_pair_slow_only_at_first_is_transient_and_one_slow_every_time_is_slow() {
        // 0 -> 2 at 5x: due for a recheck, and nothing else is.
        let mut d = doc((0, 2), 500e3);
        assert_eq!(slow_entries(&d), vec![2]);
        measured_again(&mut d, 2, None, 110e3);
        let e = &d.entries[2];
        assert_eq!(e.metrics["lat_p50_ns"], 110e3, "the best of the attempts");
        assert_eq!(e.counters["completer_retry_err"], 3, "counters summed");
        assert_eq!(e.elapsed_s, 2.0);
        assert!(slow_entries(&d).is_empty());
        draw(&mut d, &[]);
        assert_eq!(
            (d.verdicts.status.as_str(), d.verdicts.exit_code),
            ("pass", 0)
        );
        assert_eq!(d.verdicts.transient.len(), 1, "{:?}", d.verdicts);
        let t = &d.verdicts.transient[0];
        assert_eq!((t.from.as_str(), t.to.as_str()), ("h0/rxe0", "h2/rxe0"));
        assert_eq!(t.value, 500e3);
        assert!((t.ratio.unwrap() - 5.0).abs() < 1e-9);

        // Slow again on the recheck: the best is still slow, nothing transient.
        let mut d = doc((0, 2), 500e3);
        measured_again(&mut d, 2, None, 450e3);
        assert_eq!(d.entries[2].metrics["lat_p50_ns"], 450e3);
        assert_eq!(slow_entries(&d), vec![2]);
        draw(&mut d, &[]);
        assert_eq!(
            (d.verdicts.status.as_str(), d.verdicts.exit_code),
            ("outlier", 4)
        );
        assert_eq!(d.verdicts.slow.len(), 1);
        assert!(d.verdicts.transient.is_empty());

        // A worse recheck never makes the figure worse.
        let mut d = doc((0, 2), 500e3);
        measured_again(&mut d, 2, None, 900e3);
        assert_eq!(d.entries[2].metrics["lat_p50_ns"], 500e3);
    }

    #[test]
    fn three_attempts_keep_each_earlier_one_as_measured_and_sum_each_once() {
        // --recheck 2: measured at 500, 450, then 300 µs.
        let mut d = doc((0, 2), 500e3);
        let second = measured_again(&mut d, 2, None, 450e3);
        measured_again(&mut d, 2, Some(second), 300e3);
        let e = &d.entries[2];
        let raw: Vec<f64> = e.earlier.iter().map(|a| a.metrics["lat_p50_ns"]).collect();
        assert_eq!(raw, vec![500e3, 450e3], "earlier attempts unfolded");
        let retries: Vec<u64> = e
            .earlier
            .iter()
            .map(|a| a.counters["completer_retry_err"])
            .collect();
        assert_eq!(retries, vec![1, 2]);
        assert_eq!(e.metrics["lat_p50_ns"], 300e3);
        assert_eq!(e.counters["completer_retry_err"], 1 + 2 + 2);
        assert_eq!(e.elapsed_s, 3.0);
    }
}
