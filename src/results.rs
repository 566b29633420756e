//! What a results file holds: a self-describing document (tool, command line,
//! host, device, what the numbers mean) and one record per measured point
//! (`results/latency.rs`, `results/throughput.rs`).
//! The schema is documented in docs/results.md; bump `SCHEMA_VERSION` on any change
//! that is not a pure addition.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::clock::ClockInfo;
use crate::cpu_use::CpuUse;

mod example;
mod fields;
mod latency;
mod load;
mod throughput;
pub use fields::{CheckFields, LiveFields, MemoryFields, PathFields, PostingFields};
pub use latency::{BackgroundLoad, LatencyRecord, CSV_COLUMNS};
pub use load::{load, load_within, MAX_PARSED_BYTES};
pub use throughput::{DirectionFigure, TputRecord, TPUT_CSV_COLUMNS};

pub const SCHEMA_VERSION: u32 = 2;

/// The schema versions this build reads (`compare`, `run --resume`); a new
/// version that old files still satisfy is one more entry here.
pub const READABLE_SCHEMAS: &[u32] = &[1, 2];

/// What every results file says produced it.
pub const TOOL: &str = "rdma-bench";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, JsonSchema)]
pub struct ResultsDoc {
    #[schemars(schema_with = "readable_schema_versions")]
    pub schema_version: u32,
    pub tool: String,
    pub tool_version: String,
    pub command_line: Vec<String>,
    pub started_utc: String,
    /// Who the other side was (schema 1 held only the mode or address).
    #[serde(deserialize_with = "peer_v1_or_v2")]
    #[schemars(schema_with = "peer_schema")]
    pub peer: PeerDoc,
    /// The experiment file's name, for `rdma-bench run`.
    #[serde(default)]
    pub experiment: Option<String>,
    /// Where this ran when it is not plain hardware, e.g. "soft-RoCE (rxe) in a qemu guest".
    #[serde(default)]
    pub environment: Option<String>,
    /// The timestamp clock (schema 1 recorded a sentence; it still loads).
    #[serde(deserialize_with = "clock_info_or_sentence")]
    #[schemars(schema_with = "clock_schema")]
    pub clock: ClockInfo,
    /// Where this process's measuring threads were pinned, and why there
    /// (`--cpu`, the device's NUMA node, or any CPU).
    #[serde(default)]
    pub affinity: Option<String>,
    pub host: HostInfo,
    pub device: DeviceInfo,
    /// Peak resident memory of this process so far (VmHWM), updated at every write.
    #[serde(default)]
    pub peak_rss_kib: Option<u64>,
    pub results: Vec<Record>,
}

/// The other side of a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, JsonSchema)]
pub struct PeerDoc {
    /// `loopback` (both sides in this process, one device), `tcp` (an
    /// `rdma-bench serve`) or `mpi` (rank 0 of an MPI launch).
    pub mode: String,
    /// The `serve` address (tcp).
    #[serde(default)]
    pub address: Option<String>,
    /// The peer's host and device, as its handshake said.
    #[serde(default)]
    pub host: Option<String>,
    #[serde(default)]
    pub device: Option<String>,
    /// The GID of the peer's port (RoCE: its IP address, IPv4-mapped), as
    /// its handshake said; absent in files before it and under MPI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid: Option<String>,
}

impl PeerDoc {
    /// Fills in what the peer's handshake said (first point).
    pub fn note(&mut self, peer: &crate::report::PeerInfo) {
        if self.host.is_none() && !peer.host.is_empty() {
            self.host = Some(peer.host.clone());
        }
        if self.device.is_none() && !peer.device.is_empty() {
            self.device = Some(peer.device.clone());
        }
        if self.gid.is_none() && !peer.gid.is_empty() {
            self.gid = Some(peer.gid.clone());
        }
    }
}

/// Schema 1 stored `peer` as one string: "loopback", an address, or the MPI line.
pub(crate) fn peer_v1_or_v2<'de, D: serde::Deserializer<'de>>(d: D) -> Result<PeerDoc, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        V1(String),
        V2(PeerDoc),
    }
    Ok(match Either::deserialize(d)? {
        Either::V2(p) => p,
        Either::V1(s) if s == "loopback" => PeerDoc {
            mode: s,
            ..Default::default()
        },
        Either::V1(s) if s.starts_with("mpi") => PeerDoc {
            mode: "mpi".into(),
            ..Default::default()
        },
        Either::V1(s) => PeerDoc {
            mode: "tcp".into(),
            address: Some(s),
            ..Default::default()
        },
    })
}

/// `clock` as schema 2 writes it (an object), or as schema 1 did (a
/// sentence such as `TSC, 2.100 GHz (calibrated against CLOCK_MONOTONIC)`).
fn clock_info_or_sentence<'de, D: serde::Deserializer<'de>>(d: D) -> Result<ClockInfo, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Info(ClockInfo),
        Sentence(String),
    }
    Ok(match Either::deserialize(d)? {
        Either::Info(info) => info,
        Either::Sentence(s) => ClockInfo::from_legacy(&s),
    })
}

/// `schema_version` in the JSON Schema: one of the versions this build reads.
fn readable_schema_versions(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "The results schema version; this schema covers every version rdma-bench still reads.",
        "type": "integer",
        "enum": READABLE_SCHEMAS,
    })
}

/// `peer` in the JSON Schema: an object (schema 2) or schema 1's string.
fn peer_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "anyOf": [
            g.subschema_for::<PeerDoc>(),
            {"type": "string", "description": "Schema 1: \"loopback\", the serve address, or the MPI line."},
        ]
    })
}

/// `clock` in the JSON Schema: an object (schema 2) or schema 1's sentence.
fn clock_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "anyOf": [
            g.subschema_for::<ClockInfo>(),
            {"type": "string", "description": "Schema 1: a sentence such as \"TSC, 2.100 GHz (calibrated against CLOCK_MONOTONIC)\"."},
        ]
    })
}

/// The JSON Schema of a results file, generated from these types (what
/// `rdma-bench schema` prints and `schema/results.schema.json` holds).
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(ResultsDoc);
    let mut text = serde_json::to_string_pretty(&schema).expect("schemas serialise");
    text.push('\n');
    text
}

/// One measured point of either kind.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Record {
    Latency(LatencyRecord),
    Throughput(TputRecord),
}

impl ResultsDoc {
    /// Records the process's peak RSS so far (shows memory does not grow with -n).
    pub fn note_peak_rss(&mut self) {
        self.peak_rss_kib = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmHWM:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse().ok())
            });
    }

    /// What timed the figures: `tsc`, `cntvct` or `monotonic`.
    pub fn clock_source(&self) -> String {
        self.clock.source.clone()
    }

    pub fn latency(&self) -> impl Iterator<Item = &LatencyRecord> {
        self.results.iter().filter_map(|r| match r {
            Record::Latency(l) => Some(l),
            _ => None,
        })
    }

    pub fn throughput(&self) -> impl Iterator<Item = &TputRecord> {
        self.results.iter().filter_map(|r| match r {
            Record::Throughput(t) => Some(t),
            _ => None,
        })
    }
}

/// CPU use over a point's measured window, this side's and the peer's.
/// Two kinds of percent, named apart: `*_pct` is the share of ALL the
/// host's CPUs that was busy (every process counted, 0–100); `*_process_pct`
/// is the rdma-bench process's CPU time over the window in percent of ONE
/// CPU (a busy-polling thread shows about 100; two show about 200).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, JsonSchema)]
pub struct CpuUtil {
    pub local_pct: Option<f64>,
    pub local_process_pct: Option<f64>,
    /// The peer's own figures over its side of the same point (`serve`);
    /// `null` in loopback, where both sides are this process.
    pub peer_pct: Option<f64>,
    pub peer_process_pct: Option<f64>,
    /// Online CPUs of each host (what `*_pct` is a share of).
    pub local_cpus: u32,
    #[serde(default)]
    pub peer_cpus: Option<u32>,
    /// The wall time the local figures cover.
    pub window_s: f64,
    /// Throughput: each process's CPU-seconds per million ops of the point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_cpu_s_per_mop: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_cpu_s_per_mop: Option<f64>,
}

impl CpuUtil {
    /// From this side's and the peer's readings; `ops` (throughput) adds
    /// CPU-seconds per million ops. `None` when this side measured nothing.
    pub fn new(local: Option<CpuUse>, peer: Option<CpuUse>, ops: Option<u64>) -> Option<Self> {
        let local = local?;
        let per_mop = |u: &CpuUse| {
            ops.filter(|&n| n > 0)
                .and_then(|n| u.process_cpu_s.map(|s| s / (n as f64 / 1e6)))
        };
        Some(CpuUtil {
            local_pct: local.host_busy_pct,
            local_process_pct: local.process_pct,
            peer_pct: peer.and_then(|p| p.host_busy_pct),
            peer_process_pct: peer.and_then(|p| p.process_pct),
            local_cpus: local.cpus,
            peer_cpus: peer.map(|p| p.cpus),
            window_s: local.window_s,
            local_cpu_s_per_mop: per_mop(&local),
            peer_cpu_s_per_mop: peer.as_ref().and_then(per_mop),
        })
    }

    /// In loopback the peer is this process: its figures are the local ones.
    pub fn without_peer(mut self) -> Self {
        self.peer_pct = None;
        self.peer_process_pct = None;
        self.peer_cpus = None;
        self.peer_cpu_s_per_mop = None;
        self
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, JsonSchema)]
pub struct HostInfo {
    pub hostname: String,
    pub cpu_model: String,
    pub kernel: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, JsonSchema)]
pub struct DeviceInfo {
    pub name: String,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    /// Model name from `device_name::model` ("ConnectX-6"); None when the ids
    /// are not known, and in files written before it was recorded.
    #[serde(default)]
    pub model: Option<String>,
    pub fw_ver: String,
    pub hw_ver: u32,
    pub port: u8,
    pub gid_index: u8,
    pub gid: String,
    pub link_layer: String,
    pub active_mtu: u32,
    pub speed_gbps: f64,
    /// Largest inline payload an RC QP was granted (probed by creating QPs).
    pub max_inline: u32,
    /// The kernel driver behind the device, from `device_name::driver`
    /// (`rdma_rxe`, `mlx5_core`, ...); absent where sysfs names none, and in
    /// files written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// The device's limits as `rdma-bench devices` shows them; absent in files
    /// written before they were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<DeviceCaps>,
    /// The port's state (`active`, `down`, ...) and LID when the file was
    /// measured, as `devices` shows them; absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lid: Option<u16>,
}

/// The device limits `rdma-bench devices` shows, from the same
/// `ibv_query_device` (`Context::query_device`), so the two cannot disagree.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, JsonSchema)]
pub struct DeviceCaps {
    pub max_qp: u32,
    pub max_qp_wr: u32,
    pub max_cqe: u32,
    pub max_sge: u32,
    pub max_qp_rd_atom: u32,
    pub max_qp_init_rd_atom: u32,
    pub max_srq: u32,
    pub max_srq_wr: u32,
    /// `none`, `hca` or `global`, as `devices --json` spells it.
    pub atomic_cap: String,
}

impl DeviceCaps {
    pub fn of(a: &crate::verbs::DeviceAttr) -> Self {
        DeviceCaps {
            max_qp: a.max_qp,
            max_qp_wr: a.max_qp_wr,
            max_cqe: a.max_cqe,
            max_sge: a.max_sge,
            max_qp_rd_atom: a.max_qp_rd_atom,
            max_qp_init_rd_atom: a.max_qp_init_rd_atom,
            max_srq: a.max_srq,
            max_srq_wr: a.max_srq_wr,
            atomic_cap: a.atomic_cap.name().into(),
        }
    }
}

/// The columns both records end their figures with: `--interval`/`--forever`'s
/// (listed here, not taken from `LiveFields::COLUMNS`: `intervals` stays
/// JSON-only and `to_stop` is split into its figures) and the CPU use.
const LIVE_AND_CPU_COLUMNS: &[&str] = &[
    "interval_s",
    "forever",
    "to_stop.window_s",
    "to_stop.ops",
    "min_interval_mops",
    "max_interval_mops",
    "min_interval_gbps",
    "max_interval_gbps",
    "worst_interval_p99_ns",
    "best_interval_p99_ns",
    "cpu_util.local_pct",
    "cpu_util.local_process_pct",
    "cpu_util.peer_pct",
    "cpu_util.peer_process_pct",
];

impl HostInfo {
    pub fn current() -> Self {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_string())
                .unwrap_or_default()
        };
        let cpu_model = read("/proc/cpuinfo")
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default();
        HostInfo {
            hostname: read("/proc/sys/kernel/hostname"),
            cpu_model,
            kernel: read("/proc/sys/kernel/osrelease"),
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` for a Unix time (civil-from-days, no time-zone data needed).
pub fn utc_timestamp(unix_s: u64) -> String {
    let days = (unix_s / 86_400) as i64;
    let secs = unix_s % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

pub fn now_utc() -> String {
    let s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    utc_timestamp(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_timestamps_are_civil_dates() {
        assert_eq!(utc_timestamp(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_timestamp(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc_timestamp(1_795_000_000), "2026-11-18T11:06:40Z");
    }

    #[test]
    fn device_driver_and_capabilities_are_a_pure_addition() {
        // A file written before them loads with none, and writes none back.
        let old = DeviceInfo {
            name: "rxe0".into(),
            ..Default::default()
        };
        let mut v = serde_json::to_value(&old).unwrap();
        for k in ["driver", "capabilities", "port_state", "lid"] {
            assert!(v.get(k).is_none(), "{k} written though absent");
        }
        v.as_object_mut().unwrap().remove("model");
        assert_eq!(serde_json::from_value::<DeviceInfo>(v).unwrap(), old);
        let new = DeviceInfo {
            driver: Some("rdma_rxe".into()),
            capabilities: Some(DeviceCaps {
                max_qp: 1_048_560,
                max_qp_wr: 16_384,
                atomic_cap: "global".into(),
                ..Default::default()
            }),
            port_state: Some("active".into()),
            lid: Some(0),
            ..old
        };
        let text = serde_json::to_string(&new).unwrap();
        assert!(text.contains(r#""driver":"rdma_rxe""#), "{text}");
        assert!(text.contains(r#""max_qp":1048560"#), "{text}");
        assert_eq!(serde_json::from_str::<DeviceInfo>(&text).unwrap(), new);
    }
}
