//! Runs of fields that latency and throughput records share, each one
//! struct flattened into both (`#[serde(flatten)]`): a results file shows
//! them as plain fields of the record, in the order they are declared
//! here, exactly as when each record listed them itself (key order
//! included). A new knob of one of these kinds is one field here and its
//! name in `COLUMNS`: both records and their CSV columns follow, and tests
//! fail until `compare`'s key and the experiment-file keys have it too.
//!
//! What both records carry but list themselves, on purpose: `series`,
//! `verb`, `transport` and `size` (a kind's own field, `metric` or
//! `direction`, sits between them); `event_wakeups`, `cpu_util`,
//! `bidirectional` and `srq`, whose descriptions differ per kind (a latency
//! point is never bidirectional nor on an SRQ); and `connection`, a path
//! knob that sits after the memory fields in every file written so far.
//! Moving any of them into a run would change the files' key order or the
//! schema's descriptions.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::report::{IntervalFigure, ToStop};
use crate::spec::{MemorySpec, PathSpec};

/// How each WR was posted and how its completion was awaited.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PostingFields {
    /// Whether this point's payloads were posted inline (decided per size).
    pub inline: bool,
    /// `-I SIZE` as requested: payloads of at most SIZE bytes were inlined
    /// (absent: no limit was asked; `inline` then says `--inline` or neither).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline_size: Option<u32>,
    pub imm: bool,
    pub op: Option<String>,
    /// SGEs each WR's payload was split over (`--sge`; files before it: 1).
    #[serde(default = "crate::spec::one_sge")]
    pub sge: u32,
    /// Whether completions were awaited on a completion channel (`--events`;
    /// files before it: false). Latency then includes the wake-up.
    #[serde(default)]
    pub events: bool,
    /// `classic` (ibv_post_send) or `ex` (ibv_wr_* on an extended QP);
    /// files before `--post-api`: classic.
    #[serde(default)]
    pub post_api: crate::spec::PostApi,
}

/// No posting option given: what a file written before each of these
/// fields reads as (`inline` and `imm` false).
impl Default for PostingFields {
    fn default() -> Self {
        PostingFields {
            inline: false,
            inline_size: None,
            imm: false,
            op: None,
            sge: crate::spec::one_sge(),
            events: false,
            post_api: crate::spec::PostApi::default(),
        }
    }
}

impl PostingFields {
    /// The fields' names, in order: the CSV columns they fill.
    pub const COLUMNS: &'static [&'static str] = &[
        "inline",
        "inline_size",
        "imm",
        "op",
        "sge",
        "events",
        "post_api",
    ];
}

/// `--tclass`, `--sl`, `--flow-label` and `--mtu` as requested.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, JsonSchema)]
pub struct PathFields {
    /// `--tclass`, `--sl`, `--flow-label` and `--mtu` as requested; absent
    /// where not given (traffic class, SL and flow label 0, the active MTU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tclass: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sl: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_label: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
}

impl PathFields {
    /// The fields' names, in order: the CSV columns they fill.
    pub const COLUMNS: &'static [&'static str] = &["tclass", "sl", "flow_label", "mtu"];

    /// The path options as the run asked for them.
    pub fn requested(p: &PathSpec) -> Self {
        PathFields {
            tclass: p.tclass,
            sl: p.sl,
            flow_label: p.flow_label,
            mtu: p.mtu,
        }
    }
}

/// The memory layout: `--hugepages`, `--mr-per-qp`, `--region`, `--offsets`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct MemoryFields {
    /// Memory layout (`--hugepages`, `--mr-per-qp`, `--region`, `--offsets`);
    /// files before them: heap buffers, one registration per thread, one slot.
    #[serde(default)]
    pub hugepages: bool,
    #[serde(default)]
    pub mr_per_qp: bool,
    /// Bytes of each QP's remote region the WRs targeted (null: one slot).
    #[serde(default)]
    pub region: Option<u64>,
    #[serde(default = "fixed_offsets")]
    pub offsets: String,
}

/// The default layout: what a file written before these fields reads as.
impl Default for MemoryFields {
    fn default() -> Self {
        MemoryFields {
            hugepages: false,
            mr_per_qp: false,
            region: None,
            offsets: fixed_offsets(),
        }
    }
}

impl MemoryFields {
    /// The fields' names, in order: the CSV columns they fill.
    pub const COLUMNS: &'static [&'static str] = &["hugepages", "mr_per_qp", "region", "offsets"];

    /// The memory layout as the run asked for it.
    pub fn requested(m: &MemorySpec) -> Self {
        MemoryFields {
            hugepages: m.hugepages,
            mr_per_qp: m.mr_per_qp,
            region: m.region,
            offsets: m.offsets.name().into(),
        }
    }
}

/// `--interval` and `--forever`: how the measured span was watched and
/// ended, and what it was cut into.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, JsonSchema)]
pub struct LiveFields {
    /// `--interval` as asked (`null` without it).
    #[serde(default)]
    pub interval_s: Option<f64>,
    /// `--forever`: the point ran until a signal ended it (whole intervals kept).
    #[serde(default)]
    pub forever: bool,
    /// `--interval`: the measured span cut into intervals, in order
    /// (latency: the measured iterations, each interval with its own
    /// p50/p99; throughput: the window); their ops sum to `iters`
    /// (latency) or `ops` (throughput); absent without it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<IntervalFigure>,
    /// `--forever`: the point is still running; this record summarises the
    /// whole intervals so far (latency: its percentiles are not known yet:
    /// 0; throughput: counts such as `sent` are not known yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_progress: Option<bool>,
    /// `--forever`, once stopped: the window from its opening to the stop.
    /// Latency: `iters`, `elapsed_s`, the percentiles and `intervals` cover
    /// the whole intervals kept, and `ops` counts its iterations.
    /// Throughput: `ops`, `elapsed_s`, `mops` and `intervals` cover the
    /// whole intervals kept, and `cpu_util`'s per-Mop figures divide by its
    /// `ops`. Both: `device_counters` and `cpu_util` (read at the window's
    /// edges only) cover this span, the dropped interval in progress included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_stop: Option<ToStop>,
    /// `--interval`, throughput: the lowest and highest Mops of the kept
    /// `intervals` (the last, shorter piece of a finite window included;
    /// `--bidirectional`: only the indices both sides reached), and the
    /// same as Gb/s (an interval's Mops × size × 8 / 1000, as `gbps` is
    /// `mops`'); absent without `--interval` and on latency records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_interval_mops: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_interval_mops: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_interval_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_interval_gbps: Option<f64>,
    /// `--interval`, latency: the highest and the lowest p99 of the kept
    /// `intervals` (ping-pong: half RTT); absent without `--interval` and
    /// on throughput records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worst_interval_p99_ns: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_interval_p99_ns: Option<f64>,
}

impl LiveFields {
    /// The fields' names, in order (their CSV columns differ: `intervals`
    /// stays JSON-only and `to_stop` is split into its figures).
    pub const COLUMNS: &'static [&'static str] = &[
        "interval_s",
        "forever",
        "intervals",
        "in_progress",
        "to_stop",
        "min_interval_mops",
        "max_interval_mops",
        "min_interval_gbps",
        "max_interval_gbps",
        "worst_interval_p99_ns",
        "best_interval_p99_ns",
    ];

    /// Throughput: sets the interval extremes from `intervals`' first
    /// `both` entries (all of them when `None`) of a point of `size` bytes.
    pub fn set_rate_extremes(&mut self, size: u32, both: Option<usize>) {
        let kept = &self.intervals[..both
            .unwrap_or(self.intervals.len())
            .min(self.intervals.len())];
        let rates = || {
            kept.iter()
                .filter(|f| f.elapsed_s > 0.0 && f.mops.is_finite())
                .map(|f| f.mops)
        };
        let gbps = |mops: f64| mops * size as f64 * 8.0 / 1000.0;
        self.min_interval_mops = rates().reduce(f64::min);
        self.max_interval_mops = rates().reduce(f64::max);
        self.min_interval_gbps = self.min_interval_mops.map(gbps);
        self.max_interval_gbps = self.max_interval_mops.map(gbps);
    }

    /// Latency: sets the worst and best interval p99 from `intervals`.
    pub fn set_p99_extremes(&mut self) {
        let p99s = || self.intervals.iter().filter_map(|f| f.p99_ns);
        self.worst_interval_p99_ns = p99s().reduce(f64::max);
        self.best_interval_p99_ns = p99s().reduce(f64::min);
    }
}

/// What a point was judged by: `--expect`'s verdicts and `--validate`'s
/// payload checks (each absent when not asked for).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, JsonSchema)]
pub struct CheckFields {
    /// `--expect`: each expectation, the value measured and the verdict.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expectations: Vec<crate::report::ExpectationResult>,
    /// `--validate`: payloads checked and found corrupt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<crate::report::Validation>,
}

impl CheckFields {
    /// The fields' names, in order (their CSV columns differ:
    /// `expectations` stays JSON-only and `validation` is split).
    pub const COLUMNS: &'static [&'static str] = &["expectations", "validation"];
    /// The CSV columns both records end with.
    pub const CSV_COLUMNS: &'static [&'static str] = &[
        "validation.validated_wrs",
        "validation.validated_bytes",
        "validation.corrupt_wrs",
        "validation.corrupt_bytes",
    ];
}

/// `offsets` of a record written before `--offsets` existed.
fn fixed_offsets() -> String {
    "fixed".into()
}

/// The total length of `parts` (for `join_columns`' array length).
pub(crate) const fn columns_len(parts: &[&[&'static str]]) -> usize {
    let (mut n, mut i) = (0, 0);
    while i < parts.len() {
        n += parts[i].len();
        i += 1;
    }
    n
}

/// `parts` end to end, at compile time: a record's CSV columns are its own
/// names with the shared runs' `COLUMNS` spliced in where they sit.
pub(crate) const fn join_columns<const N: usize>(parts: &[&[&'static str]]) -> [&'static str; N] {
    let mut out = [""; N];
    let (mut at, mut i) = (0, 0);
    while i < parts.len() {
        let mut j = 0;
        while j < parts[i].len() {
            out[at] = parts[i][j];
            at += 1;
            j += 1;
        }
        i += 1;
    }
    assert!(at == N, "join_columns: N is not the parts' total length");
    out
}

/// The columns of `parts` end to end, as a `&'static [&str]` constant.
macro_rules! columns {
    ($($part:expr),* $(,)?) => {{
        const PARTS: &[&[&str]] = &[$($part),*];
        const N: usize = $crate::results::fields::columns_len(PARTS);
        const COLUMNS: [&str; N] = $crate::results::fields::join_columns::<N>(PARTS);
        &COLUMNS
    }};
}
pub(crate) use columns;

#[cfg(test)]
mod tests {
    use super::*;

    /// The names a struct's schema gives its fields, which are the keys a
    /// results file shows for them.
    fn schema_names<T: JsonSchema>() -> Vec<String> {
        let s = serde_json::to_value(schemars::schema_for!(T)).unwrap();
        let mut names: Vec<String> = s["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        names.sort();
        names
    }

    fn sorted(cols: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = cols.iter().map(|c| c.to_string()).collect();
        v.sort();
        v
    }

    #[test]
    fn each_runs_columns_name_every_field_it_has() {
        assert_eq!(
            schema_names::<PostingFields>(),
            sorted(PostingFields::COLUMNS)
        );
        assert_eq!(schema_names::<PathFields>(), sorted(PathFields::COLUMNS));
        assert_eq!(
            schema_names::<MemoryFields>(),
            sorted(MemoryFields::COLUMNS)
        );
        assert_eq!(schema_names::<LiveFields>(), sorted(LiveFields::COLUMNS));
        assert_eq!(schema_names::<CheckFields>(), sorted(CheckFields::COLUMNS));
    }

    #[test]
    fn defaults_are_what_a_file_without_the_fields_reads_as() {
        // `inline` and `imm` have been in every file; the rest may be absent.
        let posting: PostingFields =
            serde_json::from_str(r#"{"inline": false, "imm": false}"#).unwrap();
        assert_eq!(posting, PostingFields::default());
        let path: PathFields = serde_json::from_str("{}").unwrap();
        assert_eq!(path, PathFields::default());
        let memory: MemoryFields = serde_json::from_str("{}").unwrap();
        assert_eq!(memory, MemoryFields::default());
        let live: LiveFields = serde_json::from_str("{}").unwrap();
        assert_eq!(live, LiveFields::default());
        let checks: CheckFields = serde_json::from_str("{}").unwrap();
        assert_eq!(checks, CheckFields::default());
    }

    #[test]
    fn columns_are_in_the_order_the_fields_are_written() {
        // Every optional field set, so each is written: their keys must come
        // in the order COLUMNS lists them.
        let written = [
            serde_json::to_string(&PostingFields {
                inline: true,
                inline_size: Some(64),
                imm: true,
                op: Some("fadd".into()),
                sge: 2,
                events: true,
                post_api: crate::spec::PostApi::Ex,
            })
            .unwrap(),
            serde_json::to_string(&PathFields {
                tclass: Some(1),
                sl: Some(1),
                flow_label: Some(1),
                mtu: Some(1024),
            })
            .unwrap(),
            serde_json::to_string(&MemoryFields {
                hugepages: true,
                mr_per_qp: true,
                region: Some(4096),
                offsets: "random".into(),
            })
            .unwrap(),
        ];
        for (text, cols) in written.iter().zip([
            PostingFields::COLUMNS,
            PathFields::COLUMNS,
            MemoryFields::COLUMNS,
        ]) {
            let at: Vec<usize> = cols
                .iter()
                .map(|c| text.find(&format!("\"{c}\":")).expect(c))
                .collect();
            assert!(at.windows(2).all(|w| w[0] < w[1]), "{cols:?} in {text}");
        }
    }

    fn interval(index: u32, elapsed_s: f64, mops: f64, p99_ns: Option<f64>) -> IntervalFigure {
        IntervalFigure {
            index,
            elapsed_s,
            mops,
            p99_ns,
            ..Default::default()
        }
    }

    #[test]
    fn rate_extremes_span_the_kept_intervals() {
        let mut live = LiveFields {
            intervals: vec![
                interval(0, 0.5, 2.0, None),
                interval(1, 0.5, 1.5, None),
                interval(2, 0.5, 3.0, None),
                // A one-sided last piece of a bidirectional window.
                interval(3, 0.1, 0.5, None),
            ],
            ..Default::default()
        };
        live.set_rate_extremes(1000, None);
        assert_eq!(live.min_interval_mops, Some(0.5));
        assert_eq!(live.max_interval_mops, Some(3.0));
        live.set_rate_extremes(1000, Some(3));
        assert_eq!(live.min_interval_mops, Some(1.5));
        assert_eq!(live.max_interval_mops, Some(3.0));
        // 1.5 Mops of 1000 B: 1.5e6 × 8000 bit = 12 Gb/s.
        assert_eq!(live.min_interval_gbps, Some(12.0));
        assert_eq!(live.max_interval_gbps, Some(24.0));
        assert_eq!(live.worst_interval_p99_ns, None);
    }

    #[test]
    fn no_intervals_no_extremes() {
        let mut live = LiveFields::default();
        live.set_rate_extremes(64, None);
        live.set_p99_extremes();
        assert_eq!(live, LiveFields::default());
        // An empty piece (no time) has no rate.
        live.intervals = vec![interval(0, 0.0, f64::INFINITY, None)];
        live.set_rate_extremes(64, None);
        assert_eq!(live.min_interval_mops, None);
    }

    #[test]
    fn p99_extremes_are_the_worst_and_best_interval() {
        let mut live = LiveFields {
            intervals: vec![
                interval(0, 0.2, 1.0, Some(900.0)),
                interval(1, 0.2, 1.0, Some(2500.0)),
                interval(2, 0.1, 1.0, Some(1200.0)),
            ],
            ..Default::default()
        };
        live.set_p99_extremes();
        assert_eq!(live.worst_interval_p99_ns, Some(2500.0));
        assert_eq!(live.best_interval_p99_ns, Some(900.0));
        assert_eq!(live.min_interval_mops, None);
    }

    #[test]
    fn columns_join_end_to_end() {
        const JOINED: &[&str] = columns!(&["a"], &[], &["b", "c"]);
        assert_eq!(JOINED, &["a", "b", "c"]);
    }
}
