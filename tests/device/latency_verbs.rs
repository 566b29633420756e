//! The latency tests of each verb and transport: the device is there and
//! says what it can (and results record it as ibv_devinfo says it),
//! ping-pong, inline, completion latency, SEND with and without immediate
//! data over RC, UC and UD, atomics, duration mode.

use super::*;

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn device_port_is_active() {
    let ctx = Context::open(&device()).expect("device opens");
    let port = ctx.query_port(1).expect("port 1 queries");
    assert_eq!(port.state, PortState::Active);
    assert!(port.active_mtu >= 256);
    assert!(!ctx.gid_table(1).unwrap().is_empty(), "has a GID");
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn devices_reports_inline_and_atomics() {
    let out = run(&["devices", "--json"]);
    assert!(out.status.success(), "{}", text(&out).1);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let dev = v
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == device().as_str())
        .expect("device listed");
    let max_inline = dev["max_inline"].as_u64().unwrap();
    assert!(max_inline >= 256, "max_inline {max_inline}");
    assert_ne!(dev["atomic_cap"], "none");
    assert_eq!(dev["ports"][0]["state"], "active");
    let table = run(&["devices"]);
    assert!(text(&table)
        .0
        .contains(&format!("max_inline {max_inline} B")));
}

/// `key: value` of `ibv_devinfo -v -d DEV`, first occurrence of each key
/// (the device's own lines come before its ports').
fn devinfo(dev: &str) -> std::collections::HashMap<String, String> {
    let out = Command::new("ibv_devinfo")
        .args(["-v", "-d", dev])
        .output()
        .expect("ibv_devinfo runs (rdma-core's ibverbs-utils)");
    assert!(out.status.success(), "{}", text(&out).1);
    let mut map = std::collections::HashMap::new();
    for line in text(&out).0.lines() {
        if let Some((k, v)) = line.trim().split_once(':') {
            map.entry(k.trim().to_string())
                .or_insert_with(|| v.trim().to_string());
        }
    }
    map
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn results_record_the_driver_and_limits_ibv_devinfo_shows() {
    let dev = device();
    let (doc, _) = latency("devrec", &["write", "-s", "64", "-n", "100"]);
    let d = &doc.device;
    let caps = d.capabilities.as_ref().expect("capabilities recorded");
    // The witness is ibv_devinfo, which shares no code with ours.
    let info = devinfo(&dev);
    let num = |k: &str| -> u32 {
        let v = info
            .get(k)
            .unwrap_or_else(|| panic!("ibv_devinfo has no {k}"));
        v.parse().unwrap_or_else(|_| panic!("{k}: {v}"))
    };
    assert_eq!(caps.max_qp, num("max_qp"));
    assert_eq!(caps.max_qp_wr, num("max_qp_wr"));
    assert_eq!(caps.max_cqe, num("max_cqe"));
    assert_eq!(caps.max_sge, num("max_sge"));
    assert_eq!(caps.max_qp_rd_atom, num("max_qp_rd_atom"));
    assert_eq!(caps.max_qp_init_rd_atom, num("max_qp_init_rd_atom"));
    assert_eq!(caps.max_srq, num("max_srq"));
    assert_eq!(caps.max_srq_wr, num("max_srq_wr"));
    let atomic = match info["atomic_cap"].split_whitespace().next() {
        Some("ATOMIC_NONE") => "none",
        Some("ATOMIC_HCA") => "hca",
        Some("ATOMIC_GLOB") => "global",
        other => panic!("atomic_cap {other:?}"),
    };
    assert_eq!(caps.atomic_cap, atomic);
    assert_eq!(d.port, 1, "ibv_devinfo's first port is the one measured");
    assert_eq!(d.port_state.as_deref(), Some("active"));
    assert!(
        info["state"].starts_with("PORT_ACTIVE"),
        "{}",
        info["state"]
    );
    assert_eq!(d.lid, Some(num("port_lid") as u16));
    // The driver: its module is loaded, and a soft-RoCE device carries
    // rdma_rxe's own sysfs attribute (`parent`, the netdev under it).
    let driver = d.driver.as_deref().expect("driver recorded");
    assert!(
        std::path::Path::new("/sys/module").join(driver).exists(),
        "no /sys/module/{driver}"
    );
    let rxe_attr = std::path::Path::new("/sys/class/infiniband")
        .join(&dev)
        .join("parent");
    assert_eq!(driver == "rdma_rxe", rxe_attr.exists(), "{driver}");
    // `devices` says the same driver.
    let table = text(&run(&["devices"])).0;
    assert!(table.contains(&format!("{dev}: ")), "{table}");
    assert!(table.contains(&format!("driver {driver} |")), "{table}");
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn write_pingpong_sizes_2_to_4096() {
    let (doc, csv) = latency(
        "write",
        &["write", "-s", "2..4096", "-n", ITERS_S, "--warmup", "50"],
    );
    check_points(&doc, &csv, &pow2(2, 4096), ITERS);
    assert!(doc
        .latency()
        .all(|r| r.metric == "half_rtt" && !r.posting.inline));
    let r = doc.latency().next().unwrap();
    let rtt = r.rtt_p50_ns.unwrap();
    assert!(
        (r.stats.p50_ns * 2.0 - rtt).abs() <= rtt * 0.01,
        "half-RTT is half the RTT"
    );
    assert_eq!(r.warmup_dropped, 50);
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn write_inline_up_to_max_inline_and_refused_above() {
    let (doc, csv) = latency(
        "winl",
        &["write", "--inline", "-s", "2..512", "-n", ITERS_S],
    );
    check_points(&doc, &csv, &pow2(2, 512), ITERS);
    assert!(doc.latency().all(|r| r.posting.inline));
    let out = run(&["write", "--inline", "-s", "4096", "-d", &device()]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("max_inline"), "{stderr}");
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn completion_latency_of_write_read_send() {
    for (verb, extra) in [
        ("write", "--completion"),
        ("send", "--completion"),
        ("read", ""),
    ] {
        let mut args = vec![verb, "-s", "2..4096", "-n", ITERS_S];
        if !extra.is_empty() {
            args.push(extra);
        }
        let (doc, csv) = latency(verb, &args);
        check_points(&doc, &csv, &pow2(2, 4096), ITERS);
        assert!(doc.latency().all(|r| r.metric == "completion"), "{verb}");
    }
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn send_pingpong_plain_imm_and_transports() {
    let (doc, csv) = latency("send", &["send", "-s", "2..4096", "-n", ITERS_S]);
    check_points(&doc, &csv, &pow2(2, 4096), ITERS);
    assert!(doc.latency().all(|r| r.server_received == Some(r.sent)));
    let (doc, csv) = latency(
        "sendimm",
        &["send", "--imm", "-s", "2,64,1024", "-n", ITERS_S],
    );
    check_points(&doc, &csv, &[2, 64, 1024], ITERS);
    assert!(doc.latency().all(|r| r.posting.imm));
    let (doc, csv) = latency(
        "senduc",
        &["send", "-c", "uc", "-s", "2,64,1024", "-n", ITERS_S],
    );
    check_points(&doc, &csv, &[2, 64, 1024], ITERS);
    let (doc, csv) = latency(
        "sendud",
        &["send", "-c", "ud", "-s", "2..1024", "-n", ITERS_S],
    );
    check_points(&doc, &csv, &pow2(2, 1024), ITERS);
    assert!(doc.latency().all(|r| r.transport == "ud"));
    let out = run(&["send", "-c", "ud", "-s", "2048", "-d", &device()]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("exceeds the UD MTU"), "{stderr}");
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn write_over_uc_and_echo() {
    let (doc, csv) = latency(
        "writeuc",
        &["write", "-c", "uc", "-s", "2,64,1024", "-n", ITERS_S],
    );
    check_points(&doc, &csv, &[2, 64, 1024], ITERS);
    let (doc, csv) = latency("echo", &["echo", "-s", "2..4096", "-n", ITERS_S]);
    check_points(&doc, &csv, &pow2(2, 4096), ITERS);
    let max_inline = doc.device.max_inline;
    for r in doc.latency() {
        assert_eq!(
            r.posting.inline,
            r.size <= max_inline,
            "echo inlines when it fits: {r:?}"
        );
        assert!(r.rtt_p50_ns.is_some());
    }
    let (doc, csv) = latency("echouc", &["echo", "-c", "uc", "-s", "64", "-n", ITERS_S]);
    check_points(&doc, &csv, &[64], ITERS);
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn atomics_verify_their_results() {
    for op in ["fadd", "cas"] {
        let (doc, csv) = latency(op, &["atomic", "--op", op, "-n", ITERS_S]);
        check_points(&doc, &csv, &[8], ITERS);
        assert_eq!(
            doc.latency().next().unwrap().posting.op.as_deref(),
            Some(op)
        );
        assert_eq!(doc.latency().next().unwrap().verify_failures, 0);
    }
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn duration_mode_measures_for_the_time_given() {
    let (doc, _) = latency("dur", &["write", "-s", "64", "-D", "0.5", "--warmup", "10"]);
    let r = doc.latency().next().unwrap();
    assert!(r.iters > 0);
    assert!(r.elapsed_s >= 0.5 && r.elapsed_s < 5.0, "{r:?}");
}
