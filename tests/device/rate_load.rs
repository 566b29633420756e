//! `--rate` (token-bucket issuers) and `--under-load` (latency beside
//! background load) on the device.

use rdma_bench::results::TputRecord;

fn one_tput(name: &str, args: &[&str]) -> TputRecord {
    let (doc, _) = super::latency(name, args);
    let mut t: Vec<TputRecord> = doc.throughput().cloned().collect();
    assert_eq!(t.len(), 1, "{name}: one point");
    t.remove(0)
}

/// Relative error of `got` against `want`.
fn error(got: f64, want: f64) -> f64 {
    (got - want) / want
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn rate_at_half_the_saturated_rate_holds_within_5_percent() {
    // UC WRITE: one packet per WR, so the device's sent_pkts witness the WRs.
    let base = [
        "write", "--tput", "inbound", "-c", "uc", "-s", "64", "-D", "1",
    ];
    let sat = one_tput("ratesat", &base);
    assert!(sat.offered_mops.is_none(), "unlimited: no offered rate");
    let half = sat.mops / 2.0;
    let rate = format!("{half}");
    let mut args = base.to_vec();
    args.extend_from_slice(&["--rate", &rate]);
    let r = one_tput("ratehalf", &args);
    let offered = r.offered_mops.expect("offered_mops recorded");
    assert!((offered - half).abs() < 1e-12, "{offered} vs {half}");
    let err = error(r.mops, offered);
    eprintln!(
        "MEASURED: saturated {:.6} Mops; --rate {half:.6}: achieved {:.6} Mops, error {:+.2}%",
        sat.mops,
        r.mops,
        err * 100.0
    );
    assert!(err.abs() < 0.05, "achieved {} vs offered {offered}", r.mops);
    // The device saw the same rate: its packets over the window.
    let dc = r.device_counters.as_ref().expect("device counters");
    let pkts = *dc.get("sent_pkts").expect("sent_pkts") as f64;
    let dev_mops = pkts / r.elapsed_s / 1e6;
    let dev_err = error(dev_mops, offered);
    eprintln!(
        "MEASURED: device sent_pkts {pkts} over {:.3} s = {dev_mops:.6} Mops, error {:+.2}%",
        r.elapsed_s,
        dev_err * 100.0
    );
    assert!(
        dev_err.abs() < 0.05,
        "device {dev_mops} vs offered {offered}"
    );

    // Per QP over 2 QPs: each is offered a quarter, together half again.
    let quarter = format!("{}", half / 2.0);
    let mut args = base.to_vec();
    args.extend_from_slice(&[
        "-q",
        "2",
        "--rate-per-qp",
        "--rate",
        &quarter,
        "--burst",
        "2",
    ]);
    let q = one_tput("rateqp", &args);
    assert!(q.rate_per_qp && q.burst == Some(2), "{q:?}");
    let offered = q.offered_mops.unwrap();
    assert!((offered - half).abs() < 1e-9, "{offered} vs {half}");
    let err = error(q.mops, offered);
    eprintln!(
        "MEASURED: --rate-per-qp {quarter} x 2 QPs --burst 2: achieved {:.6} Mops, error {:+.2}%, per QP {:?}",
        q.mops,
        err * 100.0,
        q.per_qp_ops
    );
    assert!(err.abs() < 0.05, "achieved {} vs offered {offered}", q.mops);
    let (a, b) = (q.per_qp_ops[0] as f64, q.per_qp_ops[1] as f64);
    assert!(
        (a - b).abs() / a.max(b) < 0.05,
        "QPs share evenly: {a} vs {b}"
    );
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn under_load_points_rise_in_achieved_mops_and_tail_latency() {
    // 4 KiB WRITEs: on rxe the CPU is the NIC, and only messages this large
    // make the background's work queue up in front of the probe's.
    let (doc, csv) = super::latency(
        "underload",
        &[
            "write",
            "--completion",
            "-s",
            "4096",
            "--under-load",
            "10%,50%,max",
            "-D",
            "1",
        ],
    );
    let pts: Vec<_> = doc.latency().collect();
    assert_eq!(pts.len(), 3, "one record per load");
    assert_eq!(csv.lines().count(), 4, "one CSV row per load");
    assert!(csv.lines().next().unwrap().contains("achieved_mops"));
    let labels: Vec<&str> = pts.iter().map(|r| r.load.as_deref().unwrap()).collect();
    assert_eq!(labels, ["10%", "50%", "max"]);
    let sat = pts[2].saturated_mops.expect("saturated rate recorded");
    for r in &pts {
        let bg = r.background.as_ref().expect("background recorded");
        let achieved = r.achieved_mops.unwrap();
        eprintln!(
            "MEASURED: load {}: offered {:?} achieved {achieved:.6} Mops (saturated {sat:.6}); probe p50 {:.0} ns p99 {:.0} ns p99.9 {:.0} ns over {} samples; background {} ops in {:.3} s, probe {:.3} s",
            r.load.as_deref().unwrap(),
            r.offered_mops,
            r.stats.p50_ns,
            r.stats.p99_ns,
            r.stats.p999_ns,
            r.stats.samples,
            bg.ops,
            bg.elapsed_s,
            r.elapsed_s
        );
        // The background's window spans the probe's measurement.
        assert!(bg.elapsed_s >= r.elapsed_s, "{bg:?} vs {}", r.elapsed_s);
        assert_eq!(bg.per_qp_ops.iter().sum::<u64>(), bg.ops);
        assert!(r.stats.samples > 100, "{r:?}");
        // The device carried the background's WRs (RC: request + ACK each, both on rxe0).
        let dc = bg
            .device_counters
            .as_ref()
            .expect("background device counters");
        let pkts = dc["sent_pkts"];
        assert!(
            pkts >= bg.ops,
            "device sent {pkts} packets for {} WRs",
            bg.ops
        );
    }
    for (r, pct) in pts.iter().zip([0.1, 0.5]) {
        let offered = r.offered_mops.unwrap();
        assert!(
            (offered - sat * pct).abs() < 1e-9,
            "{offered} vs {pct} x {sat}"
        );
    }
    assert!(pts[2].offered_mops.is_none(), "max is unlimited");
    let mops: Vec<f64> = pts.iter().map(|r| r.achieved_mops.unwrap()).collect();
    assert!(
        mops[0] < mops[1] && mops[1] < mops[2],
        "achieved Mops rise with the load: {mops:?}"
    );
    assert!(
        pts[2].stats.p99_ns >= pts[0].stats.p99_ns,
        "p99 at max {} below p99 at 10% {}",
        pts[2].stats.p99_ns,
        pts[0].stats.p99_ns
    );
}
