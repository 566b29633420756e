//! Markdown: a table ready to paste into an issue or a paper. Above it, what
//! ran where (command line, device, host, environment, clock), so a pasted
//! table carries its conditions; every column header names its unit.

use super::Exporter;
use crate::error::Result;
use crate::results::{LatencyRecord, ResultsDoc, TputRecord};

pub struct MarkdownExporter;

/// One table cell: `|` escaped and line breaks flattened, so text from a
/// file (a host name, a series) cannot break the table.
pub fn cell(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace(['\n', '\r'], " ")
}

/// A GitHub-flavoured Markdown table; `right[i]` aligns column i right (numbers).
pub fn table(header: &[&str], right: &[bool], rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    let line = |cells: &mut dyn Iterator<Item = String>| {
        let mut l = String::from("|");
        for c in cells {
            l.push(' ');
            l.push_str(&c);
            l.push_str(" |");
        }
        l.push('\n');
        l
    };
    out.push_str(&line(&mut header.iter().map(|h| cell(h))));
    out.push_str(&line(&mut (0..header.len()).map(|i| {
        if right.get(i).copied().unwrap_or(false) {
            "---:".to_string()
        } else {
            "---".to_string()
        }
    })));
    for r in rows {
        out.push_str(&line(&mut r.iter().map(|c| cell(c))));
    }
    out
}

/// The lines that say where a document's figures come from.
pub fn environment_lines(doc: &ResultsDoc) -> Vec<String> {
    let d = &doc.device;
    let mut lines = vec![
        format!(
            "Device: {} (port {}, {}, active MTU {}, {} Gb/s, firmware {}); peer: {}{}",
            crate::device_name::human_name(&d.name, d.vendor_id, d.vendor_part_id),
            d.port,
            d.link_layer,
            d.active_mtu,
            d.speed_gbps,
            d.fw_ver,
            doc.peer.mode,
            doc.peer
                .address
                .as_deref()
                .map(|a| format!(" {a}"))
                .unwrap_or_default()
        ),
        format!(
            "Host: {} ({}, Linux {}); environment: {}",
            doc.host.hostname,
            doc.host.cpu_model,
            doc.host.kernel,
            doc.environment.as_deref().unwrap_or("none recorded")
        ),
        format!(
            "Clock: {}{}; read cost {:.1} ns; started {}; {} {}",
            doc.clock.source,
            doc.clock
                .ghz
                .map(|g| format!(" at {g:.3} GHz"))
                .unwrap_or_default(),
            doc.clock.read_ns,
            doc.started_utc,
            doc.tool,
            doc.tool_version
        ),
    ];
    if !doc.command_line.is_empty() {
        lines.insert(
            0,
            format!(
                "Command: `{}`",
                doc.command_line.join(" ").replace('`', "'")
            ),
        );
    }
    lines
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

fn latency_table(records: &[&LatencyRecord]) -> String {
    let header = [
        "series",
        "verb",
        "metric",
        "transport",
        "size [B]",
        "inline",
        "iters",
        "min [µs]",
        "p50 [µs]",
        "p90 [µs]",
        "p99 [µs]",
        "p99.9 [µs]",
        "max [µs]",
        "mean [µs]",
        "stdev [µs]",
    ];
    let right: Vec<bool> = (0..header.len()).map(|i| i >= 4 && i != 5).collect();
    let us = |ns: f64| format!("{:.2}", ns / 1000.0);
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            let s = &r.stats;
            vec![
                r.series.clone().unwrap_or_else(|| "-".into()),
                r.verb.clone(),
                r.metric.clone(),
                r.transport.clone(),
                r.size.to_string(),
                if r.posting.inline { "yes" } else { "no" }.into(),
                r.iters.to_string(),
                us(s.min_ns),
                us(s.p50_ns),
                us(s.p90_ns),
                us(s.p99_ns),
                us(s.p999_ns),
                us(s.max_ns),
                us(s.mean_ns),
                us(s.stdev_ns),
            ]
        })
        .collect();
    table(&header, &right, &rows)
}

fn tput_table(records: &[&TputRecord]) -> String {
    let header = [
        "series",
        "verb",
        "direction",
        "transport",
        "size [B]",
        "S",
        "QPs",
        "postlist",
        "window",
        "threads",
        "Mops [10^6 op/s]",
        "Gb/s [10^9 bit/s]",
        "MiB/s",
        "sent [WRs]",
        "received",
        "lost",
    ];
    let right: Vec<bool> = (0..header.len()).map(|i| i >= 4).collect();
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            vec![
                r.series.clone().unwrap_or_else(|| "-".into()),
                r.verb.clone(),
                r.direction.clone(),
                r.transport.clone(),
                r.size.to_string(),
                r.signal_period.to_string(),
                r.qps.to_string(),
                r.postlist.to_string(),
                r.window.to_string(),
                r.threads.to_string(),
                format!("{:.4}", r.mops),
                format!("{:.3}", r.gbps),
                format!("{:.1}", r.mib_s),
                r.sent.to_string(),
                opt(r.received),
                opt(r.lost),
            ]
        })
        .collect();
    table(&header, &right, &rows)
}

impl Exporter for MarkdownExporter {
    fn serialize(&self, doc: &ResultsDoc) -> Result<Vec<u8>> {
        let mut out = format!(
            "### rdma-bench{} on {}\n\n",
            doc.experiment
                .as_deref()
                .map(|e| format!(" `{}`", e.replace('`', "'")))
                .unwrap_or_default(),
            cell(&doc.device.name)
        );
        for l in environment_lines(doc) {
            out.push_str(&format!("{}  \n", cell(&l)));
        }
        out.push('\n');
        let lat: Vec<&LatencyRecord> = doc.latency().collect();
        let tput: Vec<&TputRecord> = doc.throughput().collect();
        if lat.is_empty() && tput.is_empty() {
            out.push_str("(no points measured yet)\n");
        }
        if !lat.is_empty() {
            out.push_str("Latency: `half_rtt` is half of each ping-pong round trip, `completion` the post of a signaled WR to its completion.\n\n");
            out.push_str(&latency_table(&lat));
        }
        if !tput.is_empty() {
            if !lat.is_empty() {
                out.push('\n');
            }
            out.push_str("Throughput: Mops = operations completed per µs in the measured window; Gb/s and MiB/s are the payload rate; S = one signaled WR every S.\n\n");
            out.push_str(&tput_table(&tput));
        }
        Ok(out.into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_cannot_break_the_table() {
        assert_eq!(cell("a|b\nc"), "a\\|b c");
        let t = table(
            &["x", "n [B]"],
            &[false, true],
            &[vec!["a|b".into(), "2".into()]],
        );
        assert_eq!(t, "| x | n [B] |\n| --- | ---: |\n| a\\|b | 2 |\n");
    }
}
