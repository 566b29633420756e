//! `rdma-bench compare A.json B.json [...]`: matches points across result
//! files by their parameters and shows each file's figure and its ratio to the
//! first file's (B/A) — the "compare NIC generations" workflow. Points present
//! in some files only are listed too, never dropped.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::analysis::uncertainty::{self, Interval, RatioJudgement};
use crate::cli::CompareArgs;
use crate::device_name::human_name;
use crate::error::Result;
use crate::export::write_atomically;
use crate::output_target::Target;
use crate::results::{Record, ResultsDoc};

mod conditions;
mod expect;
mod inputs;
mod matching;
mod render;
pub use conditions::conditions;
pub use matching::{point_key, MATCHED_ON};
pub use render::column;

/// One file's identity in the comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Source {
    pub file: String,
    pub label: String,
    pub device: String,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub host: String,
    pub started_utc: String,
}

/// One matched point: its parameters, and each file's figure (None: absent there).
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub point: String,
    /// `p50_ns` for latency, `mops` for throughput.
    pub figure: String,
    pub values: Vec<Option<f64>>,
    /// values[i] / values[0], where both exist.
    pub ratios: Vec<Option<f64>>,
    /// Each value's 95% interval, where its record allows one
    /// (`analysis::uncertainty`).
    pub intervals: Vec<Option<Interval>>,
    /// Each ratio's interval and whether it is a change (index 0: none).
    pub judged: Vec<Option<RatioJudgement>>,
}

#[derive(Debug, Serialize)]
pub struct Comparison {
    pub sources: Vec<Source>,
    /// Each file's run conditions, joined with " | " where they differ (--force).
    pub conditions: Vec<(&'static str, String)>,
    pub rows: Vec<Row>,
    /// `--expect`: each ratio expectation at each matched point.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub expectations: Vec<expect::RatioVerdict>,
}

/// Reads one input file (see `results::load`).
pub fn load(path: &Path) -> Result<ResultsDoc> {
    crate::results::load(path)
}

/// Matches the files' points; `noise` is the share of 1 within which no
/// ratio is called a change (see `uncertainty::judge_ratio`).
pub fn compare(docs: &[(String, ResultsDoc)], noise: f64) -> Comparison {
    let sources = docs
        .iter()
        .map(|(file, d)| Source {
            file: file.clone(),
            label: format!(
                "{} @ {}, {}",
                human_name(&d.device.name, d.device.vendor_id, d.device.vendor_part_id),
                d.host.hostname,
                d.started_utc.get(..10).unwrap_or(&d.started_utc)
            ),
            device: d.device.name.clone(),
            vendor_id: d.device.vendor_id,
            vendor_part_id: d.device.vendor_part_id,
            host: d.host.hostname.clone(),
            started_utc: d.started_utc.clone(),
        })
        .collect();
    // Keep first-seen order: the first file's points, then points new in later files.
    let mut order: Vec<String> = Vec::new();
    // Per file: the value, its interval, and why it has none.
    type Cells = (
        &'static str,
        Vec<Option<f64>>,
        Vec<Option<Interval>>,
        Vec<Option<&'static str>>,
    );
    let mut table: BTreeMap<String, Cells> = BTreeMap::new();
    for (i, (_, d)) in docs.iter().enumerate() {
        for r in &d.results {
            let (key, figure, value) = point_key(r);
            // Each point's figure, then (where measured) what it cost in CPU.
            let cost = cpu_cost(r).map(|(f, v)| (format!("{key} cpu"), f, v));
            for (key, figure, value) in std::iter::once((key, figure, value)).chain(cost) {
                let entry = table.entry(key.clone()).or_insert_with(|| {
                    order.push(key.clone());
                    let n = docs.len();
                    (figure, vec![None; n], vec![None; n], vec![None; n])
                });
                // A file with a point twice keeps its first measurement.
                if entry.1[i].is_none() {
                    entry.1[i] = Some(value);
                    entry.2[i] = uncertainty::of_record(r, figure);
                    entry.3[i] = uncertainty::why_none(r, figure);
                }
            }
        }
    }
    let rows = order
        .into_iter()
        .map(|key| {
            let (figure, values, intervals, why) = table
                .remove(&key)
                .expect("every ordered key is in the table");
            let ratios = values
                .iter()
                .map(|v| match (values[0], v) {
                    (Some(a), Some(b)) if a > 0.0 => Some(b / a),
                    _ => None,
                })
                .collect();
            let judged = values
                .iter()
                .zip(&intervals)
                .enumerate()
                .map(|(i, (v, iv))| match (i, values[0], v) {
                    (1.., Some(a), Some(b)) => {
                        let mut j =
                            uncertainty::judge_ratio(figure, (a, intervals[0]), (*b, *iv), noise)?;
                        if j.interval.is_none() {
                            j.why = why[0].or(why[i]);
                        }
                        Some(j)
                    }
                    _ => None,
                })
                .collect();
            Row {
                point: key,
                figure: figure.to_string(),
                values,
                ratios,
                intervals,
                judged,
            }
        })
        .collect();
    // Each condition as the files had it: one value, or every file's joined.
    let per_file: Vec<_> = docs.iter().map(|(_, d)| conditions(d)).collect();
    let conditions = per_file
        .first()
        .map(|first| {
            first
                .iter()
                .enumerate()
                .map(|(k, (field, _))| {
                    let mut values: Vec<String> = per_file.iter().map(|c| c[k].1.clone()).collect();
                    values.dedup();
                    (*field, values.join(" | "))
                })
                .collect()
        })
        .unwrap_or_default();
    Comparison {
        sources,
        conditions,
        rows,
        expectations: Vec::new(),
    }
}

/// What a point cost in CPU on this side, where its file says: throughput
/// in CPU-seconds per million ops, latency in percent of one CPU.
fn cpu_cost(r: &Record) -> Option<(&'static str, f64)> {
    match r {
        Record::Latency(l) => l
            .cpu_util
            .as_ref()?
            .local_process_pct
            .map(|v| ("process_cpu_pct", v)),
        Record::Throughput(t) => t
            .cpu_util
            .as_ref()?
            .local_cpu_s_per_mop
            .map(|v| ("cpu_s_per_mop", v)),
    }
}

pub fn run(args: &CompareArgs) -> Result<()> {
    // Every output target first: before reading, comparing or printing anything.
    let mut targets = Vec::new();
    if let Some(p) = &args.json {
        targets.push(Target {
            option: "--json",
            path: p,
        });
    }
    if let Some(p) = &args.csv {
        targets.push(Target {
            option: "--csv",
            path: p,
        });
    }
    if let Some(p) = &args.markdown {
        targets.push(Target {
            option: "--markdown",
            path: p,
        });
    }
    let inputs: Vec<&Path> = args.files.iter().map(|p| p.as_path()).collect();
    crate::output_target::check(&targets, &inputs)?;
    let exps = crate::verdict::parse_ratios("--expect", &args.expect)?;
    let mut docs = inputs::load_all(&args.files)?;
    // A profile's passes of a point are one row, as `report` draws them.
    for (_, d) in &mut docs {
        d.results = crate::analysis::passes::fold(std::mem::take(&mut d.results));
    }
    if !args.force {
        conditions::check_conditions(&docs)?;
    }
    let mut cmp = compare(&docs, args.noise / 100.0);
    cmp.expectations = expect::judge(&exps, &docs);
    // The files before the table: a reader that stops early (`| head`) loses nothing.
    if let Some(p) = &args.json {
        let mut bytes = serde_json::to_vec_pretty(&cmp).expect("comparisons serialise");
        bytes.push(b'\n');
        write_atomically(p, &bytes)?;
    }
    if let Some(p) = &args.csv {
        write_atomically(p, &render::to_csv(&cmp)?)?;
    }
    if let Some(p) = &args.markdown {
        write_atomically(p, render::to_markdown(&cmp, &docs).as_bytes())?;
    }
    render::print_table(&cmp)?;
    expect::print(&cmp.expectations)?;
    expect::met(&cmp.expectations)
}

#[cfg(test)]
mod tests {
    use super::render::fmt_value;
    use super::*;
    use crate::results::{DeviceInfo, LatencyRecord, Record, ResultsDoc};
    use crate::stats::LatencyStats;

    pub(super) fn doc(device: &str, part: u32, points: &[(u32, f64)]) -> (String, ResultsDoc) {
        let results = points
            .iter()
            .map(|&(size, p50)| {
                Record::Latency(LatencyRecord {
                    size,
                    stats: LatencyStats {
                        p50_ns: p50,
                        ..Default::default()
                    },
                    ..LatencyRecord::example()
                })
            })
            .collect();
        (
            format!("{device}.json"),
            ResultsDoc {
                schema_version: 2,
                peer: crate::results::PeerDoc {
                    mode: "loopback".into(),
                    ..Default::default()
                },
                started_utc: "2026-11-29T00:00:00Z".into(),
                experiment: None,
                device: DeviceInfo {
                    name: device.into(),
                    vendor_id: 0x02c9,
                    vendor_part_id: part,
                    ..Default::default()
                },
                results,
                ..Default::default()
            },
        )
    }

    #[test]
    fn cpu_cost_gets_a_row_beside_its_point_and_forever_joins_the_key() {
        let (fa, a) = doc("mlx5_0", 4123, &[(64, 1200.0)]);
        let (fb, mut b) = doc("mlx5_1", 4125, &[(64, 1000.0)]);
        if let Record::Latency(l) = &mut b.results[0] {
            l.cpu_util = Some(crate::results::CpuUtil {
                local_process_pct: Some(99.0),
                ..Default::default()
            });
        }
        let c = compare(&[(fa, a.clone()), (fb, b)], 0.05);
        assert_eq!(c.rows.len(), 2, "{:?}", c.rows);
        assert_eq!(c.rows[1].point, format!("{} cpu", c.rows[0].point));
        assert_eq!(c.rows[1].figure, "process_cpu_pct");
        // The file before cpu_util has no figure there, never a 0.
        assert_eq!(c.rows[1].values, vec![None, Some(99.0)]);
        assert_eq!(fmt_value("process_cpu_pct", Some(99.0)), "99% cpu");
        // --forever ran a different window: its points do not match plain ones.
        let mut r = a.results[0].clone();
        let plain = point_key(&r).0;
        if let Record::Latency(l) = &mut r {
            l.live.forever = true;
        }
        assert_eq!(point_key(&r).0, format!("{plain} forever"));
        // --interval only observes: it stays out of the key.
        if let Record::Latency(l) = &mut r {
            l.live.forever = false;
            l.live.interval_s = Some(0.2);
        }
        assert_eq!(point_key(&r).0, plain);
    }

    #[test]
    fn points_match_by_parameters_and_one_sided_ones_stay() {
        let a = doc("mlx4_0", 4099, &[(2, 2000.0), (64, 2400.0), (4096, 9000.0)]);
        let b = doc("mlx5_0", 4123, &[(64, 1200.0), (2, 1000.0), (8192, 5000.0)]);
        let cmp = compare(&[a, b], 0.05);
        assert!(cmp.sources[0].label.starts_with("ConnectX-3 (0x2c9:4099)"));
        assert!(cmp.sources[1].label.starts_with("ConnectX-6 (0x2c9:4123)"));
        let row = |size: u32| {
            cmp.rows
                .iter()
                .find(|r| r.point.ends_with(&format!("size {size}")))
                .unwrap()
        };
        assert_eq!(row(2).ratios[1], Some(0.5));
        assert_eq!(row(64).ratios[1], Some(0.5));
        assert_eq!(row(4096).values, vec![Some(9000.0), None], "only in A");
        assert_eq!(row(8192).values, vec![None, Some(5000.0)], "only in B");
        assert_eq!(cmp.rows.len(), 4);
    }
}
