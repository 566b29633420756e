//! Plain records for tests and benches (`LatencyRecord::example()`,
//! `TputRecord::example()`): one place that lists every field, so a test
//! that builds a record names only what it checks (struct update syntax)
//! and a new field is one edit here. No measuring code calls these.

use super::{LatencyRecord, LiveFields, MemoryFields, PathFields, PostingFields, TputRecord};

impl LatencyRecord {
    /// A 64-byte RC WRITE ping-pong with no option given: 10 samples over
    /// one second, every figure 0, nothing optional recorded.
    #[doc(hidden)]
    pub fn example() -> Self {
        LatencyRecord {
            passes: Vec::new(),
            series: None,
            verb: "write".into(),
            metric: "half_rtt".into(),
            transport: "rc".into(),
            size: 64,
            posting: PostingFields::default(),
            event_wakeups: None,
            path: PathFields::default(),
            bidirectional: false,
            srq: false,
            memory: MemoryFields::default(),
            connection: crate::spec::gid_connection(),
            path_mtu: None,
            iters: 10,
            warmup_dropped: 0,
            elapsed_s: 1.0,
            stats: Default::default(),
            rtt_p50_ns: None,
            rtt_mean_ns: None,
            sent: 10,
            server_received: None,
            verify_failures: 0,
            requested_s: None,
            device_counters: None,
            histogram: vec![],
            cpu_util: None,
            live: LiveFields::default(),
            checks: Default::default(),
            load: None,
            offered_mops: None,
            achieved_mops: None,
            saturated_mops: None,
            background: None,
        }
    }
}

impl TputRecord {
    /// A 64-byte RC WRITE inbound point with no option given: one thread,
    /// one QP, 10 WRs in one second, every rate figure 0.
    #[doc(hidden)]
    pub fn example() -> Self {
        TputRecord {
            passes: Vec::new(),
            series: None,
            verb: "write".into(),
            direction: "inbound".into(),
            transport: "rc".into(),
            size: 64,
            posting: PostingFields::default(),
            event_wakeups: None,
            req: None,
            resp: None,
            path: PathFields::default(),
            bidirectional: false,
            srq: false,
            directions: None,
            memory: MemoryFields::default(),
            connection: crate::spec::gid_connection(),
            path_mtu: None,
            signal_period: 64,
            effective_signal_period: None,
            qps: 1,
            postlist: 1,
            window: 128,
            threads: 1,
            warmup_s: 0.0,
            setup_s: None,
            setup_per_qp_ms: None,
            requested_s: Some(1.0),
            iters: None,
            issued_by: Some("client".into()),
            ops: 10,
            elapsed_s: 1.0,
            mops: 0.0,
            gbps: 0.0,
            mib_s: 0.0,
            sent: 10,
            received: None,
            lost: None,
            responses: None,
            completions: 1,
            per_thread: vec![],
            per_qp_ops: vec![10],
            group_clients: 1,
            aggregate_mops: None,
            clients: vec![],
            verify_failures: None,
            device_counters: None,
            cpu_util: None,
            live: LiveFields::default(),
            checks: Default::default(),
            offered_mops: None,
            rate_per_qp: false,
            burst: None,
            rate_missed: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Record;
    use super::*;

    #[test]
    fn examples_read_back_as_written() {
        for r in [
            Record::Latency(LatencyRecord::example()),
            Record::Throughput(TputRecord::example()),
        ] {
            let text = serde_json::to_string(&r).unwrap();
            assert_eq!(serde_json::from_str::<Record>(&text).unwrap(), r, "{text}");
        }
    }
}
