//! Zero-byte payloads and scatter/gather lists, in loopback and through `serve`.

use super::*;

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn size_zero_write_send_and_imm_completion_latency_and_throughput() {
    let runs: &[(&str, &[&str])] = &[
        ("z0w", &["write", "--completion"]),
        ("z0s", &["send", "--completion"]),
        ("z0wi", &["write", "--completion", "--imm"]),
    ];
    for (name, args) in runs {
        let mut all = args.to_vec();
        all.extend_from_slice(&["-s", "0", "-n", "2000", "--warmup", "2000"]);
        let (doc, csv) = latency(name, &all);
        let r = doc.latency().next().unwrap();
        let what = format!("{args:?} -s 0");
        assert_eq!(r.size, 0, "{what}");
        assert_eq!(r.posting.sge, 1, "{what}");
        assert_eq!(r.iters, 2000, "{what}");
        assert_eq!(r.metric, "completion", "{what}");
        assert!(r.stats.p50_ns > 0.0, "{what}");
        assert!(csv.lines().next().unwrap().contains(",sge,"), "{csv}");
        eprintln!("MEASURED: {what}: p50 {:.0} ns", r.stats.p50_ns);
        assert_at_least_a_packet_per_op(&what, r.device_counters.as_ref(), r.iters);
        if r.verb == "send" {
            assert_eq!(
                r.server_received,
                Some(r.sent),
                "{what}: every 0-byte SEND was received"
            );
        }
    }
    for (verb, dir) in [
        ("write", "inbound"),
        ("send", "inbound"),
        ("write", "outbound"),
        ("send", "outbound"),
    ] {
        let (doc, _) = latency(
            &format!("z0t{verb}{dir}"),
            &[verb, "--tput", dir, "-s", "0", "-n", "2000", "-S", "16"],
        );
        let r = doc.throughput().next().unwrap();
        let what = format!("{verb} --tput {dir} -s 0");
        assert_eq!(r.size, 0, "{what}");
        assert_eq!(r.ops, 2000, "{what}: {r:?}");
        assert!(r.mops > 0.0, "{what}");
        eprintln!(
            "MEASURED: {what}: {:.3} Mops in {:.1} ms",
            r.mops,
            r.elapsed_s * 1e3
        );
        assert_at_least_a_packet_per_op(&what, r.device_counters.as_ref(), r.ops);
        if verb == "send" {
            assert_eq!(
                r.received,
                Some(r.sent),
                "{what}: every 0-byte SEND was received"
            );
        }
    }
}

/// rxe's max_sge, from `rdma-bench devices --json`.
fn device_max_sge() -> u64 {
    let out = run(&["devices", "--json"]);
    assert!(out.status.success(), "{}", text(&out).1);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == device().as_str())
        .expect("device listed")["max_sge"]
        .as_u64()
        .expect("max_sge reported")
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn sge_splits_payloads_and_is_refused_above_max_sge() {
    let (doc, csv) = latency("sge4pp", &["write", "-s", "64", "--sge", "4", "-n", "200"]);
    check_points(&doc, &csv, &[64], 200);
    let r = doc.latency().next().unwrap();
    assert_eq!((r.posting.sge, r.metric.as_str()), (4, "half_rtt"));
    let (doc, _) = latency(
        "sge4s",
        &[
            "send",
            "--completion",
            "-s",
            "1000",
            "--sge",
            "3",
            "-n",
            "200",
        ],
    );
    assert_eq!(doc.latency().next().unwrap().posting.sge, 3);
    // READ scatters into several SGEs; inline gathers several (the provider copies them).
    let (doc, _) = latency("sge4r", &["read", "-s", "4096", "--sge", "32", "-n", "200"]);
    assert_eq!(doc.latency().next().unwrap().posting.sge, 32);
    let (doc, _) = latency(
        "sge4i",
        &["write", "--inline", "-s", "64", "--sge", "4", "-n", "200"],
    );
    let r = doc.latency().next().unwrap();
    assert!(r.posting.inline && r.posting.sge == 4, "{r:?}");
    let (doc, csv) = latency(
        "sge4t",
        &[
            "write", "--tput", "inbound", "-s", "1024", "--sge", "4", "-n", "500",
        ],
    );
    let r = doc.throughput().next().unwrap();
    assert_eq!((r.posting.sge, r.size, r.ops), (4, 1024, 500), "{r:?}");
    assert!(r.mops > 0.0);
    assert!(csv.lines().next().unwrap().contains(",sge,"), "{csv}");
    let max = device_max_sge();
    eprintln!("MEASURED: {} max_sge {max}", device());
    let over = (max + 1).to_string();
    for args in [
        &["write", "-s", "4096", "--sge", &over][..],
        &["send", "--tput", "inbound", "-s", "4096", "--sge", &over][..],
    ] {
        let mut all = args.to_vec();
        let dev = device();
        all.extend_from_slice(&["-d", &dev]);
        let out = run(&all);
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("--sge {over}")) && stderr.contains(&format!("({max})")),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn sge_and_size_zero_through_serve() {
    let _server = start_server(18631);
    let target = format!("{}:18631", ipv4());
    let (doc, _) = latency(
        "sgesrv0",
        &[
            "send",
            "--completion",
            "-s",
            "0",
            "--connect",
            &target,
            "-n",
            "200",
        ],
    );
    let r = doc.latency().next().unwrap();
    assert_eq!((r.size, r.iters), (0, 200), "{r:?}");
    assert_eq!(r.server_received, Some(r.sent), "{r:?}");
    let (doc, _) = latency(
        "sgesrv1",
        &[
            "write",
            "-s",
            "64",
            "--sge",
            "4",
            "--connect",
            &target,
            "-n",
            "200",
        ],
    );
    assert_eq!(doc.latency().next().unwrap().posting.sge, 4);
    // Outbound: the server issues, with the client's --sge from the handshake.
    let (doc, _) = latency(
        "sgesrv2",
        &[
            "send",
            "--tput",
            "outbound",
            "-s",
            "1024",
            "--sge",
            "4",
            "--connect",
            &target,
            "-n",
            "500",
        ],
    );
    let r = doc.throughput().next().unwrap();
    assert_eq!((r.posting.sge, r.ops), (4, 500), "{r:?}");
    assert_eq!(r.received, Some(r.sent), "{r:?}");
}
