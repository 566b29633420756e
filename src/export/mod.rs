//! Turning a results document into bytes (JSON, CSV) behind one small trait,
//! and writing every target again after each point so an interrupted run
//! keeps everything it measured.

mod csv;
mod json;

pub use self::csv::CsvExporter;
pub use self::json::JsonExporter;

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::results::ResultsDoc;

pub trait Exporter {
    fn serialize(&self, doc: &ResultsDoc) -> Result<Vec<u8>>;
}

/// The files a run writes, each rewritten whole after every point.
pub struct ResultsSink {
    targets: Vec<(PathBuf, Box<dyn Exporter>)>,
}

impl ResultsSink {
    pub fn new(json: Option<PathBuf>, csv: Option<PathBuf>) -> Self {
        let mut targets: Vec<(PathBuf, Box<dyn Exporter>)> = Vec::new();
        if let Some(p) = json {
            targets.push((p, Box::new(JsonExporter)));
        }
        if let Some(p) = csv {
            targets.push((p, Box::new(CsvExporter)));
        }
        Self { targets }
    }

    /// Checks up front that every target can be written, so a typo in a path
    /// fails before an hour of measuring rather than after.
    pub fn check_writable(&self) -> Result<()> {
        for (path, _) in &self.targets {
            let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
            if let Some(dir) = dir {
                if !dir.is_dir() {
                    return Err(Error::usage(format!(
                        "{}: directory {} does not exist",
                        path.display(),
                        dir.display()
                    )));
                }
            }
        }
        Ok(())
    }

    pub fn write(&self, doc: &ResultsDoc) -> Result<()> {
        for (path, exporter) in &self.targets {
            write_atomically(path, &exporter.serialize(doc)?)?;
        }
        Ok(())
    }
}

/// Writes through a temporary file and a rename, so readers (and a crash
/// mid-write) never see a half-written file.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes).map_err(|e| Error::io(format!("writing {}", tmp.display()), e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(format!("renaming to {}", path.display()), e))
}
