use super::Exporter;
use crate::error::Result;
use crate::results::ResultsDoc;

pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn serialize(&self, doc: &ResultsDoc) -> Result<Vec<u8>> {
        // Compact: latency histograms make pretty-printed files several times larger.
        let mut out = serde_json::to_vec(doc).expect("results always serialise");
        out.push(b'\n');
        Ok(out)
    }
}
