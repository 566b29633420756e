//! `compare --expect 'ratio.FIELD OP NUMBER'`: a regression check between
//! result files. At every point a later file shares with the baseline (the
//! first file), the file's FIELD over the baseline's is held to the limit.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::{column, point_key};
use crate::error::{Error, Result};
use crate::escape::printable;
use crate::output::print_line;
use crate::results::{Record, ResultsDoc};
use crate::verdict::fields::Has;
use crate::verdict::Expectation;

/// One expectation at one matched point of one file (in the comparison's JSON).
#[derive(Debug, Clone, Serialize)]
pub struct RatioVerdict {
    pub expr: String,
    /// The matched point (the comparison's `point`).
    pub point: String,
    /// The file's column (`B`, `C`, ...) and name.
    pub column: String,
    pub file: String,
    /// The record field compared, and its value in the baseline and in the file.
    pub field: String,
    pub baseline: Option<f64>,
    pub value: Option<f64>,
    /// value / baseline; `null` (a failure) where either is missing or the baseline is 0.
    pub ratio: Option<f64>,
    pub limit: f64,
    pub pass: bool,
}

/// Whether records of this kind carry the field at all: `ratio.p50` is
/// not judged on throughput points, nor `ratio.mops` on latency points.
fn applies(e: &Expectation, r: &Record) -> bool {
    matches!(
        (e.field.has, r),
        (Has::Both, _)
            | (Has::Latency, Record::Latency(_))
            | (Has::Throughput, Record::Throughput(_))
    )
}

/// Each point of `d` by its key, with its record as JSON, in the file's
/// order (the first, where a file has a point twice).
fn first_of(d: &ResultsDoc) -> Vec<(String, &Record, Value)> {
    let mut seen = std::collections::BTreeSet::new();
    d.results
        .iter()
        .filter_map(|r| {
            let key = point_key(r).0;
            seen.insert(key.clone())
                .then(|| (key, r, serde_json::to_value(r).unwrap_or(Value::Null)))
        })
        .collect()
}

/// Every expectation at every point each later file shares with the
/// baseline (a file with a point twice is judged on its first, as
/// `compare` shows it). An expectation that applies to no matched point
/// gets one failing verdict with no point: a check that checked nothing
/// must not pass.
pub fn judge(exps: &[Expectation], docs: &[(String, ResultsDoc)]) -> Vec<RatioVerdict> {
    let Some((_, base)) = docs.first() else {
        return Vec::new();
    };
    if exps.is_empty() {
        return Vec::new();
    }
    let baseline: BTreeMap<String, Value> =
        first_of(base).into_iter().map(|(k, _, v)| (k, v)).collect();
    let files: Vec<_> = docs.iter().map(|(_, d)| first_of(d)).collect();
    let mut out = Vec::new();
    for e in exps {
        let before = out.len();
        for (i, ((file, _), points)) in docs.iter().zip(&files).enumerate().skip(1) {
            for (key, r, v) in points {
                let Some(bv) = baseline.get(key) else {
                    continue;
                };
                if !applies(e, r) {
                    continue;
                }
                let (b, x) = (e.value_in(bv), e.value_in(v));
                let ratio = match (b, x) {
                    (Some(b), Some(x)) if b != 0.0 => Some(x / b),
                    _ => None,
                };
                let j = e.judge(ratio);
                out.push(RatioVerdict {
                    expr: j.expr,
                    point: key.clone(),
                    column: column(i),
                    file: file.clone(),
                    field: e.field.path.to_string(),
                    baseline: b,
                    value: x,
                    ratio,
                    limit: j.limit,
                    pass: j.pass,
                });
            }
        }
        if out.len() == before {
            out.push(RatioVerdict {
                expr: e.expr.clone(),
                point: String::new(),
                column: String::new(),
                file: String::new(),
                field: e.field.path.to_string(),
                baseline: None,
                value: None,
                ratio: None,
                limit: e.limit,
                pass: false,
            });
        }
    }
    out
}

/// A figure as the failure lines show it: four significant digits or so.
fn figure(x: f64) -> String {
    if x.abs() >= 100.0 {
        format!("{x:.1}")
    } else if x.abs() >= 1.0 {
        format!("{x:.3}")
    } else {
        format!("{x:.4}")
    }
}

/// Lines under the table: each failed verdict, then the tally.
pub fn print(verdicts: &[RatioVerdict]) -> Result<()> {
    if verdicts.is_empty() {
        return Ok(());
    }
    for v in verdicts.iter().filter(|v| !v.pass) {
        let line = if v.point.is_empty() {
            format!(
                "# expectation failed: {}: no point matched in the baseline and another file has {}",
                printable(&v.expr),
                v.field
            )
        } else {
            let why = match (v.value, v.baseline, v.ratio) {
                (Some(x), Some(b), Some(r)) => {
                    format!("= {r:.3} ({} {} / {})", v.field, figure(x), figure(b))
                }
                (Some(_), Some(_), None) => format!("has no value ({} is 0 in [A])", v.field),
                (None, _, _) => {
                    format!("has no value ({} not recorded in [{}])", v.field, v.column)
                }
                (_, None, _) => format!("has no value ({} not recorded in [A])", v.field),
            };
            format!(
                "# expectation failed: {} at {}: [{}]/[A] {why}",
                printable(&v.expr),
                printable(v.point.trim()),
                v.column,
            )
        };
        print_line(&line)?;
    }
    let held = verdicts.iter().filter(|v| v.pass).count();
    print_line(&format!(
        "# expectations: {held} of {} held",
        verdicts.len()
    ))
}

/// Exit 3 when any verdict failed (the files are written by then).
pub fn met(verdicts: &[RatioVerdict]) -> Result<()> {
    let failed: Vec<&RatioVerdict> = verdicts.iter().filter(|v| !v.pass).collect();
    match failed.first() {
        None => Ok(()),
        Some(first) => {
            Err(Error::Expectation(format!(
            "compare: {} of {} expectations failed (first: '{}'{}); see `expectations` in --json",
            failed.len(),
            verdicts.len(),
            first.expr,
            if first.point.is_empty() {
                " matched no point".to_string()
            } else {
                format!(
                    " at {}, [{}]/[A] = {}",
                    first.point.trim(),
                    first.column,
                    first.ratio.map_or_else(|| "none".into(), |r| format!("{r:.3}"))
                )
            }
        )))
        }
    }
}
