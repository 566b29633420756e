//! `serve` against hostile clients: floods of connections that are gone or
//! silent, and well-formed handshakes asking for more memory than
//! `--max-memory` allows. After each, a normal client must be served.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{bin, check_points, device, ipv4, latency, start_server_with, ITERS, ITERS_S};

/// Longest a refusal may take: generous, it is a "must not hang" bound (the
/// server answers before it allocates anything).
const QUICK: Duration = Duration::from_secs(10);

fn frame(v: &Value) -> Vec<u8> {
    let body = serde_json::to_vec(v).unwrap();
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&body);
    out
}

fn read_frame(s: &mut TcpStream) -> Value {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("a frame header");
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).expect("a frame body");
    serde_json::from_slice(&body).expect("a JSON frame")
}

/// The Hello a real client sends for `args`, caught by a listener of ours.
fn captured_hello(args: &[&str]) -> Value {
    let listener = TcpListener::bind((ipv4().as_str(), 0)).unwrap();
    let target = format!("{}:{}", ipv4(), listener.local_addr().unwrap().port());
    let mut child = Command::new(bin())
        .args(args)
        .args([
            "--connect",
            &target,
            "-d",
            &device(),
            "--quiet",
            "--timeout",
            "5",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (mut s, _) = listener.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let hello = read_frame(&mut s);
    drop(s);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(hello["type"], "hello", "{hello}");
    hello
}

/// Applies `f` to every object under `key` (every element if it is an array).
fn edit(v: &mut Value, key: &str, f: &dyn Fn(&mut Value)) {
    match v {
        Value::Object(m) => {
            for (k, child) in m.iter_mut() {
                if k == key {
                    match child {
                        Value::Array(items) => items.iter_mut().for_each(f),
                        other => f(other),
                    }
                } else {
                    edit(child, key, f);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|c| edit(c, key, f)),
        _ => {}
    }
}

/// Sends `hello` to the server on `port` and returns its first answer and
/// how long it took, with the connection (still open).
fn ask(port: u16, hello: &Value) -> (Value, Duration, TcpStream) {
    let mut s = TcpStream::connect((ipv4().as_str(), port)).unwrap();
    s.set_read_timeout(Some(QUICK * 3)).unwrap();
    let start = Instant::now();
    s.write_all(&frame(hello)).unwrap();
    let answer = read_frame(&mut s);
    (answer, start.elapsed(), s)
}

fn assert_refused(what: &str, answer: &Value, took: Duration, needle: &str, usage: bool) {
    assert_eq!(answer["type"], "refuse", "{what}: {answer}");
    assert_eq!(answer["usage"], usage, "{what}: {answer}");
    let reason = answer["reason"].as_str().unwrap();
    assert!(reason.contains(needle), "{what}: {reason}");
    assert!(took < QUICK, "{what}: refused only after {took:?}");
}

fn served(port: u16, name: &str) {
    let target = format!("{}:{port}", ipv4());
    let (doc, csv) = latency(
        name,
        &["write", "--connect", &target, "-s", "64", "-n", ITERS_S],
    );
    check_points(&doc, &csv, &[64], ITERS);
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn a_flood_of_closed_connections_leaves_every_slot_free() {
    let port = 18641;
    let _server = start_server_with(port, &["--max-clients", "2"]);
    for _ in 0..20 {
        drop(TcpStream::connect((ipv4().as_str(), port)).unwrap());
    }
    served(port, "afterflood");
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn slots_held_by_silent_connections_are_free_once_they_close() {
    let port = 18642;
    let _server = start_server_with(port, &["--max-clients", "2"]);
    let silent: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect((ipv4().as_str(), port)).unwrap())
        .collect();
    // While they are open, the server is full.
    let target = format!("{}:{port}", ipv4());
    let out = super::common::run_within(
        &[
            "write",
            "--connect",
            &target,
            "-s",
            "64",
            "-n",
            "10",
            "-d",
            &device(),
        ],
        60,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a full server served: {stderr}");
    assert!(stderr.contains("--max-clients 2"), "{stderr}");
    drop(silent);
    served(port, "aftersilent");
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn handshakes_asking_for_too_much_are_refused_at_once() {
    let port = 18643;
    let _server = start_server_with(port, &["--max-memory", "1g"]);
    let gib = 1u64 << 30;
    let lat = captured_hello(&["write", "-s", "64", "-n", "10"]);
    let tput = captured_hello(&[
        "write",
        "--tput",
        "inbound",
        "-s",
        "64",
        "-q",
        "64",
        "--mr-per-qp",
        "-D",
        "0.1",
    ]);
    let region = captured_hello(&[
        "write", "--tput", "inbound", "-s", "64", "--region", "64k", "-D", "0.1",
    ]);

    let mut big_latency = lat.clone();
    edit(&mut big_latency, "sizes", &|s| *s = json!(gib));
    let mut big_tput = tput.clone();
    edit(&mut big_tput, "points", &|p| p["size"] = json!(gib));
    let mut big_region = region.clone();
    edit(&mut big_region, "memory", &|m| {
        m["region"] = json!(1u64 << 36)
    });
    // Small registrations, but 4096 x 4096 responses the echo server would
    // prepare and keep.
    let echo = captured_hello(&["echo", "--tput", "-s", "64", "-D", "0.1"]);
    let mut wide_echo = echo.clone();
    edit(&mut wide_echo, "points", &|p| {
        p["qps"] = json!(4096);
        p["window"] = json!(4096);
    });
    let mut many_sizes = lat.clone();
    set_key(
        &mut many_sizes,
        "sizes",
        json!((1..=20_000u32).collect::<Vec<_>>()),
    );
    let cases: [(&str, &Value, &str); 5] = [
        ("latency 1 GiB", &big_latency, "--max-memory of 1 GiB"),
        (
            "tput 1 GiB x 64 QPs --mr-per-qp",
            &big_tput,
            "--max-memory of 1 GiB",
        ),
        ("64 GiB region", &big_region, "--max-memory of 1 GiB"),
        ("20000 sizes", &many_sizes, "limit of 10000"),
        (
            "echo -q 4096 -t 4096",
            &wide_echo,
            "16777216 prepared work requests",
        ),
    ];
    for (what, hello, needle) in cases {
        let (answer, took, _s) = ask(port, hello);
        assert_refused(what, &answer, took, needle, true);
        served(port, "afterhostile");
    }

    // A point the handshake did not agree on.
    let (answer, _, mut s) = ask(port, &tput);
    assert_eq!(answer["type"], "accept", "{answer}");
    let mut point = find_key(&tput, "points").expect("a tput spec has points")[0].clone();
    point["size"] = json!(12345);
    let start = Instant::now();
    s.write_all(&frame(&json!({
        "type": "tput_prepare",
        "index": 0,
        "point": point,
        "endpoints": [],
    })))
    .unwrap();
    let answer = read_frame(&mut s);
    assert_refused(
        "unknown point",
        &answer,
        start.elapsed(),
        "not in the agreed test",
        true,
    );
    drop(s);
    served(port, "afterpoint");
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn sessions_together_stay_within_max_memory() {
    let port = 18644;
    let _server = start_server_with(port, &["--max-memory", "200m"]);
    // One session holding about 128 MiB (two 64 MiB slots), accepted and idle.
    let mut held = captured_hello(&["write", "-s", "64", "-n", "10"]);
    set_key(&mut held, "sizes", json!([64u64 << 20]));
    let (answer, _, first) = ask(port, &held);
    assert_eq!(answer["type"], "accept", "{answer}");
    // A second of the same size does not fit beside it.
    let (answer, took, _) = ask(port, &held);
    assert_refused(
        "second session",
        &answer,
        took,
        "--max-memory of 200 MiB",
        false,
    );
    // A small one does, and is served.
    served(port, "besideheld");
    drop(first);
}

fn set_key(v: &mut Value, key: &str, new: Value) {
    match v {
        Value::Object(m) => {
            for (k, child) in m.iter_mut() {
                if k == key {
                    *child = new.clone();
                } else {
                    set_key(child, key, new.clone());
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|c| set_key(c, key, new.clone())),
        _ => {}
    }
}

fn find_key<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    match v {
        Value::Object(m) => m
            .iter()
            .find_map(|(k, c)| if k == key { Some(c) } else { find_key(c, key) }),
        Value::Array(items) => items.iter().find_map(|c| find_key(c, key)),
        _ => None,
    }
}
