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

/// `serve` with its log read line by line; killed when dropped.
struct LoggedServer {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl LoggedServer {
    fn start(port: u16) -> LoggedServer {
        use std::io::BufRead;
        let mut child = serve_command(port, &[])
            .stderr(Stdio::piped())
            .spawn()
            .expect("serve starts");
        let err = child.stderr.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                eprintln!("serve| {l}");
                let _ = tx.send(l);
            }
        });
        common::await_tcp_listener(port, 60);
        LoggedServer { child, lines }
    }

    /// The first line of its log with `needle`, if one comes within `wait`.
    fn line_within(&self, needle: &str, wait: Duration) -> Option<String> {
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.contains(needle) => return Some(l),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }
}

impl Drop for LoggedServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The victim's window: the server must notice its death long before it.
const VICTIM_WINDOW_S: u64 = 300;

/// A client killed while the server's issuers write to it (outbound, and
/// both ways): its session ends as soon as its connection does, not at its
/// window's end plus --timeout for completions that never come, and the
/// client measuring alongside it through the same server goes on. The
/// witnesses: the device's packet counter (the server is issuing), the
/// server's log, and the other client's own intervals and exit status.
#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn a_killed_client_of_issuing_server_threads_ends_its_session_alone() {
    let server = LoggedServer::start(18608);
    let target = format!("{}:18608", ipv4());
    let dev = device();
    let window = VICTIM_WINDOW_S.to_string();
    for (what, mode) in [
        ("outbound", &["--tput", "outbound"][..]),
        ("bidirectional", &["--tput", "outbound", "-b"][..]),
    ] {
        let before = bidir_srq::port_counter("sent_pkts");
        let mut args = vec!["write", "-D", &window, "--connect", &target, "-d", &dev];
        args.extend_from_slice(mode);
        let victim = common::Live::start(&format!("victim-{what}"), &args);
        // The server's issuers run once packets flow (setup sends none).
        let issuing = Instant::now();
        while bidir_srq::port_counter("sent_pkts") < before + 2000 {
            assert!(
                issuing.elapsed() < Duration::from_secs(120),
                "{what}: no packets flowed"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let bystander =
            super::measuring_until_stopped(&format!("bystander-{what}"), &["write"], &target);
        bystander.await_line("# interval", 120);
        kill_pid(victim.id(), "-KILL");
        let killed = Instant::now();
        let _ = victim.end(60);
        // Unwatched, the issuers would go on to the window's end (UC) or
        // stall for --timeout (RC): the drop must come before the window's end.
        let left = Duration::from_secs(VICTIM_WINDOW_S).saturating_sub(issuing.elapsed());
        let dropped = server
            .line_within("dropped", left)
            .unwrap_or_else(|| panic!("{what}: the server still serves the killed client"));
        eprintln!(
            "MEASURED: {what}: the server dropped the killed client {:.2} s after the kill: {dropped}",
            killed.elapsed().as_secs_f64()
        );
        assert!(
            dropped.contains("closed the connection"),
            "{what}: {dropped}"
        );
        // The other session measures on, then ends as it was asked to.
        bystander.await_line("# interval", 60);
        kill_pid(bystander.id(), "-INT");
        let (status, stderr, _) = bystander.end(60);
        assert!(
            status.success(),
            "{what}: the bystander: {status:?} {stderr}"
        );
        assert!(
            server
                .line_within("done", Duration::from_secs(60))
                .is_some(),
            "{what}: the bystander's session ended normally"
        );
    }
}
