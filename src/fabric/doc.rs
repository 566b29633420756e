//! The one document a fabric run writes (rank 0): the hosts and their
//! endpoints, the tests each pair ran, one entry per pair and direction,
//! a summary per endpoint, and the verdicts. Entries hold figures, not
//! whole records, so rank 0 holds a small record per ordered pair at most.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub const FABRIC_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, JsonSchema)]
pub struct FabricDoc {
    pub schema_version: u32,
    pub tool: String,
    pub tool_version: String,
    pub command_line: Vec<String>,
    pub started_utc: String,
    /// How the ranks were started and found each other: "slurm", "mpi"
    /// or "explicit" (--rank/--ranks/--rendezvous).
    pub engine: String,
    /// Where this ran when it is not plain hardware.
    #[serde(default)]
    pub environment: Option<String>,
    /// `--pairs`, and what that schedule covers.
    pub pairs: String,
    pub covers: String,
    pub rounds: u32,
    /// What the figures are judged with.
    pub tolerance: f64,
    /// How many more times a slow pair is measured (`--recheck`).
    #[serde(default)]
    pub recheck: u32,
    pub hosts: Vec<FabricHost>,
    pub endpoints: Vec<FabricEndpoint>,
    pub tests: Vec<FabricTest>,
    pub entries: Vec<FabricEntry>,
    pub summary: Vec<EndpointSummary>,
    pub verdicts: FabricVerdicts,
}

/// One rank (one host, by default).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, JsonSchema)]
pub struct FabricHost {
    pub rank: u32,
    pub host: String,
    /// "ok", or "failed" with `error` (its rank exited, had no device,
    /// stopped answering).
    pub state: String,
    #[serde(default)]
    pub error: Option<String>,
}

/// One NIC of one host: what the schedule pairs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, JsonSchema)]
pub struct FabricEndpoint {
    pub index: u32,
    /// How the verdicts and matrices name it: HOST/DEVICE, with the rank
    /// (HOST#RANK/DEVICE) where two ranks share a host.
    pub label: String,
    pub rank: u32,
    pub host: String,
    pub device: String,
    pub port: u8,
    pub gid: String,
    pub active_mtu: u32,
    /// Where its `serve` listens (HOST:PORT).
    pub serve: String,
}

/// One measurement each pair runs, in each direction.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, JsonSchema)]
pub struct FabricTest {
    pub name: String,
    /// The rdma-bench command the driving side runs against the other's serve.
    pub command: String,
    /// The figures it yields.
    pub metrics: Vec<FabricMetric>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, JsonSchema)]
pub struct FabricMetric {
    /// As in `entries[].metrics` and `--expect`, e.g. "lat_p50_ns".
    pub name: String,
    /// What the number is and how it was measured.
    pub what: String,
    /// "lower" or "higher" is better.
    pub better: String,
    /// Whether slow pairs are looked for in it (else only --expect judges it).
    pub judged: bool,
}

impl FabricMetric {
    /// Whether a lower value is the better one.
    pub fn lower_is_better(&self) -> bool {
        self.better == "lower"
    }
}

/// One pair in one direction: `from` drove (WRITE's data flows from it),
/// `to` served.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, JsonSchema)]
pub struct FabricEntry {
    pub round: u32,
    pub from: EndpointRef,
    pub to: EndpointRef,
    /// "ok", or "failed" with `error` and the host it blames.
    pub state: String,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub failed_host: Option<String>,
    /// Figure name → value (see `tests[].metrics`).
    pub metrics: BTreeMap<String, f64>,
    /// Device counters of `from`'s port that moved during its tests and
    /// count trouble (retries, RNR, sequence errors), if any.
    #[serde(default)]
    pub counters: BTreeMap<String, u64>,
    /// Wall time of this entry's tests, setup included (all attempts).
    pub elapsed_s: f64,
    /// Earlier attempts, when the entry was slow and measured again
    /// (`--recheck`). `metrics` is then the best of each figure over all
    /// attempts, and `counters` their sum.
    #[serde(default)]
    pub earlier: Vec<FabricAttempt>,
}

/// One earlier measurement of an entry that was measured again.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, JsonSchema)]
pub struct FabricAttempt {
    pub metrics: BTreeMap<String, f64>,
    pub counters: BTreeMap<String, u64>,
    pub elapsed_s: f64,
}

impl FabricDoc {
    /// Whether a lower value of `metric` is better (as `tests[].metrics` says).
    pub fn lower_is_better(&self, metric: &str) -> bool {
        self.tests
            .iter()
            .flat_map(|t| &t.metrics)
            .any(|m| m.name == metric && m.lower_is_better())
    }

    /// Measures entry `i` once more with `measure`, which fills the entry's
    /// metrics, counters and elapsed time afresh. `last` is what the
    /// entry's previous attempt measured on its own (`None` on its first
    /// recheck, when the entry's figures are still that): it joins
    /// `earlier`, so every earlier attempt is kept as it was measured, never
    /// folded. Afterwards the entry's figures are folded over all attempts;
    /// what this attempt measured on its own is returned, for the next call.
    pub fn measure_again(
        &mut self,
        i: usize,
        last: Option<FabricAttempt>,
        measure: impl FnOnce(&mut Self),
    ) -> FabricAttempt {
        let e = &mut self.entries[i];
        let folded = FabricAttempt {
            metrics: std::mem::take(&mut e.metrics),
            counters: std::mem::take(&mut e.counters),
            elapsed_s: std::mem::take(&mut e.elapsed_s),
        };
        e.earlier.push(last.unwrap_or(folded));
        measure(self);
        let e = &self.entries[i];
        let this = FabricAttempt {
            metrics: e.metrics.clone(),
            counters: e.counters.clone(),
            elapsed_s: e.elapsed_s,
        };
        self.fold_attempts(i);
        this
    }

    /// Folds entry `i`'s earlier attempts into what it has just measured:
    /// each figure the best over all attempts, counters and time summed.
    fn fold_attempts(&mut self, i: usize) {
        let lower: BTreeMap<String, bool> = self.entries[i]
            .earlier
            .iter()
            .flat_map(|a| a.metrics.keys())
            .map(|m| (m.clone(), self.lower_is_better(m)))
            .collect();
        let e = &mut self.entries[i];
        for a in &e.earlier {
            for (m, &v) in &a.metrics {
                let now = e.metrics.entry(m.clone()).or_insert(v);
                let better = if lower[m] { v < *now } else { v > *now };
                if better {
                    *now = v;
                }
            }
            for (c, &n) in &a.counters {
                *e.counters.entry(c.clone()).or_insert(0) += n;
            }
            e.elapsed_s += a.elapsed_s;
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, JsonSchema)]
pub struct EndpointRef {
    /// Its index in `endpoints`.
    pub endpoint: u32,
    pub host: String,
    pub device: String,
    pub gid: String,
}

/// Per endpoint: its entries and, per figure, its median over them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, JsonSchema)]
pub struct EndpointSummary {
    pub host: String,
    pub device: String,
    pub entries: u32,
    pub failed: u32,
    pub slow: u32,
    pub median: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, JsonSchema)]
pub struct FabricVerdicts {
    /// "pass", "threshold" (an --expect failed), "outlier" (slow pairs
    /// found) or "error" (a host or pair failed); the exit status says the same.
    pub status: String,
    pub exit_code: i32,
    pub slow: Vec<SlowPair>,
    /// Pairs slow in their first attempt but not in the best of their
    /// attempts (`--recheck`): not counted as slow, shown for what they were.
    #[serde(default)]
    pub transient: Vec<SlowPair>,
    pub culprits: Vec<CulpritHost>,
    pub expectations: Vec<PairExpectation>,
    /// Per judged figure: the reference and the rule it was judged by.
    pub rules: Vec<MetricRule>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, JsonSchema)]
pub struct MetricRule {
    pub metric: String,
    #[serde(default)]
    pub reference: Option<f64>,
    pub rule: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, JsonSchema)]
pub struct SlowPair {
    pub metric: String,
    pub from: String,
    pub to: String,
    pub value: f64,
    pub reference: f64,
    /// How many times worse; none when the pair measured nothing at all.
    #[serde(default)]
    pub ratio: Option<f64>,
    pub rule: String,
    /// The culprit that explains it, if one does.
    #[serde(default)]
    pub blamed: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, JsonSchema)]
pub struct CulpritHost {
    pub metric: String,
    pub host: String,
    pub device: String,
    pub slow: u32,
    pub of: u32,
    pub partners: Vec<String>,
    pub why: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, JsonSchema)]
pub struct PairExpectation {
    pub expr: String,
    pub from: String,
    pub to: String,
    #[serde(default)]
    pub measured: Option<f64>,
    pub pass: bool,
}
