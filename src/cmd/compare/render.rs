//! A comparison as the reader gets it: the table on stdout, Markdown and
//! CSV, with each file named by its column (A, B, ...).

use super::matching::MATCHED_ON;
use super::{Comparison, Row};
use crate::analysis::uncertainty::Change;
use crate::error::{Error, Result};
use crate::escape::printable;
use crate::output::print_line;
use crate::results::ResultsDoc;

pub(super) fn fmt_value(figure: &str, v: Option<f64>) -> String {
    match (figure, v) {
        (_, None) => "-".into(),
        ("process_cpu_pct", Some(p)) => format!("{p:.0}% cpu"),
        ("cpu_s_per_mop", Some(c)) => format!("{c:.3} cpu-s/Mop"),
        ("p50_ns", Some(ns)) => format!("{:.2} us", ns / 1000.0),
        (_, Some(m)) => format!("{m:.4} Mops"),
    }
}

/// The one-character verdict printed after a ratio.
fn mark(c: Change) -> &'static str {
    match c {
        Change::Better => "+",
        Change::Worse => "-",
        Change::NoDifference => "=",
        Change::WithinNoise => "~",
        Change::NotJudged => "?",
    }
}

/// A row's verdict on file `i`'s ratio, as its mark ("" where no ratio).
fn row_mark(row: &Row, i: usize) -> &'static str {
    row.judged[i].map(|j| mark(j.change)).unwrap_or("")
}

const MARKS: &str = "after each ratio: + better, - worse, = no significant difference (its interval holds 1), ~ within --noise, ? not judged (a value has no interval: a CPU figure of a point measured in one pass, or a throughput point without --interval; --json and the Markdown say which); the brackets after a ratio are its 95% interval, [B.lo/A.hi, B.hi/A.lo] of each value's 95% interval (inf where A's reaches 0; blank where a value has none) (latency percentiles: order statistics of the histogram; Mops: t interval over the --interval figures; a point measured in passes: with the t interval over its passes, which alone gives a CPU figure one)";

/// The width of a ratio's interval cell: "[0.964, 1.041]" and a little
/// more, so most rows' marks line up.
const INTERVAL_W: usize = 16;

/// A ratio's 95% interval as the table shows it: "[1.180, 1.310]".
fn interval_cell(lo: f64, hi: f64) -> String {
    let end = |v: f64| {
        if v.is_finite() {
            format!("{v:.3}")
        } else {
            "inf".into()
        }
    };
    format!("[{}, {}]", end(lo), end(hi))
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

/// The comparison on stdout; text from the files is printed escaped.
pub(super) fn print_table(cmp: &Comparison) -> Result<()> {
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
    print_line(&format!("# {MARKS}"))?;
    for (field, value) in &cmp.conditions {
        print_line(&format!("# {field}: {}", printable(value)))?;
    }
    // As wide as the longest point, so every column lines up.
    let w = cmp
        .rows
        .iter()
        .map(|r| printable(&r.point).chars().count())
        .max()
        .unwrap_or(0)
        .max("point".len());
    let mut header = format!("{:<w$}", "point");
    for i in 0..cmp.sources.len() {
        let c = column(i);
        header.push_str(&format!(" {:>14}", format!("[{c}]")));
        if i > 0 {
            header.push_str(&format!(
                " {:>8} {:<INTERVAL_W$}  ",
                format!("{c}/A"),
                "[95% interval]"
            ));
        }
    }
    print_line(&header)?;
    let mut one_sided = 0usize;
    for row in &cmp.rows {
        let mut line = format!("{:<w$}", printable(&row.point));
        for (i, v) in row.values.iter().enumerate() {
            line.push_str(&format!(" {:>14}", fmt_value(&row.figure, *v)));
            if i > 0 {
                line.push_str(&format!(
                    " {:>8} {:<INTERVAL_W$} {:1}",
                    row.ratios[i]
                        .map(|r| format!("{r:.3}"))
                        .unwrap_or_else(|| "-".into()),
                    row.judged[i]
                        .and_then(|j| j.interval)
                        .map(|iv| interval_cell(iv.lo, iv.hi))
                        .unwrap_or_default(),
                    row_mark(row, i)
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
    ))?;
    for i in 1..cmp.sources.len() {
        let count = |c: Change| {
            cmp.rows
                .iter()
                .filter(|r| r.judged[i].is_some_and(|j| j.change == c))
                .count()
        };
        print_line(&format!(
            "# {}/A: {} better, {} worse, {} no significant difference, {} within noise, {} not judged",
            column(i),
            count(Change::Better),
            count(Change::Worse),
            count(Change::NoDifference),
            count(Change::WithinNoise),
            count(Change::NotJudged)
        ))?;
    }
    Ok(())
}

/// The comparison as Markdown: each file with its environment line, the
/// conditions, then one row per point with every file's figure and its ratio.
pub(super) fn to_markdown(cmp: &Comparison, docs: &[(String, ResultsDoc)]) -> String {
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
    out.push_str(&format!("Marks {MARKS}.  \n"));
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
            header.push(format!("{c} vs A"));
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
                    r.push(row.judged[i].map(|j| j.words()).unwrap_or_default());
                }
            }
            r
        })
        .collect();
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    out.push_str(&table(&header, &right, &rows));
    out
}

pub(super) fn to_csv(cmp: &Comparison) -> Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let err = |e: csv::Error| Error::io("formatting CSV", e.into());
    let mut header = vec!["point".to_string(), "figure".to_string()];
    for (i, s) in cmp.sources.iter().enumerate() {
        header.push(s.file.clone());
        if i > 0 {
            header.push(format!("ratio {}", s.file));
            header.push(format!("ratio low {}", s.file));
            header.push(format!("ratio high {}", s.file));
            header.push(format!("change {}", s.file));
        }
    }
    w.write_record(&header).map_err(err)?;
    for row in &cmp.rows {
        let mut rec = vec![row.point.clone(), row.figure.clone()];
        for (i, v) in row.values.iter().enumerate() {
            rec.push(v.map(|v| v.to_string()).unwrap_or_default());
            if i > 0 {
                rec.push(row.ratios[i].map(|r| r.to_string()).unwrap_or_default());
                let iv = row.judged[i].and_then(|j| j.interval);
                rec.push(iv.map(|x| x.lo.to_string()).unwrap_or_default());
                rec.push(iv.map(|x| x.hi.to_string()).unwrap_or_default());
                rec.push(row.judged[i].map(|j| j.words()).unwrap_or_default());
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
    fn an_interval_cell_fits_its_column_and_says_inf() {
        assert_eq!(interval_cell(1.18, 1.3104), "[1.180, 1.310]");
        assert_eq!(interval_cell(0.5, f64::INFINITY), "[0.500, inf]");
        assert!(interval_cell(0.964, 1.041).len() <= INTERVAL_W);
    }
}
