//! Peers that die or misbehave: a killed client, a killed server, garbage
//! on the serve port, an interrupted sweep resumed, and memory over a long run.

use super::*;

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn a_killed_client_leaves_the_server_serving() {
    let _server = start_server(18605);
    let target = format!("{}:18605", ipv4());
    let dev = device();
    let victim = common::Live::start(
        "victim",
        &[
            "write",
            "--tput",
            "inbound",
            "-D",
            "30",
            "--interval",
            "0.2",
            "--connect",
            &target,
            "-d",
            &dev,
        ],
    );
    // Killed in the middle of its window (its first interval has ended).
    victim.await_line("# interval", 120);
    kill_pid(victim.id(), "-KILL");
    let _ = victim.end(60);
    // The next client is served, on the same device, with the same server.
    let (doc, _) = latency(
        "afterkill",
        &[
            "send",
            "--tput",
            "inbound",
            "-D",
            "0.2",
            "--connect",
            &target,
        ],
    );
    let r = doc.throughput().next().unwrap();
    assert!(r.mops > 0.0);
    assert_eq!(r.received, Some(r.sent));
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn a_killed_server_makes_the_client_fail_within_the_timeout() {
    let server = start_server(18606);
    let target = format!("{}:18606", ipv4());
    let dev = device();
    let client = common::Live::start(
        "orphan",
        &[
            "write",
            "-s",
            "64",
            "-D",
            "60",
            "--interval",
            "0.2",
            "--timeout",
            "3",
            "--connect",
            &target,
            "-d",
            &dev,
        ],
    );
    // The server killed while the client measures (an interval has ended).
    client.await_line("# interval", 120);
    kill(&server.0, "-KILL");
    let killed = Instant::now();
    let (status, stderr, ended) = client.end(120);
    let waited = ended.duration_since(killed);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("timed out")
            || stderr.contains("closed the connection")
            || stderr.contains("work completion failed"),
        "a clear reason: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    // A dead process closes its connection at once: within --timeout (3 s),
    // twice that for the client's own teardown on a slow guest.
    assert!(
        waited < Duration::from_secs(6),
        "took {waited:?} after the kill"
    );
    drop(server);
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn garbage_on_the_serve_port_does_not_stop_it() {
    use std::io::Write;
    let _server = start_server(18607);
    let addr = (ipv4(), 18607u16);
    let garbage: &[&[u8]] = &[
        b"GET / HTTP/1.0\r\n\r\n",
        &[0xff, 0xff, 0xff, 0xff, 1, 2, 3],
        &[0, 0, 0, 5, b'{', b'}', b'x'],
        b"\x00\x00\x00\x10{\"type\":\"hello\"}",
        &[0u8; 4096],
    ];
    for g in garbage {
        let mut s = std::net::TcpStream::connect(addr.clone()).unwrap();
        let _ = s.write_all(g);
        drop(s);
    }
    // A connection that says nothing at all, left open.
    let _silent = std::net::TcpStream::connect(addr.clone()).unwrap();
    let target = format!("{}:18607", ipv4());
    let (doc, csv) = latency(
        "aftergarbage",
        &["write", "--connect", &target, "-s", "64", "-n", ITERS_S],
    );
    check_points(&doc, &csv, &[64], ITERS);
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn an_interrupted_sweep_keeps_its_points_and_resumes() {
    let dir = scratch("resume");
    let config = dir.join("sweep.toml");
    std::fs::write(
        &config,
        // Points of 0.3 s each: the sweep lasts seconds at any speed, so the
        // signal lands in its middle.
        "name = \"resume-test\"\n[[series]]\nlabel = \"W\"\nverb = \"write\"\nsize = \"2..4096\"\nduration = 0.3\nwarmup = 10\n",
    )
    .unwrap();
    let child = Command::new(bin())
        .args([
            "run",
            config.to_str().unwrap(),
            "--out",
            dir.to_str().unwrap(),
            "--quiet",
            "-d",
            &device(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Let a few of the 12 points finish, then interrupt.
    let json = loop {
        let found = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "json"));
        if let Some(p) = found {
            let doc: ResultsDoc = serde_json::from_value(read_json(&p)).unwrap();
            if doc.results.len() >= 3 {
                break p;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    kill(&child, "-INT");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "interrupted runs exit non-zero: {stderr}"
    );
    assert!(stderr.contains("interrupted"), "{stderr}");
    let doc: ResultsDoc = serde_json::from_value(read_json(&json)).expect("parseable after SIGINT");
    let kept = doc.results.len();
    assert!((3..12).contains(&kept), "{kept} points kept");
    assert!(
        doc.latency().all(|r| r.iters > 0 && r.elapsed_s >= 0.3),
        "only whole points are saved"
    );
    // --resume measures the rest into the same file.
    let out = run(&[
        "run",
        config.to_str().unwrap(),
        "--resume",
        json.to_str().unwrap(),
        "--quiet",
        "-d",
        &device(),
    ]);
    assert!(out.status.success(), "{}", text(&out).1);
    let doc: ResultsDoc = serde_json::from_value(read_json(&json)).unwrap();
    let sizes: Vec<u32> = doc.latency().map(|r| r.size).collect();
    assert_eq!(sizes, pow2(2, 4096), "every point once, in order");
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn a_long_run_stays_under_64_mib() {
    // A duration, not a count: a slow machine must not take minutes, and a
    // fast one runs millions of iterations (kept in a histogram, never as
    // raw samples, so memory does not grow with them).
    let (doc, _) = latency("long", &["write", "-s", "8", "-D", "8", "--warmup", "0"]);
    let r = doc.latency().next().unwrap();
    assert!(r.stats.samples > 1000, "{:?}", r.stats);
    let rss = doc.peak_rss_kib.expect("peak RSS recorded");
    eprintln!(
        "MEASURED: 8 s WRITE latency run of {} iterations, peak RSS {rss} KiB",
        r.stats.samples
    );
    assert!(rss < 64 * 1024, "peak RSS {rss} KiB");
}
