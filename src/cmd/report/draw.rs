//! The page's figures, drawn by the plotting scripts (one code per figure:
//! the same scripts `scripts/plot-results` runs): each figure's records are
//! written to temporary results files, one per input file so the scripts
//! still tell runs apart, each named by its profile's name (`--label`) for
//! the legends, and the script writes an SVG whose text is drawn
//! as paths (no fonts to fetch).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::analysis::figures::{by_series_of, Figure};
use crate::error::{Error, Result};
use crate::results::ResultsDoc;

/// Where the plotting scripts are: `--scripts`, `$RDMA_BENCH_SCRIPTS`, the
/// source tree's `scripts/` (a binary under `target/<profile>/`), then the
/// package's `/usr/share/rdma-bench/scripts`.
pub fn scripts_dir(given: Option<&Path>) -> Result<PathBuf> {
    let has = |d: &Path| d.join("rdma_results.py").is_file();
    if let Some(d) = given {
        return if has(d) {
            Ok(d.to_path_buf())
        } else {
            Err(Error::usage(format!(
                "--scripts {}: holds no rdma-bench plotting scripts (rdma_results.py)",
                d.display()
            )))
        };
    }
    let mut tried = Vec::new();
    if let Some(d) = std::env::var_os("RDMA_BENCH_SCRIPTS") {
        tried.push(PathBuf::from(d));
    }
    if let Ok(exe) = std::env::current_exe() {
        // target/debug/rdma-bench or target/<dir>/debug/rdma-bench → the tree's scripts/.
        for up in exe.ancestors().skip(1).take(4) {
            tried.push(up.join("scripts"));
        }
    }
    tried.push(PathBuf::from("/usr/share/rdma-bench/scripts"));
    tried.iter().find(|d| has(d)).cloned().ok_or_else(|| {
        Error::usage(format!(
            "report: cannot find the plotting scripts (looked in {}); give --scripts DIR",
            tried
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })
}

/// A scratch directory removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new() -> Result<Scratch> {
        let dir = std::env::temp_dir().join(format!("rdma-bench-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One figure as SVG markup (the XML prolog dropped), from every input
/// file's records of that figure; `files` are (profile name, document).
pub fn figure_svg(
    scripts: &Path,
    scratch: &Path,
    figure: Figure,
    files: &[(&str, &ResultsDoc)],
) -> Result<String> {
    let mut inputs = Vec::new();
    let mut labels = Vec::new();
    for (i, (label, doc)) in files.iter().enumerate() {
        let keep: Vec<_> = by_series_of([*doc])
            .into_iter()
            .filter(|s| s.figure == Some(figure))
            .flat_map(|s| s.records.into_iter().cloned())
            .collect();
        if keep.is_empty() {
            continue;
        }
        let mut part = (*doc).clone();
        part.results = keep;
        let path = scratch.join(format!("{}-{i}.json", figure.id()));
        let bytes = serde_json::to_vec(&part).expect("results documents serialise");
        std::fs::write(&path, bytes)
            .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
        inputs.push(path);
        // `=` so that a name starting with '-' is not read as an option.
        labels.push(format!("--label={label}"));
    }
    let out = scratch.join(format!("{}.svg", figure.id()));
    let drawing = figure.drawing();
    let script = scripts.join(drawing.script);
    let run = Command::new("python3")
        .arg(&script)
        .args(&inputs)
        .args(&labels)
        .args(drawing.args)
        .arg("-o")
        .arg(&out)
        .env("MPLBACKEND", "svg")
        .output()
        .map_err(|e| {
            Error::io(
                "report: starting python3 (the figures need python3 with matplotlib)",
                e,
            )
        })?;
    if !run.status.success() {
        let why = String::from_utf8_lossy(&run.stderr);
        let last = why
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        return Err(Error::Tool(format!(
            "report: {} failed drawing '{}' ({}): {}",
            drawing.script,
            figure.title(),
            run.status,
            crate::escape::printable(last)
        )));
    }
    let svg = std::fs::read_to_string(&out)
        .map_err(|e| Error::io(format!("reading {}", out.display()), e))?;
    // The markup from <svg on: the prolog and doctype have no place inline.
    let start = svg
        .find("<svg")
        .ok_or_else(|| Error::Tool(format!("report: {} wrote no <svg> element", drawing.script)))?;
    Ok(svg[start..].to_string())
}
