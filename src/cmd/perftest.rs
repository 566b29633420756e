//! perftest's spellings that are more than a second name for an option:
//! `-a` (every size), `-I SIZE` (inline up to SIZE), and the flags accepted
//! only so that a perftest command line runs (`-F`, `--report_gbits`).
//! Plain aliases (`-t`, `-l`, `-Q`) are declared in `cli.rs`.

use crate::cli::TestArgs;
use crate::error::{Error, Result};
use crate::spec::{InlineRequest, VerbKind};

/// perftest's `-a`: 2 B to 2^23 B.
pub const ALL_SIZES_MAX: u32 = 1 << 23;

/// The payload sizes a run measures: `--size`, `-a`, or the verb's default.
pub fn sizes(verb: VerbKind, a: &TestArgs, tput: bool) -> Result<Vec<u32>> {
    if a.all {
        return Ok(std::iter::successors(Some(2u32), |s| Some(s * 2))
            .take_while(|&s| s <= ALL_SIZES_MAX)
            .collect());
    }
    match &a.size {
        Some(s) => crate::sweep::parse_sizes(s).map_err(|e| Error::usage(format!("--size: {e}"))),
        None => Ok(vec![verb.default_size(tput)]),
    }
}

/// What the run asked to inline: `--inline` (every payload), `-I SIZE`
/// (perftest's meaning: each payload of at most SIZE bytes, decided per
/// size, so one sweep may inline its small sizes and not its large ones),
/// or neither.
pub fn inline(a: &TestArgs) -> Result<InlineRequest> {
    let Some(limit) = a.inline_size else {
        return Ok(if a.inline {
            InlineRequest::Always
        } else {
            InlineRequest::Never
        });
    };
    // No device inlines more than a payload can be (--size's own limit).
    crate::spec::check_range(
        "--inline-size",
        limit,
        0,
        i64::from(crate::spec::MAX_SIZE),
        "",
    )?;
    Ok(InlineRequest::UpTo(limit as u32))
}

/// What to say once above the table about perftest flags that change nothing.
pub fn notes(a: &TestArgs) -> Vec<&'static str> {
    let mut out = Vec::new();
    if a.cpu_freq {
        out.push("-F (perftest's --CPU-freq) is accepted and ignored: rdma-bench does not check CPU frequency scaling");
    }
    if a.report_gbits {
        out.push("--report_gbits: the table is in Gb/s (10^9 bit/s) anyway; results files also hold MiB/s");
    }
    out
}
