//! `--cm`: the measured QPs connected by rdma_cm (address and route
//! resolution, connect/accept) in loopback and through `serve`, latency and
//! throughput, with the device's counters as the witness that the QPs carry
//! the traffic rdma-bench counts, and the path knobs still applied.

use std::time::{Duration, Instant};

use rdma_bench::connect::{Control, Message, TcpChannel, PROTOCOL_VERSION};
use rdma_bench::spec::{Connection, LatencyMode, LatencySpec, PathSpec, TestSpec, VerbKind};
use rdma_bench::verbs::{Endpoint, Gid, Transport};

use super::common::{run, text};
use super::{
    assert_messages, assert_packets, counter, device, ipv4, latency, start_server,
    start_server_with,
};

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn cm_latency_and_throughput_in_loopback() {
    // WRITE ping-pong: two WRITEs and their ACKs per iteration, as over GIDs.
    let (doc, csv) = latency(
        "cmlat",
        &[
            "write", "--cm", "-s", "64", "-n", "2000", "--warmup", "2000",
        ],
    );
    let r = doc.latency().next().unwrap();
    assert_eq!((r.connection.as_str(), r.iters), ("cm", 2000), "{r:?}");
    assert!(csv.lines().next().unwrap().contains("connection"), "{csv}");
    assert!(csv.lines().nth(1).unwrap().contains(",cm,"), "{csv}");
    assert_packets("cm write latency", r.device_counters.as_ref(), r.iters, 4);

    // -R (perftest's spelling) with a path MTU and a traffic class: the
    // MTU laid over rdma_cm's attributes reaches the device (a 2048 B
    // WRITE is 4 packets at 512 where rxe's active 1024 makes 2).
    let (doc, _) = latency(
        "cmmtu",
        &[
            "write", "-R", "-s", "2048", "-n", "1000", "--warmup", "500", "--mtu", "512",
            "--tclass", "32",
        ],
    );
    let r = doc.latency().next().unwrap();
    assert_eq!(r.connection, "cm");
    assert_eq!((r.path.mtu, r.path.tclass), (Some(512), Some(32)));
    let sent = counter(r.device_counters.as_ref(), "sent_pkts", "cm --mtu 512");
    let per = sent as f64 / r.iters as f64;
    eprintln!("MEASURED: cm write 2048 B --mtu 512: {per:.2} packets per iteration");
    assert!(
        (7.9..=16.1).contains(&per),
        "{per:.2} packets per iteration"
    );

    // Throughput over 64 QPs, each connected by its own cm id.
    let (doc, _) = latency(
        "cmtput64",
        &[
            "write", "--tput", "inbound", "--cm", "-q", "64", "-n", "100", "-s", "64",
        ],
    );
    let r = doc.throughput().next().unwrap();
    let what = "cm write inbound -q 64";
    assert_eq!(
        (r.connection.as_str(), r.qps, r.ops),
        ("cm", 64, 6400),
        "{r:?}"
    );
    assert!(r.per_qp_ops.iter().all(|&n| n == 100), "{what}: {r:?}");
    assert_packets(what, r.device_counters.as_ref(), r.ops, 2);

    // SENDs: the receiver's count and the device's agree with the sender's.
    let (doc, _) = latency(
        "cmsend",
        &[
            "send", "--tput", "inbound", "--cm", "-q", "2", "-n", "1000", "-s", "64",
        ],
    );
    let r = doc.throughput().next().unwrap();
    let what = "cm send inbound";
    assert_eq!((r.connection.as_str(), r.ops), ("cm", 2000), "{r:?}");
    assert_eq!(r.received, Some(r.sent), "{what}: {r:?}");
    assert_packets(what, r.device_counters.as_ref(), r.ops, 2);
    assert_messages(what, r.device_counters.as_ref(), "rdma_recvs", r.sent);
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn cm_through_serve_alongside_gid_clients() {
    let _server = start_server(18641);
    let target = format!("{}:18641", ipv4());
    // SEND ping-pong: the server answers every message it counted.
    let (doc, _) = latency(
        "cmsrv0",
        &[
            "send",
            "--cm",
            "-s",
            "64",
            "-n",
            "1000",
            "--warmup",
            "1000",
            "--connect",
            &target,
        ],
    );
    let r = doc.latency().next().unwrap();
    assert_eq!((r.connection.as_str(), r.iters), ("cm", 1000), "{r:?}");
    assert_eq!(r.server_received, Some(r.sent), "{r:?}");
    // Client and server share rxe0: both sides' packets count on it.
    assert_packets("cm send via serve", r.device_counters.as_ref(), r.iters, 4);
    // The same server takes a GID-connected client without a flag.
    let (doc, _) = latency(
        "cmsrv1",
        &["write", "-s", "64", "-n", "200", "--connect", &target],
    );
    assert_eq!(doc.latency().next().unwrap().connection, "gid");
    // Throughput: 16 QPs inbound, and outbound (the server issues over the
    // QPs it accepted) on 2 threads of 4.
    let (doc, _) = latency(
        "cmsrv2",
        &[
            "read",
            "--tput",
            "inbound",
            "--cm",
            "-q",
            "16",
            "-n",
            "200",
            "-s",
            "64",
            "--connect",
            &target,
        ],
    );
    let r = doc.throughput().next().unwrap();
    assert_eq!((r.connection.as_str(), r.ops), ("cm", 3200), "{r:?}");
    assert_packets("cm read via serve", r.device_counters.as_ref(), r.ops, 2);
    let (doc, _) = latency(
        "cmsrv3",
        &[
            "send",
            "--tput",
            "outbound",
            "--cm",
            "-q",
            "4",
            "--threads",
            "2",
            "-n",
            "300",
            "-s",
            "64",
            "--connect",
            &target,
        ],
    );
    let r = doc.throughput().next().unwrap();
    assert_eq!((r.connection.as_str(), r.ops), ("cm", 2400), "{r:?}");
    assert_eq!(r.received, Some(r.sent), "{r:?}");
}

/// A `--cm` latency hello as a client sends it (write ping-pong, 64 B).
fn cm_hello() -> Message {
    Message::Hello {
        version: PROTOCOL_VERSION,
        tool_version: "test".into(),
        spec: TestSpec::Latency(LatencySpec {
            verb: VerbKind::Write,
            mode: LatencyMode::PingPong,
            transport: Transport::Rc,
            inline: Default::default(),
            imm: false,
            op: None,
            sizes: vec![64],
            iters: 10,
            duration_s: None,
            warmup: 0,
            timeout_s: 3.0,
            sge: 1,
            events: false,
            post_api: rdma_bench::spec::PostApi::Classic,
            live: Default::default(),
            validate: false,
            path: PathSpec {
                connection: Connection::Cm,
                ..PathSpec::default()
            },
            memory: Default::default(),
            keep_samples: 0,
        }),
        endpoint: Some(Endpoint {
            qpn: 17,
            psn: 0,
            lid: 0,
            gid: Gid::default(),
            addr: 0,
            rkey: 0,
            len: 0,
        }),
        client: Default::default(),
    }
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn cm_port_is_the_listener_a_session_announces_and_holds() {
    let (port, cm_port) = (18643u16, 18644u16);
    let _server = start_server_with(port, &["--cm-port", &cm_port.to_string()]);
    let target = format!("{}:{port}", ipv4());
    let (doc, _) = latency(
        "cmport",
        &[
            "write",
            "--cm",
            "-s",
            "64",
            "-n",
            "200",
            "--connect",
            &target,
        ],
    );
    assert_eq!(doc.latency().next().unwrap().connection, "cm");
    // A session of our own: the Accept announces the fixed port... (The
    // last client's session may not have let its listener go yet: while it
    // holds the port, a new session is refused, so try again for a while.)
    let deadline = Instant::now() + Duration::from_secs(30);
    let ctl = loop {
        let stream = std::net::TcpStream::connect((ipv4().as_str(), port)).unwrap();
        let mut ctl = TcpChannel::new(stream, Duration::from_secs(30)).unwrap();
        ctl.send(&cm_hello()).unwrap();
        match ctl.recv(Duration::from_secs(30)).unwrap() {
            Message::Accept { cm_port: p, .. } => {
                assert_eq!(p, Some(cm_port));
                break ctl;
            }
            Message::Refuse { reason, .. }
                if reason.contains("cannot listen") && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(100));
            }
            other => panic!("expected accept, got {other:?}"),
        }
    };
    // ...and holds it: a second --cm client while it is open is refused,
    // naming the option, instead of dialling someone else's listener.
    let out = run(&[
        "write",
        "--cm",
        "-s",
        "64",
        "-n",
        "10",
        "-d",
        &device(),
        "--connect",
        &target,
    ]);
    let (stdout, stderr) = text(&out);
    assert_ne!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!("--cm-port {cm_port}: cannot listen")),
        "{stderr}"
    );
    drop(ctl);
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn a_server_without_its_rdma_cm_listener_fails_the_client_in_bounded_time() {
    // A fake server that accepts the test but announces a port where no
    // rdma_cm listener is: the client's connect is answered by rdma_cm
    // (rejected or unreachable), named, exit 1, long before any timeout.
    let listener = std::net::TcpListener::bind((ipv4().as_str(), 18645)).unwrap();
    let fake = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut ctl = TcpChannel::new(stream, Duration::from_secs(30)).unwrap();
        let hello = ctl.recv(Duration::from_secs(30)).unwrap();
        assert!(matches!(hello, Message::Hello { .. }), "{hello:?}");
        ctl.send(&Message::Accept {
            version: PROTOCOL_VERSION,
            endpoint: Some(Endpoint {
                qpn: 99,
                psn: 0,
                lid: 0,
                gid: Gid::default(),
                addr: 0,
                rkey: 0,
                len: 64,
            }),
            device: device(),
            host: "fake".into(),
            cm_port: Some(18646),
            port: 1,
            active_mtu: 1024,
            gid: String::new(),
        })
        .unwrap();
        // Stay until the client gives up.
        let _ = ctl.recv(Duration::from_secs(60));
    });
    let began = Instant::now();
    let target = format!("{}:18645", ipv4());
    let out = run(&[
        "write",
        "--cm",
        "-s",
        "64",
        "-n",
        "10",
        "-d",
        &device(),
        "--connect",
        &target,
        "--timeout",
        "5",
    ]);
    let took = began.elapsed();
    let (stdout, stderr) = text(&out);
    eprintln!("MEASURED: a missing rdma_cm listener failed the client after {took:?}: {stderr}");
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stderr.contains("rdma_connect"), "{stderr}");
    assert!(stderr.contains("RDMA_CM_EVENT_"), "{stderr}");
    assert!(took < Duration::from_secs(40), "{took:?}");
    fake.join().unwrap();
}
