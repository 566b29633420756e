//! Turning a results document into bytes (JSON, CSV, Markdown) behind one small trait,
//! and writing every target again after each point so an interrupted run
//! keeps everything it measured.

mod csv;
mod json;
pub mod markdown;
mod samples;

pub use self::csv::CsvExporter;
pub use self::json::JsonExporter;
pub use self::markdown::MarkdownExporter;
pub use self::samples::{SampleOrder, SamplesFile};

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::output_target::Target;
use crate::results::ResultsDoc;

pub trait Exporter: Send + Sync {
    fn serialize(&self, doc: &ResultsDoc) -> Result<Vec<u8>>;
}

/// The files a run writes, each rewritten whole after every point.
pub struct ResultsSink {
    /// (the option that named it, path, format)
    targets: Vec<(&'static str, PathBuf, Box<dyn Exporter>)>,
    /// `-H`/`-U`: written point by point by the run, vetted with the rest.
    samples: Option<SamplesFile>,
}

impl ResultsSink {
    pub fn new(json: Option<PathBuf>, csv: Option<PathBuf>) -> Self {
        Self::named(("--json", json), ("--csv", csv))
    }

    /// Like `new`, with the options (or words) that name each file in errors.
    pub fn named(
        json: (&'static str, Option<PathBuf>),
        csv: (&'static str, Option<PathBuf>),
    ) -> Self {
        let mut targets: Vec<(&'static str, PathBuf, Box<dyn Exporter>)> = Vec::new();
        if let (option, Some(p)) = json {
            targets.push((option, p, Box::new(JsonExporter)));
        }
        if let (option, Some(p)) = csv {
            targets.push((option, p, Box::new(CsvExporter)));
        }
        Self {
            targets,
            samples: None,
        }
    }

    /// `-H`/`-U`'s samples file, when asked for.
    pub fn with_samples(mut self, samples: Option<SamplesFile>) -> Self {
        self.samples = samples;
        self
    }

    pub fn samples(&self) -> Option<&SamplesFile> {
        self.samples.as_ref()
    }

    /// Also writes a Markdown table to `path`, when given (`option` names it in errors).
    pub fn with_markdown(mut self, option: &'static str, path: Option<PathBuf>) -> Self {
        if let Some(p) = path {
            self.targets.push((option, p, Box::new(MarkdownExporter)));
        }
        self
    }

    /// Checks up front that every target can be written (see
    /// `output_target`), so a bad path fails before an hour of measuring
    /// rather than after.
    pub fn check_writable(&self) -> Result<()> {
        self.check_targets(&[])
    }

    /// `check_writable`, also refusing any target that is one of `inputs`.
    pub fn check_targets(&self, inputs: &[&Path]) -> Result<()> {
        let targets: Vec<Target> = self
            .targets
            .iter()
            .map(|(option, path, _)| Target { option, path })
            .chain(self.samples.as_ref().map(SamplesFile::target))
            .collect();
        crate::output_target::check(&targets, inputs)
    }

    pub fn write(&self, doc: &ResultsDoc) -> Result<()> {
        for (_, path, exporter) in &self.targets {
            write_atomically(path, &exporter.serialize(doc)?)?;
        }
        Ok(())
    }
}

/// Writes through a temporary file beside the target and a rename, so
/// readers (and a crash mid-write) never see a half-written file. The
/// temporary file is created new (never an existing file, never through a
/// link) and removed on any failure; a target that is no longer a regular
/// file (or a new file) is not replaced.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomically_with(path, |w| w.write_all(bytes))
}

/// `write_atomically`, the contents written by `fill` (which may copy
/// from the file it replaces: the rename comes after it).
pub fn write_atomically_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<()> {
    use std::io::Write;
    let failed = |e: std::io::Error| Error::io(format!("writing {}", path.display()), e);
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if !m.file_type().is_file() {
            return Err(failed(std::io::Error::other(
                "not a regular file; results go only to regular files",
            )));
        }
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| failed(std::io::Error::other("not a file name")))?;
    let (tmp, mut file) = (0..100)
        .find_map(|n| {
            let mut tmp_name = std::ffi::OsString::from(".");
            tmp_name.push(name);
            tmp_name.push(format!(".{}-{n}.tmp", std::process::id()));
            let tmp = dir.join(tmp_name);
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)
            {
                Ok(f) => Some(Ok((tmp, f))),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => None,
                Err(e) => Some(Err(e)),
            }
        })
        .unwrap_or_else(|| Err(std::io::Error::other("no free temporary file name")))
        .map_err(failed)?;
    let written = {
        let mut out = std::io::BufWriter::new(&mut file);
        fill(&mut out).and_then(|()| out.flush())
    }
    .and_then(|()| file.flush())
    .and_then(|()| {
        drop(file);
        std::fs::rename(&tmp, path)
    });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(failed(e));
    }
    Ok(())
}
