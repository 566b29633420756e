//! Memory layouts (`--hugepages`, `--mr-per-qp`, `--region`, `--offsets`):
//! where the buffers come from, how many registrations cover them, and which
//! slot of the remote region each WR targets. Together they reproduce the
//! "NIC cache miss" experiments (HERD, FaSST): throughput against region
//! size and QP count.

use serde::{Deserialize, Serialize};

use super::{check_range, Direction, VerbKind};
use crate::error::{Error, Result};

/// Which slot of the remote region each WR targets.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Offsets {
    /// Always the region's first slot (the layout without `--region`).
    #[default]
    Fixed,
    /// Slot after slot, wrapping at the region's end.
    Sequential,
    /// Slots drawn uniformly from a fast PRNG, precomputed before the window.
    Random,
}

impl Offsets {
    pub fn name(self) -> &'static str {
        match self {
            Offsets::Fixed => "fixed",
            Offsets::Sequential => "sequential",
            Offsets::Random => "random",
        }
    }
}

/// The smallest and largest `--region` (the largest keeps a few QPs' regions
/// addressable; the allocation itself is the real limit).
pub const MIN_REGION: u64 = 64;
pub const MAX_REGION: u64 = 1 << 36;

/// A run's memory layout. Defaults are the layout without these options:
/// heap buffers, one registration per thread, each QP targeting one slot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct MemorySpec {
    /// Buffers from 2 MiB huge pages.
    pub hugepages: bool,
    /// One memory registration per QP instead of one per thread.
    pub mr_per_qp: bool,
    /// Bytes of each QP's remote region that its WRs target (`None`: one slot).
    pub region: Option<u64>,
    pub offsets: Offsets,
}

/// Parses a byte count as `option` takes it: bytes, or with a k, m, g or t
/// suffix (powers of 1024); `example` shows the spellings in the error.
pub fn parse_bytes(option: &str, text: &str, example: &str) -> Result<u64> {
    let t = text.trim();
    let (digits, mult) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1u64 << 10),
        Some('m' | 'M') => (&t[..t.len() - 1], 1 << 20),
        Some('g' | 'G') => (&t[..t.len() - 1], 1 << 30),
        Some('t' | 'T') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|v| v.checked_mul(mult))
        .ok_or_else(|| Error::usage(format!("{option} {text}: expected bytes, e.g. {example}")))
}

/// Parses `--region SIZE` (see [`parse_bytes`]).
pub fn parse_region(text: &str) -> Result<u64> {
    let v = parse_bytes("--region", text, "4096, 64k, 256m or 1g")?;
    check_range("--region", v, MIN_REGION, MAX_REGION, " bytes")?;
    Ok(v)
}

impl MemorySpec {
    /// What the layout is, for the table's header; `None` for the default.
    pub fn describe(&self) -> Option<String> {
        if *self == MemorySpec::default() {
            return None;
        }
        let mut parts = Vec::new();
        if let Some(r) = self.region {
            parts.push(format!(
                "each QP's WRs target {} slots of a {r}-byte remote region",
                self.offsets.name()
            ));
        }
        parts.push(
            if self.mr_per_qp {
                "one MR per QP"
            } else {
                "one MR per thread"
            }
            .to_string(),
        );
        parts.push(
            if self.hugepages {
                "buffers from 2 MiB huge pages"
            } else {
                "heap buffers"
            }
            .to_string(),
        );
        Some(parts.join("; "))
    }

    /// Host-side checks that need no device (a spec from the wire too).
    pub fn validate(&self) -> Result<()> {
        if let Some(r) = self.region {
            check_range("--region", r, MIN_REGION, MAX_REGION, " bytes")?;
        }
        if self.offsets != Offsets::Fixed && self.region.is_none() {
            return Err(Error::usage(format!(
                "--offsets {}: needs --region SIZE (the remote region whose slots the WRs target)",
                self.offsets.name()
            )));
        }
        Ok(())
    }

    /// Where the layout applies to a latency run: huge pages only (it runs
    /// one QP, and a ping-pong finds its payload at one fixed slot).
    pub fn validate_latency(&self) -> Result<()> {
        self.validate()?;
        if self.mr_per_qp {
            return Err(Error::usage(
                "--mr-per-qp: latency runs one QP, already with a registration of its own (a throughput option)",
            ));
        }
        if let Some(r) = self.region {
            return Err(Error::usage(format!(
                "--region {r}: latency targets one fixed slot (a throughput option, with --tput inbound|outbound)"
            )));
        }
        Ok(())
    }

    /// Where the layout applies to a throughput run, and that each payload
    /// fits the region.
    pub fn validate_tput(&self, verb: VerbKind, direction: Direction, max_size: u32) -> Result<()> {
        self.validate()?;
        if direction == Direction::Echo {
            if self.mr_per_qp {
                return Err(Error::usage(
                    "--mr-per-qp: echo keeps one buffer per thread for its slot layout (use write or read --tput)",
                ));
            }
            if let Some(r) = self.region {
                return Err(Error::usage(format!(
                    "--region {r}: echo answers where each request landed (use write or read --tput)"
                )));
            }
        }
        if let Some(r) = self.region {
            match verb {
                VerbKind::Send => {
                    return Err(Error::usage(format!(
                        "--region {r}: a SEND lands where the receiver posted its receives (use write or read)"
                    )))
                }
                VerbKind::Atomic => {
                    return Err(Error::usage(format!(
                        "--region {r}: atomics check each QP's one word (use write or read)"
                    )))
                }
                _ => {}
            }
            if u64::from(max_size) > r {
                return Err(Error::usage(format!(
                    "--region {r} --size {max_size}: the region holds at least one payload"
                )));
            }
        }
        Ok(())
    }
}

/// Refuses `--hugepages` when the kernel has no huge pages reserved (or
/// cannot say), naming the file that reserves them. `reserved` is what
/// `/proc/sys/vm/nr_hugepages` holds.
pub fn check_hugepages(reserved: Option<u64>, file: &str) -> Result<()> {
    match reserved {
        Some(n) if n > 0 => Ok(()),
        Some(_) => Err(Error::usage(format!(
            "--hugepages: no huge pages are reserved ({file} is 0; as root: echo 256 > {file})"
        ))),
        None => Err(Error::usage(format!(
            "--hugepages: cannot read {file} (a kernel without huge pages?)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(r: Result<()>, msg: &str) {
        let e = r.unwrap_err();
        assert!(e.to_string().starts_with(msg), "{e}");
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn region_sizes_parse_with_suffixes_and_limits() {
        assert_eq!(parse_region("4096").unwrap(), 4096);
        assert_eq!(parse_region("64k").unwrap(), 65536);
        assert_eq!(parse_region("256M").unwrap(), 256 << 20);
        assert_eq!(parse_region("2g").unwrap(), 2 << 30);
        refused(parse_region("32").map(|_| ()), "--region 32: must be 64..=");
        refused(parse_region("x").map(|_| ()), "--region x: expected bytes");
        refused(
            parse_region("99999999999g").map(|_| ()),
            "--region 99999999999g",
        );
    }

    #[test]
    fn layouts_are_refused_where_they_do_not_apply() {
        let random = MemorySpec {
            offsets: Offsets::Random,
            ..MemorySpec::default()
        };
        refused(random.validate(), "--offsets random: needs --region");
        let region = MemorySpec {
            region: Some(4096),
            offsets: Offsets::Random,
            ..MemorySpec::default()
        };
        region
            .validate_tput(VerbKind::Write, Direction::Outbound, 64)
            .unwrap();
        region
            .validate_tput(VerbKind::Read, Direction::Inbound, 4096)
            .unwrap();
        refused(
            region.validate_tput(VerbKind::Write, Direction::Inbound, 8192),
            "--region 4096 --size 8192",
        );
        refused(
            region.validate_tput(VerbKind::Send, Direction::Inbound, 64),
            "--region 4096: a SEND",
        );
        refused(
            region.validate_tput(VerbKind::Atomic, Direction::Inbound, 8),
            "--region 4096: atomics",
        );
        refused(
            region.validate_tput(VerbKind::Echo, Direction::Echo, 64),
            "--region 4096: echo",
        );
        refused(region.validate_latency(), "--region 4096: latency");
        let per_qp = MemorySpec {
            mr_per_qp: true,
            hugepages: true,
            ..MemorySpec::default()
        };
        per_qp
            .validate_tput(VerbKind::Send, Direction::Inbound, 64)
            .unwrap();
        refused(per_qp.validate_latency(), "--mr-per-qp: latency");
        refused(
            per_qp.validate_tput(VerbKind::Echo, Direction::Echo, 64),
            "--mr-per-qp: echo",
        );
    }

    #[test]
    fn hugepages_without_a_reservation_name_the_file() {
        check_hugepages(Some(16), "/proc/sys/vm/nr_hugepages").unwrap();
        refused(
            check_hugepages(Some(0), "/proc/sys/vm/nr_hugepages"),
            "--hugepages: no huge pages are reserved (/proc/sys/vm/nr_hugepages is 0",
        );
        refused(
            check_hugepages(None, "/proc/sys/vm/nr_hugepages"),
            "--hugepages: cannot read /proc/sys/vm/nr_hugepages",
        );
    }

    #[test]
    fn the_header_describes_a_layout_other_than_the_default() {
        assert_eq!(MemorySpec::default().describe(), None);
        let m = MemorySpec {
            region: Some(4096),
            offsets: Offsets::Random,
            mr_per_qp: true,
            hugepages: true,
        };
        assert_eq!(
            m.describe().unwrap(),
            "each QP's WRs target random slots of a 4096-byte remote region; one MR per QP; buffers from 2 MiB huge pages"
        );
    }

    #[test]
    fn an_older_spec_without_the_layout_reads_as_the_default() {
        let m: MemorySpec = serde_json::from_str("{}").unwrap();
        assert_eq!(m, MemorySpec::default());
        assert_eq!(m.offsets, Offsets::Fixed);
    }
}
