//! Path options: QoS (traffic class, service level, hop limit) and the path
//! MTU, applied, recorded and refused above what the port allows.

use super::*;

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn qos_and_path_options_are_applied_recorded_and_refused_above_the_port() {
    let qos = [
        "--tclass",
        "32",
        "--sl",
        "1",
        "--flow-label",
        "7",
        "--mtu",
        "512",
    ];
    let check = |tclass, sl, flow_label, mtu| {
        assert_eq!(tclass, Some(32));
        assert_eq!(sl, Some(1));
        assert_eq!(flow_label, Some(7));
        assert_eq!(mtu, Some(512));
    };
    // Loopback latency: both QPs on the requested path; the record carries it.
    let mut args = vec!["write", "-s", "64,2048", "-n", ITERS_S];
    args.extend_from_slice(&qos);
    let (doc, csv) = latency("qos-lat", &args);
    check_points(&doc, &csv, &[64, 2048], ITERS);
    for r in doc.latency() {
        check(r.path.tclass, r.path.sl, r.path.flow_label, r.path.mtu);
    }
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let row: Vec<&str> = csv.lines().nth(1).unwrap().split(',').collect();
    for (col, want) in [
        ("tclass", "32"),
        ("sl", "1"),
        ("flow_label", "7"),
        ("mtu", "512"),
    ] {
        let i = header.iter().position(|h| *h == col).expect(col);
        assert_eq!(row[i], want, "CSV column {col}");
    }
    // Without the options the record leaves them out (the defaults ran).
    let (doc, _) = latency("qos-none", &["write", "-s", "64", "-n", ITERS_S]);
    let r = doc.latency().next().unwrap();
    assert_eq!(
        (r.path.tclass, r.path.sl, r.path.flow_label, r.path.mtu),
        (None, None, None, None)
    );
    // Throughput (UD sends fit the 512 B MTU) and a serve that applies the client's values.
    let mut args = vec![
        "send", "--tput", "inbound", "-c", "rc,ud", "-s", "512", "-D", "0.3",
    ];
    args.extend_from_slice(&qos);
    let (doc, _) = latency("qos-tput", &args);
    assert_eq!(doc.throughput().count(), 2);
    for r in doc.throughput() {
        assert!(r.mops > 0.0, "{r:?}");
        check(r.path.tclass, r.path.sl, r.path.flow_label, r.path.mtu);
    }
    let _server = start_server(18671);
    let target = format!("{}:18671", ipv4());
    let mut args = vec!["send", "--connect", &target, "-s", "64", "-n", ITERS_S];
    args.extend_from_slice(&qos);
    let (doc, csv) = latency("qos-remote", &args);
    check_points(&doc, &csv, &[64], ITERS);
    let r = doc.latency().next().unwrap();
    check(r.path.tclass, r.path.sl, r.path.flow_label, r.path.mtu);
    // Refusals against the device, exit 2, one line.
    let dev = device();
    let out = run(&["send", "-c", "ud", "-s", "1024", "--mtu", "512", "-d", &dev]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--size 1024") && stderr.contains("UD MTU of 512 given by --mtu"),
        "{stderr}"
    );
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    let active = active_mtu();
    assert!(
        active < 4096,
        "this test needs a port below 4096 (rxe: 1024)"
    );
    for cmd in [
        &["write", "--mtu", "4096", "-d", &dev][..],
        &[
            "write", "--tput", "inbound", "--mtu", "4096", "-D", "0.1", "-d", &dev,
        ][..],
    ] {
        let out = run(cmd);
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{cmd:?}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "--mtu 4096 exceeds the active MTU of {dev} port 1 ({active})"
            )),
            "{stderr}"
        );
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    }
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn mtu_option_sets_the_path_mtu_the_device_packetizes_with() {
    // A 2048 B WRITE ping-pong on RC: each side's WRITE is 2048/MTU packets
    // plus its ACK, so --mtu 512 shows 4 data packets per WRITE where the
    // active MTU (1024 on rxe) shows 2: the device witnesses the path MTU.
    let active = active_mtu();
    let mut per_iter = Vec::new();
    for mtu in ["512", &active.to_string()] {
        let name = format!("mtu{mtu}");
        let (doc, _) = latency(
            &name,
            &[
                "write", "-s", "2048", "-n", "2000", "--warmup", "500", "--mtu", mtu,
            ],
        );
        let r = doc.latency().next().unwrap();
        let sent = counter(r.device_counters.as_ref(), "sent_pkts", &name);
        let per = sent as f64 / r.iters as f64;
        eprintln!(
            "MEASURED: write 2048 B --mtu {mtu}: sent_pkts {sent} for {} iterations = {per:.2} per iteration",
            r.iters
        );
        per_iter.push((mtu.parse::<u32>().unwrap(), per));
    }
    for (mtu, per) in per_iter {
        // Two WRITEs of 2048/mtu packets each, plus ACKs (at most one per packet).
        let data = 2.0 * 2048.0 / f64::from(mtu);
        assert!(
            per >= data - 0.1 && per <= 2.0 * data + 0.1,
            "--mtu {mtu}: {per:.2} packets per iteration, expected {data}..={}",
            2.0 * data
        );
    }
}
