//! `-H`/`--report-histogram` and `-U`/`--report-unsorted` (perftest's):
//! every latency point's raw samples in a text file, one value a line
//! under a header saying what they are, rewritten atomically after every
//! point as the results files are.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::output_target::Target;
use crate::results::LatencyRecord;
use crate::stats::RAW_SAMPLES_CAP;

/// How each point's samples are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleOrder {
    /// `-H`: ascending.
    Sorted,
    /// `-U`: in the order measured.
    Measured,
}

/// The samples file of one run.
pub struct SamplesFile {
    /// What named the file in errors (`--samples-file`, or how it was defaulted).
    option: String,
    path: PathBuf,
    order: SampleOrder,
    /// Whether this run has written the file yet (each rewrite copies
    /// what it wrote before, then adds the new point).
    started: Mutex<bool>,
}

impl SamplesFile {
    pub fn new(option: impl Into<String>, path: PathBuf, order: SampleOrder) -> Self {
        SamplesFile {
            option: option.into(),
            path,
            order,
            started: Mutex::new(false),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file as an output target, vetted with the results files.
    pub fn target(&self) -> Target<'_> {
        Target {
            option: &self.option,
            path: &self.path,
        }
    }

    /// Writes the header, before any point: `half_rtt` says each sample is
    /// half a round trip (else a completion time); `measurement` is the
    /// table's own explanation of the clock.
    pub fn start(&self, half_rtt: bool, measurement: &str) -> Result<()> {
        let order = match self.order {
            SampleOrder::Sorted => "-H/--report-histogram: each point's samples sorted ascending",
            SampleOrder::Measured => {
                "-U/--report-unsorted: each point's samples in the order measured"
            }
        };
        let sample = if half_rtt {
            "half of one round trip (the round trip as timed, halved: a value may end in .5)"
        } else {
            "the completion time of one WR (ibv_post_send to its completion polled)"
        };
        let header = format!(
            "# rdma-bench raw latency samples ({order})\n\
             # unit: nanoseconds; one sample a line, below the '# point:' line of its point\n\
             # a sample: {sample}\n\
             # how it is timed: {measurement}\n\
             # warm-up iterations are not here; a point keeps its first {RAW_SAMPLES_CAP} samples at most: 'samples' is how many it measured, 'kept' how many are listed, 'left_out' how many were past the cap\n",
            measurement = measurement.replace('\n', " ")
        );
        let mut started = self.started.lock().unwrap_or_else(|e| e.into_inner());
        super::write_atomically(&self.path, header.as_bytes())?;
        *started = true;
        Ok(())
    }

    /// Adds one point's block: `raw_ns` are the samples as the recorder
    /// kept them (ping-pong: round trips; the file has the record's figure).
    pub fn add_point(&self, r: &LatencyRecord, raw_ns: &[u64], left_out: u64) -> Result<()> {
        let half = r.metric == "half_rtt";
        let mut values = raw_ns.to_vec();
        if self.order == SampleOrder::Sorted {
            values.sort_unstable();
        }
        let mut block = String::with_capacity(values.len() * 8 + 128);
        block.push_str(&format!(
            "# point:{} verb {} size {} transport {} metric {} samples {} kept {} left_out {}\n",
            r.series
                .as_deref()
                .map(|s| format!(" series {s}"))
                .unwrap_or_default(),
            r.verb,
            r.size,
            r.transport,
            r.metric,
            r.stats.samples,
            values.len(),
            left_out
        ));
        for v in values {
            use std::fmt::Write as _;
            let _ = if half {
                // Exact: an integer or a half.
                writeln!(block, "{}", v as f64 / 2.0)
            } else {
                writeln!(block, "{v}")
            };
        }
        let mut started = self.started.lock().unwrap_or_else(|e| e.into_inner());
        let previous = if *started {
            Some(
                std::fs::File::open(&self.path)
                    .map_err(|e| Error::io(format!("reading back {}", self.path.display()), e))?,
            )
        } else {
            None
        };
        super::write_atomically_with(&self.path, |w| {
            if let Some(mut f) = previous {
                std::io::copy(&mut f, w)?;
            }
            w.write_all(block.as_bytes())
        })?;
        *started = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(metric: &str, size: u32, samples: u64) -> LatencyRecord {
        let mut r = LatencyRecord::example();
        r.metric = metric.into();
        r.size = size;
        r.stats.samples = samples;
        r
    }

    #[test]
    fn points_follow_the_header_sorted_or_as_measured() {
        let dir = std::env::temp_dir().join(format!("rb-samples-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (order, want) in [
            (SampleOrder::Sorted, ["1.5", "2", "3"]),
            (SampleOrder::Measured, ["3", "1.5", "2"]),
        ] {
            let path = dir.join(format!("{order:?}.tsv"));
            let f = SamplesFile::new("--samples-file", path.clone(), order);
            f.start(true, "a clock").unwrap();
            f.add_point(&record("half_rtt", 64, 3), &[6, 3, 4], 0)
                .unwrap();
            f.add_point(&record("completion", 128, 5), &[9, 8], 3)
                .unwrap();
            let text = std::fs::read_to_string(&path).unwrap();
            let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
            assert_eq!(&lines[..3], &want);
            assert_eq!(lines.len(), 5, "{text}");
            assert!(text.contains("# unit: nanoseconds"), "{text}");
            assert!(
                text.contains(
                    "size 128 transport rc metric completion samples 5 kept 2 left_out 3"
                ),
                "{text}"
            );
            assert_eq!(
                text.lines().filter(|l| l.starts_with("# point:")).count(),
                2
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
