//! `serve` measures each client in a thread with a descriptor table of its
//! own, a `--cm` one once librdmacm's device contexts are open (so the
//! kernel need not count references on every doorbell write). Copies of descriptors are then easy to leak: the
//! accepting thread's copy of a client's socket, or a client's thread's copy
//! of another connection's socket. Any such copy keeps a finished
//! connection open. The kernel's procfs, one listing per thread, is the
//! witness.

use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rdma_bench::results::ResultsDoc;

use super::{
    bin, device, ipv4, kill, kill_pid, latency, measuring_until_stopped, read_json,
    start_server_with,
};

const PORT: u16 = 18647;

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

/// The inode of the one server-side socket on `PORT` in TCP state `state`,
/// which must be the only one (`what` it is, for the failure).
fn the_socket(state: &str, what: &str) -> String {
    let found = server_sockets(PORT, state);
    assert_eq!(found.len(), 1, "{what}: {found:?}");
    found[0].clone()
}

/// Every thread of process `pid` with its name and the sockets its
/// descriptor table holds (by inode); the main thread (the accepting one)
/// named "main".
fn tables(pid: u32) -> Vec<(String, Vec<String>)> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the server runs");
    let mut found = Vec::new();
    for task in tasks.flatten() {
        let name = match task.file_name().to_string_lossy() == pid.to_string() {
            true => "main".to_string(),
            false => std::fs::read_to_string(task.path().join("comm")).unwrap_or_default(),
        };
        let Ok(fds) = std::fs::read_dir(task.path().join("fd")) else {
            continue;
        };
        let sockets = fds
            .flatten()
            .filter_map(|fd| {
                let link = std::fs::read_link(fd.path()).ok()?;
                let link = link.to_string_lossy();
                Some(
                    link.strip_prefix("socket:[")?
                        .strip_suffix(']')?
                        .to_string(),
                )
            })
            .collect();
        found.push((name.trim().to_string(), sockets));
    }
    found
}

/// The threads of process `pid` whose tables hold socket `inode`.
fn holders(pid: u32, inode: &str) -> usize {
    let held = |t: &(String, Vec<String>)| t.1.iter().any(|s| s == inode);
    tables(pid).iter().filter(|t| held(t)).count()
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

/// Of the threads of `pid` that serve connections (threads a session
/// starts inherit the name): how many share the accepting thread's table
/// (theirs holds the listener, `listening`), and whether any has a table
/// of its own (the listener is in the main thread's table, not in its).
fn clients(pid: u32, listening: &str) -> (usize, bool) {
    let tables = tables(pid);
    let holds = |sockets: &Vec<String>| sockets.iter().any(|s| s == listening);
    let serving: Vec<bool> = tables
        .iter()
        .filter(|(name, _)| name == "serve-client")
        .map(|(_, sockets)| holds(sockets))
        .collect();
    let main = tables.iter().find(|(name, _)| name == "main");
    assert!(
        main.is_some_and(|(_, s)| holds(s)),
        "the main thread listens"
    );
    let shared = serving.iter().filter(|&&s| s).count();
    (shared, shared < serving.len())
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

/// `serve` on `PORT` once the probes `start_server_with` made to see it
/// listen are gone: its guard, its pid and its listener's inode.
fn settled_server() -> (super::Server, u32, String) {
    let server = start_server_with(PORT, &["--timeout", "120"]);
    let pid = server.0.id();
    wait_for("the listen probes' threads end", || {
        client_threads(pid) == 0 && server_sockets(PORT, "01").is_empty()
    });
    let listening = the_socket("0A", "one listener");
    (server, pid, listening)
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn a_finished_client_leaves_no_copy_of_its_socket_while_another_is_connected() {
    let (_server, pid, listening) = settled_server();
    let listening = &listening;
    let mut first = client(&["outbound", "-D", "2"]);
    wait_for(
        "the first client's thread measures in a table of its own",
        || clients(pid, listening) == (0, true),
    );
    let inode = &the_socket("01", "one client connected");
    // A second connection, silent, whose thread starts while the first
    // client's slot is held: its table is the accepting thread's.
    let second = TcpStream::connect((ipv4().as_str(), PORT)).unwrap();
    wait_for("the second connection's thread starts", || {
        clients(pid, listening).0 == 1
    });
    assert!(
        holders(pid, inode) > 0,
        "the first client's socket is open in the server while it runs"
    );
    let status = first.wait().unwrap();
    assert!(status.success(), "the first client: {status}");
    wait_for(
        "no thread of the server holds the first client's socket",
        || holders(pid, inode) == 0,
    );
    // The silent connection is still served by its thread, and still open.
    assert_eq!(
        clients(pid, listening),
        (1, false),
        "the second connection's thread lives on, the first's are gone"
    );
    let silent = &the_socket("01", "the second connection is up");
    // A third client, running until it is killed, moves to a table of its
    // own while the silent connection is up: its copy of that socket must
    // go, or the silent connection could not end while the third runs.
    let mut third = client(&["inbound", "-D", "600"]);
    wait_for(
        "the third client's thread measures in a table of its own",
        || clients(pid, listening) == (1, true),
    );
    drop(second);
    wait_for(
        "no thread of the server holds the silent connection's socket",
        || holders(pid, silent) == 0,
    );
    assert!(
        third.try_wait().unwrap().is_none(),
        "the third client still runs"
    );
    assert_eq!(
        clients(pid, listening),
        (0, true),
        "the third client's session lives on, the silent one's thread is gone"
    );
    // The server is the target of an inbound point: it waits on the
    // connection, and sees it end with the client.
    third.kill().unwrap();
    third.wait().unwrap();
    wait_for("the third client's threads end", || {
        client_threads(pid) == 0
    });
}

/// librdmacm reaches the device contexts it opens by descriptor number from
/// every thread, so a `--cm` session may leave the shared table only once
/// they are open there: opened in one session's own table instead, they
/// would be gone with it, and the next `--cm` client refused.
#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn cm_clients_measure_in_tables_of_their_own_side_by_side_and_after_each_other() {
    let (_server, pid, listening) = settled_server();
    let listening = &listening;
    let mut first = client(&["inbound", "--cm", "-D", "600"]);
    wait_for(
        "the first --cm client's thread measures in a table of its own",
        || clients(pid, listening) == (0, true),
    );
    let target = format!("{}:{PORT}", ipv4());
    let second = measuring_until_stopped("cm-second", &["send", "--cm"], &target);
    second.await_line("# interval", 120);
    let serving = client_threads(pid);
    assert_eq!(
        clients(pid, listening),
        (0, true),
        "both --cm sessions ({serving} threads) measure in tables of their own"
    );
    assert!(serving >= 2, "two sessions are served: {serving} threads");
    kill(&first, "-KILL");
    first.wait().unwrap();
    // The second session measures on after the first's table is gone.
    second.await_line("# interval", 60);
    kill_pid(second.id(), "-INT");
    let json = second.json.clone();
    let (status, stderr, _) = second.end(60);
    assert!(
        status.success(),
        "the second --cm client: {status:?} {stderr}"
    );
    let doc: ResultsDoc = serde_json::from_value(read_json(&json)).expect("results");
    let r = doc.latency().next().expect("a latency record");
    assert_eq!(r.connection, "cm", "{r:?}");
    assert!(r.iters > 0, "{r:?}");
    // The server's receive count is the witness of what the client sent.
    assert_eq!(r.server_received, Some(r.sent), "{r:?}");
    wait_for("both sessions' threads end", || client_threads(pid) == 0);
    // A third, after both tables are gone, on contexts opened before them.
    let (doc, _) = latency(
        "cm-third",
        &[
            "write",
            "--cm",
            "-s",
            "64",
            "-n",
            "500",
            "--connect",
            &target,
        ],
    );
    let r = doc.latency().next().expect("a latency record");
    assert_eq!((r.connection.as_str(), r.iters), ("cm", 500), "{r:?}");
}

/// A write --tput client of the server on `PORT`, run with `extra` (the
/// mode first).
fn client(extra: &[&str]) -> std::process::Child {
    Command::new(bin())
        .args(["write", "--tput"])
        .args(extra)
        .arg("--connect")
        .arg(format!("{}:{PORT}", ipv4()))
        .args(["-d", &device(), "--quiet"])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("a client starts")
}
