use super::Exporter;
use crate::error::{Error, Result};
use crate::results::{Record, ResultsDoc, CSV_COLUMNS, TPUT_CSV_COLUMNS};

/// One row per record: `kind`, `device` and `host` (so rows from several
/// files can be concatenated), then the latency columns (`CSV_COLUMNS`), the
/// throughput ones (`TPUT_CSV_COLUMNS`), or both when a file holds both kinds.
pub struct CsvExporter;

fn columns(doc: &ResultsDoc) -> Vec<&'static str> {
    let has_lat = doc.results.iter().any(|r| matches!(r, Record::Latency(_)));
    let has_tput = doc
        .results
        .iter()
        .any(|r| matches!(r, Record::Throughput(_)));
    let mut cols: Vec<&'static str> = Vec::new();
    if has_lat || !has_tput {
        cols.extend_from_slice(CSV_COLUMNS);
    }
    if has_tput {
        for c in TPUT_CSV_COLUMNS {
            if !cols.contains(c) {
                cols.push(c);
            }
        }
    }
    cols
}

impl Exporter for CsvExporter {
    fn serialize(&self, doc: &ResultsDoc) -> Result<Vec<u8>> {
        let mut w = ::csv::Writer::from_writer(Vec::new());
        let csv_err = |e: ::csv::Error| Error::io("formatting CSV", e.into());
        let cols = columns(doc);
        let mut header = vec!["kind", "device", "host"];
        header.extend_from_slice(&cols);
        w.write_record(&header).map_err(csv_err)?;
        for record in &doc.results {
            let value = serde_json::to_value(record).expect("records always serialise");
            let kind = value["kind"].as_str().unwrap_or("").to_string();
            let mut row = vec![kind, doc.device.name.clone(), doc.host.hostname.clone()];
            for col in &cols {
                // `a.b` names field b of the object in field a (cpu_util.local_pct).
                let cell = col.split('.').try_fold(&value, |v, part| v.get(part));
                row.push(match cell {
                    None | Some(serde_json::Value::Null) => String::new(),
                    Some(serde_json::Value::String(s)) => s.clone(),
                    Some(v) => v.to_string(),
                });
            }
            w.write_record(&row).map_err(csv_err)?;
        }
        w.into_inner()
            .map_err(|e| Error::io("formatting CSV", e.into_error()))
    }
}
