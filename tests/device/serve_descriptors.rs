//! `serve` measures each client in a thread with a descriptor table of its
//! own (so the kernel need not count references on every doorbell write).
//! Copies of descriptors are then easy to leak: the accepting thread's copy
//! of a client's socket, or a later client's thread's copy of an earlier
//! client's slot. Any such copy keeps a finished client's socket open.

use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{bin, device, ipv4, start_server_with};

/// How long a finished client's socket may stay open in the server: a
/// "must not hang" bound, the accepting thread reaps every 50 ms.
const GONE_WITHIN: Duration = Duration::from_secs(30);

/// Inodes of the server-side sockets on `port` (not the listener) whose
/// TCP state is `state` (hex, as /proc/net/tcp writes it).
fn server_sockets(port: u16, state: &str) -> Vec<String> {
    let me = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|t| std::fs::read_to_string(t).ok())
        .flat_map(|text| {
            text.lines()
                .skip(1)
                .filter_map(|l| {
                    let c: Vec<&str> = l.split_whitespace().collect();
                    (c.len() > 9 && c[1].ends_with(&me) && c[3] == state).then(|| c[9].to_string())
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Every descriptor table of process `pid` (one per thread) that holds
/// socket `inode`, by thread id.
fn holders(pid: u32, inode: &str) -> Vec<String> {
    let target = format!("socket:[{inode}]");
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the server runs");
    let mut found = Vec::new();
    for task in tasks.flatten() {
        let Ok(fds) = std::fs::read_dir(task.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if std::fs::read_link(fd.path()).is_ok_and(|l| l.to_string_lossy() == target) {
                found.push(task.file_name().to_string_lossy().into_owned());
            }
        }
    }
    found
}

/// The server's threads that serve a connection (by the name it gives them).
fn client_threads(pid: u32) -> usize {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == "serve-client")
        })
        .count()
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < GONE_WITHIN,
            "{what}: not within {GONE_WITHIN:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn a_finished_client_leaves_no_copy_of_its_socket_while_another_is_connected() {
    let port = 18647;
    let server = start_server_with(port, &["--timeout", "120"]);
    let pid = server.0.id();
    // The probes start_server_with made to see it listen are gone first.
    wait_for("the listen probes' threads end", || {
        client_threads(pid) == 0 && server_sockets(port, "01").is_empty()
    });
    let target = format!("{}:{port}", ipv4());
    let mut first = Command::new(bin())
        .args([
            "write",
            "--tput",
            "outbound",
            "-D",
            "2",
            "--connect",
            &target,
        ])
        .args(["-d", &device(), "--quiet"])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the first client starts");
    wait_for("the first client connects", || client_threads(pid) == 1);
    let inode = server_sockets(port, "01");
    assert_eq!(inode.len(), 1, "one client connected: {inode:?}");
    let inode = &inode[0];
    // A second connection, silent, whose thread starts while the first
    // client's slot is held: its table begins as a copy of the accepting
    // thread's.
    let second = TcpStream::connect((ipv4().as_str(), port)).unwrap();
    wait_for("the second connection's thread starts", || {
        client_threads(pid) == 2
    });
    assert!(
        !holders(pid, inode).is_empty(),
        "the first client's socket is open in the server while it runs"
    );
    let status = first.wait().unwrap();
    assert!(status.success(), "the first client: {status}");
    wait_for(
        "no thread of the server holds the first client's socket",
        || holders(pid, inode).is_empty(),
    );
    // The silent connection is still served by its thread, and still open.
    assert_eq!(
        client_threads(pid),
        1,
        "the second connection's thread lives on"
    );
    assert_eq!(
        server_sockets(port, "01").len(),
        1,
        "the second connection is up"
    );
    drop(second);
}
