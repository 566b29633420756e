//! The fields an `--expect` expression may name: for each, the record field
//! it reads, what kind of figure it is (which decides the units a limit may
//! carry) and which runs record it, so an expression a run could never
//! satisfy is refused before the run starts.

/// What kind of figure a field is; a limit's unit must be of the same kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Nanoseconds in the record; a limit needs a unit (ns, us, ms, s).
    Time,
    /// Million operations per second; unit optional (mops, kops).
    Rate,
    /// Payload rate; unit optional (gbps, mbps).
    Bandwidth,
    /// A whole number of things; no unit.
    Count,
    /// `compare`'s file / baseline ratio; no unit.
    Ratio,
    /// CPU use (CPU-seconds per million ops, or percent of one CPU); no unit.
    Cpu,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Time => "a time",
            Kind::Rate => "a rate",
            Kind::Bandwidth => "a bandwidth",
            Kind::Count => "a count",
            Kind::Ratio => "a ratio",
            Kind::Cpu => "a CPU figure",
        }
    }

    /// The units a limit of this kind may carry, as the error lists them.
    pub fn units(self) -> &'static str {
        match self {
            Kind::Time => "ns, us, ms, s (required)",
            Kind::Rate => "mops, kops, or none (Mops)",
            Kind::Bandwidth => "gbps, mbps, or none (the field's own unit)",
            Kind::Count | Kind::Ratio | Kind::Cpu => "none",
        }
    }
}

/// Which records carry a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Has {
    Latency,
    Throughput,
    Both,
}

/// What a run must do for the field to be recorded at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    Nothing,
    /// `--interval` (or `--forever`): the worst-interval figures.
    Interval,
    /// `--validate`: the `validation` counts.
    Validate,
    /// Ping-pong latency (not `--completion`, not READ/atomic completion timing).
    PingPong,
    /// On a throughput record, `iters` is the `-n` asked (null in a timed run).
    TputIters,
    /// On a throughput record, `verify_failures` is an atomic run's (null otherwise).
    TputAtomic,
    /// `lost`: only where the receiving side counts (SEND, WRITE with
    /// immediate, echo); null where it is passive.
    Received,
}

#[derive(Debug, PartialEq)]
pub struct Field {
    /// As an expression names it: `p99`.
    pub name: &'static str,
    /// The record field, as a dotted path into its JSON: `p99_ns`,
    /// `cpu_util.local_cpu_s_per_mop`.
    pub path: &'static str,
    pub kind: Kind,
    /// The field's own unit in its kind's base unit (ns, Mops, Gb/s): 1
    /// except for `mib_s` (one MiB/s is 0.008388608 Gb/s).
    pub scale: f64,
    /// How the field's own unit is shown ("ns", "Mops", "" for counts).
    pub unit: &'static str,
    pub has: Has,
    pub needs: Needs,
}

const fn field(
    name: &'static str,
    path: &'static str,
    kind: Kind,
    unit: &'static str,
    has: Has,
    needs: Needs,
) -> Field {
    Field {
        name,
        path,
        kind,
        scale: 1.0,
        unit,
        has,
        needs,
    }
}

const fn time(name: &'static str, path: &'static str, needs: Needs) -> Field {
    field(name, path, Kind::Time, "ns", Has::Latency, needs)
}

const fn count(name: &'static str, path: &'static str, has: Has, needs: Needs) -> Field {
    field(name, path, Kind::Count, "", has, needs)
}

/// One MiB/s in Gb/s.
const MIB_S_IN_GBPS: f64 = 8.0 * 1_048_576.0 / 1e9;

use Has::{Both, Latency, Throughput};
use Kind::{Bandwidth, Cpu, Rate};
use Needs::{Interval, Nothing, PingPong, Received, TputAtomic, TputIters, Validate};

/// Every field, in the order the errors list them.
pub const FIELDS: &[Field] = &[
    time("min", "min_ns", Nothing),
    time("p50", "p50_ns", Nothing),
    time("p90", "p90_ns", Nothing),
    time("p99", "p99_ns", Nothing),
    time("p999", "p999_ns", Nothing),
    time("p9999", "p9999_ns", Nothing),
    time("max", "max_ns", Nothing),
    time("mean", "mean_ns", Nothing),
    time("stdev", "stdev_ns", Nothing),
    time("rtt_p50", "rtt_p50_ns", PingPong),
    time("rtt_mean", "rtt_mean_ns", PingPong),
    time("worst_interval_p99", "worst_interval_p99_ns", Interval),
    count("samples", "samples", Latency, Nothing),
    field("mops", "mops", Rate, "Mops", Throughput, Nothing),
    field("gbps", "gbps", Bandwidth, "Gb/s", Throughput, Nothing),
    Field {
        scale: MIB_S_IN_GBPS,
        ..field("mib_s", "mib_s", Bandwidth, "MiB/s", Throughput, Nothing)
    },
    count("ops", "ops", Throughput, Nothing),
    count("lost", "lost", Throughput, Received),
    count("completions", "completions", Throughput, Nothing),
    field(
        "min_interval_mops",
        "min_interval_mops",
        Rate,
        "Mops",
        Throughput,
        Interval,
    ),
    field(
        "max_interval_mops",
        "max_interval_mops",
        Rate,
        "Mops",
        Throughput,
        Interval,
    ),
    field(
        "min_interval_gbps",
        "min_interval_gbps",
        Bandwidth,
        "Gb/s",
        Throughput,
        Interval,
    ),
    field(
        "max_interval_gbps",
        "max_interval_gbps",
        Bandwidth,
        "Gb/s",
        Throughput,
        Interval,
    ),
    field(
        "cpu_s_per_mop",
        "cpu_util.local_cpu_s_per_mop",
        Cpu,
        "cpu-s/Mop",
        Throughput,
        Nothing,
    ),
    field(
        "process_cpu_pct",
        "cpu_util.local_process_pct",
        Cpu,
        "%",
        Both,
        Nothing,
    ),
    count("verify_failures", "verify_failures", Both, TputAtomic),
    count("validated_wrs", "validation.validated_wrs", Both, Validate),
    count(
        "validated_bytes",
        "validation.validated_bytes",
        Both,
        Validate,
    ),
    count("corrupt_wrs", "validation.corrupt_wrs", Both, Validate),
    count("corrupt_bytes", "validation.corrupt_bytes", Both, Validate),
    count("iters", "iters", Both, TputIters),
];

/// A limit's unit: its kind and its size in the kind's base unit.
pub const UNITS: &[(&str, Kind, f64)] = &[
    ("ns", Kind::Time, 1.0),
    ("us", Kind::Time, 1e3),
    ("µs", Kind::Time, 1e3),
    ("ms", Kind::Time, 1e6),
    ("s", Kind::Time, 1e9),
    ("mops", Kind::Rate, 1.0),
    ("kops", Kind::Rate, 1e-3),
    ("gbps", Kind::Bandwidth, 1.0),
    ("mbps", Kind::Bandwidth, 1e-3),
];

/// `fabric --expect`'s fields: the figures of a pair's entry (its
/// `metrics`), which are the fabric tests' headlines, not whole records.
pub const FABRIC_FIELDS: &[Field] = &[
    time("lat_p50", "lat_p50_ns", Nothing),
    time("lat_p99", "lat_p99_ns", Nothing),
    time("lat_min", "lat_min_ns", Nothing),
    field("gbps", "gbps", Bandwidth, "Gb/s", Throughput, Nothing),
    field("mops", "mops", Rate, "Mops", Throughput, Nothing),
];

pub fn find(name: &str) -> Option<&'static Field> {
    FIELDS.iter().find(|f| f.name == name)
}

/// A unit by name, case-insensitively (`Mops`, `Gbps`, `US`).
pub fn unit(name: &str) -> Option<(&'static str, Kind, f64)> {
    let lower = name.to_lowercase();
    UNITS.iter().find(|(u, _, _)| *u == lower).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_paths_are_unique_and_units_fit_their_kind() {
        for (i, f) in FIELDS.iter().enumerate() {
            assert!(
                FIELDS[i + 1..].iter().all(|g| g.name != f.name),
                "{} twice",
                f.name
            );
            assert!(f.scale > 0.0);
            assert_eq!(f.kind == Kind::Time, f.unit == "ns", "{}", f.name);
            assert_ne!(f.kind, Kind::Ratio, "{}: ratios are compare's", f.name);
        }
        for (u, k, s) in UNITS {
            assert_eq!(unit(u), Some((*u, *k, *s)));
            if u.is_ascii() {
                assert_eq!(unit(&u.to_uppercase()), Some((*u, *k, *s)));
            }
        }
        assert_eq!(unit("Mops").map(|u| u.0), Some("mops"));
        assert_eq!(unit("parsec"), None);
    }
}
