use super::Exporter;
use crate::error::{Error, Result};
use crate::results::{ResultsDoc, CSV_COLUMNS};

/// One row per record, the columns of `CSV_COLUMNS` in that order, plus the
/// device and host so rows from several files can be concatenated.
pub struct CsvExporter;

impl Exporter for CsvExporter {
    fn serialize(&self, doc: &ResultsDoc) -> Result<Vec<u8>> {
        let mut w = ::csv::Writer::from_writer(Vec::new());
        let csv_err = |e: ::csv::Error| Error::io("formatting CSV", e.into());
        let mut header = vec!["device", "host"];
        header.extend_from_slice(CSV_COLUMNS);
        w.write_record(&header).map_err(csv_err)?;
        for record in &doc.results {
            let value = serde_json::to_value(record).expect("records always serialise");
            let mut row = vec![doc.device.name.clone(), doc.host.hostname.clone()];
            for col in CSV_COLUMNS {
                row.push(match value.get(*col) {
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
