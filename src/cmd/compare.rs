//! `rdma-bench compare A.json B.json [...]`: matches points across result
//! files by their parameters and shows each file's figure and its ratio to the
//! first file's (B/A) — the "compare NIC generations" workflow. Points present
//! in some files only are listed too, never dropped.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::cli::CompareArgs;
use crate::device_name::human_name;
use crate::error::{Error, Result};
use crate::escape::printable;
use crate::export::write_atomically;
use crate::output::print_line;
use crate::output_target::Target;

mod expect;
mod inputs;
use crate::results::{MemoryFields, PathFields, PostingFields, Record, ResultsDoc};

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

/// The knobs a point is matched on: what was asked for, never what was
/// observed (echo inlines whatever fits its QPs, so its `inline` is left
/// out; S is the requested period, not the effective one). Options absent
/// from older files take their defaults through serde, so old and new files
/// line up. This is prose for the reader (printed above the table, in the
/// options' own spelling) and is kept by hand: `point_key` builds the key
/// from the record's fields, and a test checks that every field of the
/// shared posting, path and memory runs joins it.
pub const MATCHED_ON: &str = "verb, metric or direction, transport, size, --inline (not for echo), -I SIZE as asked, --imm, --op, --req/--resp, -S as asked, --threads x -q, --postlist, --window, --rate (offered Mops, --burst), --under-load (the load as asked), --forever (not --interval, which only observes the window), --cm, --events, --post-api, --sge, --tclass/--sl/--flow-label/--mtu, --hugepages, --mr-per-qp, --region, --offsets, --bidirectional, --srq";

/// The parameters that identify a point, as a readable string (also the match key).
/// The QoS and path options as requested, only those set (an older file,
/// or a run without them, ran with the defaults): " tclass 96 mtu 1024".
fn path_key(p: &PathFields) -> String {
    let mut key = String::new();
    for (name, v) in [
        ("tclass", p.tclass.map(u32::from)),
        ("sl", p.sl.map(u32::from)),
        ("flow_label", p.flow_label),
        ("mtu", p.mtu),
    ] {
        if let Some(v) = v {
            key.push_str(&format!(" {name} {v}"));
        }
    }
    key
}

/// `--bidirectional` and `--srq` as requested, only those set (files
/// before them ran with neither): " bidirectional srq".
fn bidir_srq_key(bidirectional: bool, srq: bool) -> &'static str {
    match (bidirectional, srq) {
        (false, false) => "",
        (true, false) => " bidirectional",
        (false, true) => " srq",
        (true, true) => " bidirectional srq",
    }
}

/// The memory layout as requested, only what differs from the default (an
/// older file ran with it): " hugepages mr_per_qp region 4096 offsets random".
fn memory_key(m: &MemoryFields) -> String {
    let mut key = String::new();
    if m.hugepages {
        key.push_str(" hugepages");
    }
    if m.mr_per_qp {
        key.push_str(" mr_per_qp");
    }
    if let Some(r) = m.region {
        key.push_str(&format!(" region {r}"));
    }
    if m.offsets != "fixed" {
        key.push_str(&format!(" offsets {}", m.offsets));
    }
    key
}

/// `--cm` joins the key; GID-connected points (and older files, which have
/// no `connection`) add nothing, so they line up as before.
fn cm_key(connection: &str) -> &'static str {
    if connection == "cm" {
        " cm"
    } else {
        ""
    }
}

/// How the payload was posted, as asked: `--inline` (not for echo, which
/// inlines whatever fits its QPs), `-I SIZE` (files before it, and runs
/// without it: no limit), `--imm` and `--op`: " inline inline_size 64 imm fadd".
fn payload_key(verb: &str, p: &PostingFields) -> String {
    let mut k = String::new();
    if p.inline && verb != "echo" {
        k.push_str(" inline");
    }
    if let Some(n) = p.inline_size {
        k.push_str(&format!(" inline_size {n}"));
    }
    if p.imm {
        k.push_str(" imm");
    }
    if let Some(o) = &p.op {
        k.push_str(&format!(" {o}"));
    }
    k
}

/// A non-default `--sge`, `--events` and a non-default `--post-api` in the
/// key (absent from a file written before them: 1 SGE, no events,
/// classic), so old files line up: " sge 4 events post-api ex".
fn posting_key(p: &PostingFields) -> String {
    let mut k = String::new();
    if p.sge != 1 {
        k.push_str(&format!(" sge {}", p.sge));
    }
    if p.events {
        k.push_str(" events");
    }
    if p.post_api != crate::spec::PostApi::Classic {
        k.push_str(" post-api ");
        k.push_str(p.post_api.name());
    }
    k
}

/// The offered load as asked: `--under-load`'s load for latency (" load
/// 10%"), and for throughput `--rate` as the process's offered Mops with
/// its burst (" rate 0.05 burst 1"). Absent (older files, unloaded runs):
/// nothing, so those line up with each other.
fn load_key(l: &crate::results::LatencyRecord) -> String {
    l.load
        .as_ref()
        .map(|load| format!(" load {load}"))
        .unwrap_or_default()
}

fn rate_key(t: &crate::results::TputRecord) -> String {
    match (t.offered_mops, t.burst) {
        (Some(m), b) => format!(
            " rate {m}{}",
            b.map(|b| format!(" burst {b}")).unwrap_or_default()
        ),
        (None, _) => String::new(),
    }
}

pub fn point_key(r: &Record) -> (String, &'static str, f64) {
    match r {
        Record::Latency(l) => (
            format!(
                "latency {} {} {}{}{}{}{} size {}",
                l.verb,
                l.metric,
                l.transport,
                payload_key(&l.verb, &l.posting),
                posting_key(&l.posting),
                path_key(&l.path) + &memory_key(&l.memory),
                cm_key(&l.connection),
                l.size
            ) + &load_key(l)
                + if l.live.forever { " forever" } else { "" },
            "p50_ns",
            l.stats.p50_ns,
        ),
        Record::Throughput(t) => (
            format!(
                "tput {} {} {}{}{}{}{}{} size {} S {} qps {}x{} postlist {} window {}",
                t.verb,
                t.direction,
                t.transport,
                payload_key(&t.verb, &t.posting),
                match (&t.req, &t.resp) {
                    (Some(a), Some(b)) => format!(" {a}/{b}"),
                    _ => String::new(),
                },
                posting_key(&t.posting),
                path_key(&t.path) + &memory_key(&t.memory) + bidir_srq_key(t.bidirectional, t.srq),
                cm_key(&t.connection),
                t.size,
                t.signal_period,
                t.threads,
                t.qps,
                t.postlist,
                t.window
            ) + &rate_key(t)
                + if t.live.forever { " forever" } else { "" },
            "mops",
            t.mops,
        ),
    }
}

/// The conditions a file's figures were measured under. Files whose
/// conditions differ measure different things (one device in loopback vs
/// two hosts; a fixed count vs a fixed time; a guest vs hardware; a
/// microsecond clock vs a cycle counter), so `compare` refuses to ratio them
/// unless told to.
pub fn conditions(d: &ResultsDoc) -> Vec<(&'static str, String)> {
    let mut modes: Vec<&str> = if d.schema_version < 2 {
        // Schema 1 did not record -n or -D per point.
        vec![UNKNOWN]
    } else {
        d.results
            .iter()
            .map(|r| match r {
                Record::Latency(l) if l.live.forever => "until stopped (--forever)",
                Record::Throughput(t) if t.live.forever => "until stopped (--forever)",
                Record::Latency(l) if l.requested_s.is_some() => "duration (-D)",
                Record::Latency(_) => "iterations (-n)",
                Record::Throughput(t) if t.iters.is_some() => "iterations (-n)",
                Record::Throughput(_) => "duration (-D)",
            })
            .collect()
    };
    modes.sort_unstable();
    modes.dedup();
    vec![
        ("peer mode", d.peer.mode.clone()),
        ("iteration mode", modes.join(" and ")),
        (
            "environment",
            d.environment
                .clone()
                .unwrap_or_else(|| "none recorded".into()),
        ),
        ("clock source", d.clock_source()),
    ]
}

/// A condition an older file did not record: it matches anything.
const UNKNOWN: &str = "not recorded (schema 1)";

/// Refuses (exit 2) files whose run conditions differ from the first's,
/// naming the field.
fn check_conditions(docs: &[(String, ResultsDoc)]) -> Result<()> {
    let Some((first_file, first)) = docs.first() else {
        return Ok(());
    };
    let base = conditions(first);
    for (file, d) in &docs[1..] {
        for ((field, a), (_, b)) in base.iter().zip(conditions(d)) {
            if *a != b && a != UNKNOWN && b != UNKNOWN {
                return Err(Error::usage(format!(
                    "compare: {field} differs: {} has '{}', {} has '{}' (their figures measure different things; --force compares them anyway)",
                    printable(first_file),
                    printable(a),
                    printable(file),
                    printable(&b)
                )));
            }
        }
    }
    Ok(())
}

/// Reads one input file (see `results::load`).
pub fn load(path: &Path) -> Result<ResultsDoc> {
    crate::results::load(path)
}

pub fn compare(docs: &[(String, ResultsDoc)]) -> Comparison {
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
    let mut table: BTreeMap<String, (&'static str, Vec<Option<f64>>)> = BTreeMap::new();
    for (i, (_, d)) in docs.iter().enumerate() {
        for r in &d.results {
            let (key, figure, value) = point_key(r);
            // Each point's figure, then (where measured) what it cost in CPU.
            let cost = cpu_cost(r).map(|(f, v)| (format!("{key} cpu"), f, v));
            for (key, figure, value) in std::iter::once((key, figure, value)).chain(cost) {
                let entry = table.entry(key.clone()).or_insert_with(|| {
                    order.push(key.clone());
                    (figure, vec![None; docs.len()])
                });
                // A file with a point twice keeps its first measurement.
                if entry.1[i].is_none() {
                    entry.1[i] = Some(value);
                }
            }
        }
    }
    let rows = order
        .into_iter()
        .map(|key| {
            let (figure, values) = table
                .remove(&key)
                .expect("every ordered key is in the table");
            let ratios = values
                .iter()
                .map(|v| match (values[0], v) {
                    (Some(a), Some(b)) if a > 0.0 => Some(b / a),
                    _ => None,
                })
                .collect();
            Row {
                point: key,
                figure: figure.to_string(),
                values,
                ratios,
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

fn fmt_value(figure: &str, v: Option<f64>) -> String {
    match (figure, v) {
        (_, None) => "-".into(),
        ("process_cpu_pct", Some(p)) => format!("{p:.0}% cpu"),
        ("cpu_s_per_mop", Some(c)) => format!("{c:.3} cpu-s/Mop"),
        ("p50_ns", Some(ns)) => format!("{:.2} us", ns / 1000.0),
        (_, Some(m)) => format!("{m:.4} Mops"),
    }
}

/// The column name of the `i`-th file: A..Z, then AA..ZZ, AAA.. (as spreadsheets).
pub fn column(i: usize) -> String {
    let mut n = i;
    let mut out = Vec::new();
    loop {
        out.push(b'A' + (n % 26) as u8);
        if n < 26 {
            break;
        }
        n = n / 26 - 1;
    }
    out.reverse();
    String::from_utf8(out).expect("ASCII letters")
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
    let docs = inputs::load_all(&args.files)?;
    if !args.force {
        check_conditions(&docs)?;
    }
    let mut cmp = compare(&docs);
    cmp.expectations = expect::judge(&exps, &docs);
    // The files before the table: a reader that stops early (`| head`) loses nothing.
    if let Some(p) = &args.json {
        let mut bytes = serde_json::to_vec_pretty(&cmp).expect("comparisons serialise");
        bytes.push(b'\n');
        write_atomically(p, &bytes)?;
    }
    if let Some(p) = &args.csv {
        write_atomically(p, &to_csv(&cmp)?)?;
    }
    if let Some(p) = &args.markdown {
        write_atomically(p, to_markdown(&cmp, &docs).as_bytes())?;
    }
    print_table(&cmp)?;
    expect::print(&cmp.expectations)?;
    expect::met(&cmp.expectations)
}

/// The comparison on stdout; text from the files is printed escaped.
fn print_table(cmp: &Comparison) -> Result<()> {
    for (i, s) in cmp.sources.iter().enumerate() {
        print_line(&format!(
            "# [{}] {} — {}",
            column(i),
            printable(&s.label),
            printable(&s.file)
        ))?;
    }
    print_line("# latency figures are p50 (µs), throughput figures Mops; ratio = file / [A]; a point's \"cpu\" row: this process's CPU (latency: % of one CPU; throughput: CPU-seconds per million ops)")?;
    print_line(&format!("# points matched on: {MATCHED_ON}"))?;
    for (field, value) in &cmp.conditions {
        print_line(&format!("# {field}: {}", printable(value)))?;
    }
    let mut header = format!("{:<70}", "point");
    for i in 0..cmp.sources.len() {
        let c = column(i);
        header.push_str(&format!(" {:>14}", format!("[{c}]")));
        if i > 0 {
            header.push_str(&format!(" {:>8}", format!("{c}/A")));
        }
    }
    print_line(&header)?;
    let mut one_sided = 0usize;
    for row in &cmp.rows {
        let mut line = format!("{:<70}", printable(&row.point));
        for (i, v) in row.values.iter().enumerate() {
            line.push_str(&format!(" {:>14}", fmt_value(&row.figure, *v)));
            if i > 0 {
                line.push_str(&format!(
                    " {:>8}",
                    row.ratios[i]
                        .map(|r| format!("{r:.3}"))
                        .unwrap_or_else(|| "-".into())
                ));
            }
        }
        if row.values.iter().any(Option::is_none) {
            one_sided += 1;
            let present: Vec<String> = row
                .values
                .iter()
                .enumerate()
                .filter(|(_, v)| v.is_some())
                .map(|(i, _)| column(i))
                .collect();
            line.push_str(&format!("  only in {}", present.join(",")));
        }
        print_line(&line)?;
    }
    print_line(&format!(
        "# {} points, {} matched in every file, {} present in some files only",
        cmp.rows.len(),
        cmp.rows.len() - one_sided,
        one_sided
    ))
}

/// The comparison as Markdown: each file with its environment line, the
/// conditions, then one row per point with every file's figure and its ratio.
fn to_markdown(cmp: &Comparison, docs: &[(String, ResultsDoc)]) -> String {
    use crate::export::markdown::{cell, environment_lines, table};
    let mut out = String::from("### rdma-bench compare\n\n");
    for (i, (s, (_, d))) in cmp.sources.iter().zip(docs).enumerate() {
        out.push_str(&format!(
            "- **[{}]** {} — `{}`  \n  {}\n",
            column(i),
            cell(&s.label),
            cell(&s.file).replace('`', "'"),
            environment_lines(d)
                .iter()
                .map(|l| cell(l))
                .collect::<Vec<_>>()
                .join("  \n  ")
        ));
    }
    out.push_str("\nLatency figures are p50 in µs, throughput figures Mops (10^6 operations/s); ratio = file / [A].  \n");
    out.push_str(&format!("Points matched on: {MATCHED_ON}.  \n"));
    for (field, value) in &cmp.conditions {
        out.push_str(&format!("{}: {}  \n", cell(field), cell(value)));
    }
    out.push('\n');
    let mut header = vec!["point".to_string()];
    for i in 0..cmp.sources.len() {
        let c = column(i);
        header.push(format!("[{c}]"));
        if i > 0 {
            header.push(format!("{c}/A"));
        }
    }
    let right: Vec<bool> = (0..header.len()).map(|i| i > 0).collect();
    let rows: Vec<Vec<String>> = cmp
        .rows
        .iter()
        .map(|row| {
            let mut r = vec![row.point.trim().to_string()];
            for (i, v) in row.values.iter().enumerate() {
                r.push(fmt_value(&row.figure, *v));
                if i > 0 {
                    r.push(
                        row.ratios[i]
                            .map(|x| format!("{x:.3}"))
                            .unwrap_or_else(|| "-".into()),
                    );
                }
            }
            r
        })
        .collect();
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    out.push_str(&table(&header, &right, &rows));
    out
}

fn to_csv(cmp: &Comparison) -> Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let err = |e: csv::Error| Error::io("formatting CSV", e.into());
    let mut header = vec!["point".to_string(), "figure".to_string()];
    for (i, s) in cmp.sources.iter().enumerate() {
        header.push(s.file.clone());
        if i > 0 {
            header.push(format!("ratio {}", s.file));
        }
    }
    w.write_record(&header).map_err(err)?;
    for row in &cmp.rows {
        let mut rec = vec![row.point.clone(), row.figure.clone()];
        for (i, v) in row.values.iter().enumerate() {
            rec.push(v.map(|v| v.to_string()).unwrap_or_default());
            if i > 0 {
                rec.push(row.ratios[i].map(|r| r.to_string()).unwrap_or_default());
            }
        }
        w.write_record(&rec).map_err(err)?;
    }
    w.into_inner()
        .map_err(|e| Error::io("formatting CSV", e.into_error()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{DeviceInfo, LatencyRecord, Record, ResultsDoc, TputRecord};
    use crate::stats::LatencyStats;

    fn doc(device: &str, part: u32, points: &[(u32, f64)]) -> (String, ResultsDoc) {
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
    fn bidirectional_and_srq_join_the_tput_key_only_when_set() {
        let v = serde_json::json!({
            "kind": "throughput", "verb": "send", "direction": "outbound", "transport": "rc",
            "size": 64, "inline": false, "imm": false, "op": null, "req": null, "resp": null,
            "signal_period": 64, "qps": 1, "postlist": 1, "window": 128, "threads": 1,
            "warmup_s": 0.2, "ops": 10, "elapsed_s": 1.0, "mops": 1.0, "gbps": 0.5,
            "mib_s": 61.0, "sent": 10, "received": 10, "lost": 0, "responses": null,
            "completions": 1, "per_thread": [], "per_qp_ops": [10], "group_clients": 1,
            "aggregate_mops": null, "clients": []
        });
        // A file written before the options existed reads as neither.
        let old: Record = serde_json::from_value(v).unwrap();
        let key = point_key(&old).0;
        assert!(
            !key.contains("bidirectional") && !key.contains("srq"),
            "{key}"
        );
        let mut both = old.clone();
        if let Record::Throughput(t) = &mut both {
            t.bidirectional = true;
            t.srq = true;
        }
        let k2 = point_key(&both).0;
        assert!(k2.contains(" bidirectional srq size 64"), "{k2}");
        let mut srq = old.clone();
        if let Record::Throughput(t) = &mut srq {
            t.srq = true;
        }
        let k3 = point_key(&srq).0;
        assert!(
            k3.contains(" srq size") && !k3.contains("bidirectional"),
            "{k3}"
        );
        assert_ne!(key, k3);
    }

    /// Every knob of the runs both records share (posting, path, memory)
    /// joins the key when set, on either kind of record: a new field in one
    /// of those structs that `compare` does not match on fails here.
    #[test]
    fn every_shared_knob_joins_the_key_when_set() {
        let (_, d) = doc("rxe0", 0, &[(64, 1000.0)]);
        let records = [
            serde_json::to_value(&d.results[0]).unwrap(),
            serde_json::to_value(Record::Throughput(TputRecord::example())).unwrap(),
        ];
        let knobs = [
            PostingFields::COLUMNS,
            PathFields::COLUMNS,
            MemoryFields::COLUMNS,
        ]
        .concat();
        for v in &records {
            let plain = point_key(&serde_json::from_value(v.clone()).unwrap()).0;
            for knob in &knobs {
                // The first of these values the field takes that is not what
                // the plain record has.
                let set = [
                    serde_json::json!(true),
                    serde_json::json!(7),
                    serde_json::json!("ex"),
                ]
                .into_iter()
                .filter(|x| v.get(*knob) != Some(x))
                .find_map(|x| {
                    let mut w = v.clone();
                    w.as_object_mut().unwrap().insert(knob.to_string(), x);
                    serde_json::from_value::<Record>(w).ok()
                })
                .unwrap_or_else(|| panic!("no value to set {knob} to"));
                let key = point_key(&set).0;
                assert_ne!(key, plain, "{knob} set does not change the key");
            }
        }
    }

    #[test]
    fn the_memory_layout_joins_the_key_only_when_not_the_default() {
        let (_, a) = doc("mlx5_0", 4123, &[(64, 1200.0)]);
        let mut r = a.results[0].clone();
        let old = point_key(&r).0;
        if let Record::Latency(l) = &mut r {
            l.memory.hugepages = true;
            l.memory.region = Some(4096);
            l.memory.offsets = "random".into();
        }
        let new = point_key(&r).0;
        assert!(
            new.contains(" hugepages region 4096 offsets random "),
            "{new}"
        );
        // A file written before these options reads as the default layout.
        let mut v = serde_json::to_value(&a.results[0]).unwrap();
        for k in ["hugepages", "mr_per_qp", "region", "offsets"] {
            v.as_object_mut().unwrap().remove(k);
        }
        let back: Record = serde_json::from_value(v).unwrap();
        assert_eq!(point_key(&back).0, old);
    }

    #[test]
    fn events_and_post_api_join_the_key_only_when_not_default() {
        let (_, a) = doc("mlx5_0", 4123, &[(64, 1200.0)]);
        let mut r = a.results[0].clone();
        let old = point_key(&r).0;
        assert!(
            !old.contains("events") && !old.contains("post-api"),
            "{old}"
        );
        if let Record::Latency(l) = &mut r {
            l.posting.events = true;
            l.posting.post_api = crate::spec::PostApi::Ex;
        }
        let new = point_key(&r).0;
        assert!(new.contains(" events post-api ex "), "{new}");
        // A file written before either existed reads as no events, classic.
        let mut v = serde_json::to_value(&a.results[0]).unwrap();
        v.as_object_mut().unwrap().remove("events");
        v.as_object_mut().unwrap().remove("post_api");
        let back: Record = serde_json::from_value(v).unwrap();
        assert_eq!(point_key(&back).0, old);
    }

    #[test]
    fn inline_size_joins_the_key_as_asked_and_old_files_have_none() {
        let (_, a) = doc("mlx5_0", 4123, &[(16, 1200.0)]);
        let mut r = a.results[0].clone();
        let old = point_key(&r).0;
        assert!(!old.contains("inline"), "{old}");
        if let Record::Latency(l) = &mut r {
            l.posting.inline = true;
            l.posting.inline_size = Some(64);
        }
        let new = point_key(&r).0;
        assert!(new.contains(" inline inline_size 64 "), "{new}");
        // --inline (no limit) and -I 64 at the same size are different runs.
        if let Record::Latency(l) = &mut r {
            l.posting.inline_size = None;
        }
        assert_ne!(point_key(&r).0, new);
        // A file from before -I has no inline_size: no limit.
        let mut v = serde_json::to_value(&a.results[0]).unwrap();
        assert!(v.get("inline_size").is_none(), "absent when not asked");
        v.as_object_mut().unwrap().remove("inline_size");
        let back: Record = serde_json::from_value(v).unwrap();
        assert_eq!(point_key(&back).0, old);
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
        let c = compare(&[(fa, a.clone()), (fb, b)]);
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
    fn sge_joins_the_key_only_when_not_one() {
        let (_, a) = doc("mlx5_0", 4123, &[(64, 1200.0)]);
        let mut r = a.results[0].clone();
        let old = point_key(&r).0;
        assert!(!old.contains("sge"), "{old}");
        if let Record::Latency(l) = &mut r {
            l.posting.sge = 4;
        }
        let new = point_key(&r).0;
        assert!(new.contains(" sge 4 "), "{new}");
        assert_ne!(old, new);
        // A file written before --sge existed reads as sge 1.
        let mut v = serde_json::to_value(&a.results[0]).unwrap();
        v.as_object_mut().unwrap().remove("sge");
        let back: Record = serde_json::from_value(v).unwrap();
        assert_eq!(point_key(&back).0, old);
    }

    #[test]
    fn the_load_as_asked_joins_the_key() {
        let (_, d) = doc("rxe0", 0, &[(64, 1000.0)]);
        let plain = point_key(&d.results[0]).0;
        let mut a = d.results[0].clone();
        if let Record::Latency(l) = &mut a {
            l.load = Some("10%".into());
            l.offered_mops = Some(0.5);
            l.achieved_mops = Some(0.49);
        }
        let loaded = point_key(&a).0;
        assert_eq!(loaded, format!("{plain} load 10%"));
        // The offered Mops of a percentage differ between devices: not in the key.
        let mut b = a.clone();
        if let Record::Latency(l) = &mut b {
            l.offered_mops = Some(2.0);
        }
        assert_eq!(point_key(&b).0, loaded);
        let v = serde_json::to_value(&d.results[0]).unwrap();
        assert!(v.get("load").is_none(), "absent in an unloaded run: {v}");
    }

    #[test]
    fn path_options_join_the_key_only_when_requested() {
        let (_, d) = doc("rxe0", 0, &[(64, 1000.0)]);
        let plain = point_key(&d.results[0]).0;
        assert_eq!(plain, "latency write half_rtt rc size 64");
        // An older file (no such fields) keys like a run without the options.
        let old: ResultsDoc = serde_json::from_value(serde_json::to_value(&d).unwrap()).unwrap();
        assert_eq!(point_key(&old.results[0]).0, plain);
        let mut q = d.clone();
        if let Record::Latency(l) = &mut q.results[0] {
            l.path.tclass = Some(96);
            l.path.mtu = Some(1024);
        }
        assert_eq!(
            point_key(&q.results[0]).0,
            "latency write half_rtt rc tclass 96 mtu 1024 size 64"
        );
        let v = serde_json::to_value(&d.results[0]).unwrap();
        assert!(v.get("tclass").is_none(), "absent when not requested: {v}");
    }

    #[test]
    fn differing_run_conditions_are_refused_naming_the_field() {
        let a = doc("mlx5_0", 4123, &[(64, 1200.0)]);
        let mut b = doc("mlx5_0", 4123, &[(64, 1100.0)]);
        assert!(check_conditions(&[a.clone(), b.clone()]).is_ok());
        b.1.peer.mode = "tcp".into();
        let e = check_conditions(&[a.clone(), b.clone()]).unwrap_err();
        assert!(e.to_string().contains("peer mode differs"), "{e}");
        assert_eq!(e.exit_code(), 2);
        let mut c = a.clone();
        if let Record::Latency(l) = &mut c.1.results[0] {
            l.requested_s = Some(1.0);
        }
        let e = check_conditions(&[a.clone(), c]).unwrap_err();
        assert!(e.to_string().contains("iteration mode differs"), "{e}");
        let mut d = a.clone();
        d.1.environment = Some("soft-RoCE (rxe) in a qemu guest".into());
        let e = check_conditions(&[a, d]).unwrap_err();
        assert!(e.to_string().contains("environment differs"), "{e}");
    }

    #[test]
    fn schema_1_peer_strings_read_as_modes() {
        let v1 = |peer: &str| -> crate::results::PeerDoc {
            let text = format!(r#"{{"peer": {}}}"#, serde_json::to_string(peer).unwrap());
            #[derive(serde::Deserialize)]
            struct P {
                #[serde(deserialize_with = "crate::results::peer_v1_or_v2")]
                peer: crate::results::PeerDoc,
            }
            serde_json::from_str::<P>(&text).unwrap().peer
        };
        assert_eq!(v1("loopback").mode, "loopback");
        let tcp = v1("192.0.2.1:18515");
        assert_eq!(
            (tcp.mode.as_str(), tcp.address.as_deref()),
            ("tcp", Some("192.0.2.1:18515"))
        );
        assert_eq!(v1("mpirun: rank 0 serving 2 client ranks").mode, "mpi");
    }

    #[test]
    fn columns_go_past_z_without_overflow() {
        assert_eq!(column(0), "A");
        assert_eq!(column(25), "Z");
        assert_eq!(column(26), "AA");
        assert_eq!(column(27), "AB");
        assert_eq!(column(199), "GR");
        assert_eq!(column(701), "ZZ");
        assert_eq!(column(702), "AAA");
    }

    #[test]
    fn points_match_by_parameters_and_one_sided_ones_stay() {
        let a = doc("mlx4_0", 4099, &[(2, 2000.0), (64, 2400.0), (4096, 9000.0)]);
        let b = doc("mlx5_0", 4123, &[(64, 1200.0), (2, 1000.0), (8192, 5000.0)]);
        let cmp = compare(&[a, b]);
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

    #[test]
    fn cm_joins_the_key_and_older_files_count_as_gid() {
        let (_, d) = doc("rxe0", 0, &[(64, 1000.0)]);
        let gid = d.results[0].clone();
        let mut cm = gid.clone();
        if let Record::Latency(l) = &mut cm {
            l.connection = "cm".into();
        }
        assert!(point_key(&cm).0.contains(" cm "), "{}", point_key(&cm).0);
        assert_ne!(point_key(&gid).0, point_key(&cm).0);
        // A record from before --cm has no `connection`: it reads as "gid"
        // and lines up with a GID-connected point of a newer file.
        let mut v = serde_json::to_value(&gid).unwrap();
        v.as_object_mut().unwrap().remove("connection");
        let old: Record = serde_json::from_value(v).unwrap();
        assert_eq!(point_key(&old).0, point_key(&gid).0);
    }
}
