use super::Exporter;
use crate::error::Result;
use crate::results::ResultsDoc;

pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn serialize(&self, doc: &ResultsDoc) -> Result<Vec<u8>> {
        let mut out = serde_json::to_vec_pretty(doc).expect("results always serialise");
        out.push(b'\n');
        Ok(out)
    }
}
