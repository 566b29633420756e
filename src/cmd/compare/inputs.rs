//! The files one `compare` reads, bounded together: how many, how much
//! their parsed forms may take at once (all of them are held until the
//! table is built), and how many cells the table gets (one per row and
//! file, rows being the distinct points and their CPU costs).

use std::collections::HashSet;
use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::results::ResultsDoc;

/// The most files one comparison takes (columns A to IV).
pub const MAX_FILES: usize = 256;

/// The most cells the table may have, rows x files: 16 bytes each, so at
/// most 160 MB however the files are chosen.
pub const MAX_CELLS: usize = 10_000_000;

/// Reads every file, refusing (exit 2, naming the file and the limit) more
/// than `MAX_FILES` before any is read, and a file that takes the parsed
/// memory or the table's cells over its limit before the next is read.
pub fn load_all(files: &[PathBuf]) -> Result<Vec<(String, ResultsDoc)>> {
    if files.len() > MAX_FILES {
        return Err(Error::usage(format!(
            "compare: {} files, more than the limit of {MAX_FILES} in one comparison",
            files.len()
        )));
    }
    let mut left = crate::results::MAX_PARSED_BYTES;
    let mut rows: HashSet<String> = HashSet::new();
    let mut docs = Vec::with_capacity(files.len());
    for p in files {
        let (doc, took) = crate::results::load_within(p, left)?;
        left -= took.min(left);
        // The rows `compare` makes: each point, and its CPU cost where measured.
        for r in &doc.results {
            let (key, _, _) = super::point_key(r);
            if super::cpu_cost(r).is_some() {
                rows.insert(format!("{key} cpu"));
            }
            rows.insert(key);
        }
        let cells = rows.len().saturating_mul(files.len());
        if cells > MAX_CELLS {
            return Err(Error::usage(format!(
                "{}: makes the table {} rows x {} files, over the limit of {MAX_CELLS} cells in one comparison",
                p.display(),
                rows.len(),
                files.len()
            )));
        }
        docs.push((p.display().to_string(), doc));
    }
    Ok(docs)
}
